// meshscope: command-line front end. Exit codes (README "Exit codes"):
//   0 success, 1 findings (check), 2 usage error, 3 unreadable run.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/analysis/run_summary.h"
#include "core/launch/launcher.h"
#include "core/policy/policy.h"
#include "core/store/run_reader.h"
#include "core/synth/synthetic_run.h"

namespace {

constexpr int kExitUnreadable = 3;

// Opens a run for a command. Unless `partial`, any unreadable part of the run
// (missing rank, damaged file, bad manifest) is an error: one line per
// problem on stderr, and nullopt.
std::optional<meshscope::RunReader> openRun(const std::string& path, bool partial) {
    meshscope::RunReader run = meshscope::RunReader::open(path);
    for (const auto& p : run.problems())
        std::cerr << "meshscope: " << p.what() << (partial ? " (skipped)" : "") << "\n";
    if ((!partial && !run.problems().empty()) || run.ranks().empty()) {
        if (!partial && !run.problems().empty() && !run.ranks().empty())
            std::cerr << "meshscope: use --partial to read the " << run.ranks().size()
                      << " readable rank(s)\n";
        return std::nullopt;
    }
    return run;
}

int runSummary(const std::string& path, bool json, bool partial) {
    auto opened = openRun(path, partial);
    if (!opened) return kExitUnreadable;
    meshscope::RunReader& run = *opened;
    meshscope::RunSummary summary = meshscope::summarize(run);
    if (json)
        std::cout << meshscope::summaryToJson(summary).dump(2) << "\n";
    else
        std::cout << meshscope::formatSummaryText(summary);
    return 0;
}

int runInfo(const std::string& path) {
    // info describes damaged runs too: problems are part of its output.
    meshscope::RunReader run = meshscope::RunReader::open(path);
    if (const auto& m = run.manifest()) {
        fmt::print("run id       {}\ncreated      {}\nworld size   {}\nschema       v{}\n",
                   m->runId, m->created, m->worldSize, m->schemaVersion);
        std::string command;
        for (const auto& arg : m->command)
            command += (command.empty() ? "" : " ") + arg;
        fmt::print("command      {}\ntorch        {}\n", command, m->torchVersion);
    }
    for (const auto& rank : run.ranks()) {
        const auto& info = rank.info();
        fmt::print("rank {:<5}   {}  host {} pid {}  {}\n", info.rank, rank.path().string(),
                   info.hostname, info.pid, info.endedNs ? "closed" : "open or killed");
    }
    for (const auto& p : run.problems())
        fmt::print("problem      {}\n", p.what());
    return run.problems().empty() ? 0 : kExitUnreadable;
}

int runSynth(const std::string& out, const meshscope::SyntheticRunSpec& spec) {
    if (std::filesystem::exists(out) && !std::filesystem::is_empty(out)) {
        std::cerr << "meshscope: " << out << ": already exists and is not empty\n";
        return 2;
    }
    auto totals = meshscope::writeSyntheticRun(out, spec);
    fmt::print("wrote {}: {} ranks, {} ops, {} incidents, {} steps\n", out, spec.ranks, totals.ops,
               totals.incidents, totals.steps);
    return 0;
}

// Where the Python package with the loader lives: $MESHSCOPE_PYTHONPATH, the
// build tree's staged package, or the `meshscope` importable by python3.
std::vector<std::string> agentPythonPath() {
    if (const char* env = std::getenv("MESHSCOPE_PYTHONPATH"); env && *env) {
        std::string root = env;
        return {root + "/meshscope/_loader", root};
    }
#ifdef MESHSCOPE_STAGED_PYTHON_DIR
    std::filesystem::path staged = MESHSCOPE_STAGED_PYTHON_DIR;
    if (std::filesystem::exists(staged / "meshscope" / "_loader" / "sitecustomize.py"))
        return {(staged / "meshscope" / "_loader").string(), staged.string()};
#endif
    // Installed by pip: the environment's python sits beside this executable.
    std::string python = "python3";
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec && std::filesystem::exists(self.parent_path() / "python"))
        python = (self.parent_path() / "python").string();
    std::string found;
    std::string query = python +
                        " -c 'import meshscope,os;print(os.path.dirname(os.path.dirname("
                        "meshscope.__file__)))' 2>/dev/null";
    if (FILE* p = popen(query.c_str(), "r")) {
        char buffer[4096];
        while (fgets(buffer, sizeof buffer, p))
            found += buffer;
        pclose(p);
    }
    while (!found.empty() && (found.back() == '\n' || found.back() == '\r'))
        found.pop_back();
    if (found.empty())
        throw std::runtime_error(
            "cannot find the meshscope Python package: build with the capture agent "
            "(scripts/build.sh), pip install it, or set MESHSCOPE_PYTHONPATH");
    return {found + "/meshscope/_loader", found};
}

int runRecord(meshscope::RecordOptions options) {
    options.pythonPath = agentPythonPath();
    meshscope::RecordResult result = meshscope::record(options, std::cerr);
    std::cerr << "meshscope: run recorded in " << result.runDir.string() << "\n";
    try {
        meshscope::RunReader run = meshscope::RunReader::open(result.runDir);
        if (!run.ranks().empty())
            std::cerr << meshscope::formatSummaryText(meshscope::summarize(run));
    } catch (const meshscope::StoreError& e) {
        std::cerr << "meshscope: " << e.what() << "\n";
    }
    return result.exitCode;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"meshscope: find and fix mixed torch.Tensor/DTensor incidents"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "meshscope 0.1.0");

    std::string path;
    bool json = false;
    auto* summary = app.add_subcommand("summary", "Per-rank ops, steps, incidents and drops");
    summary->add_option("run", path, "Run directory or rank file")->required();
    summary->add_flag("--json", json, "Print JSON instead of a table");
    bool partial = false;
    summary->add_flag("--partial", partial, "Summarize the readable ranks of a damaged run");

    auto* info = app.add_subcommand("info", "Manifest and rank files of a run");
    info->add_option("run", path, "Run directory or rank file")->required();

    meshscope::SyntheticRunSpec spec;
    std::string out;
    auto* synth = app.add_subcommand("synth", "Write a synthetic run (demo, benchmarks)");
    synth->add_option("-o,--output", out, "Run directory to create")->required();
    synth->add_option("--ranks", spec.ranks, "Number of ranks")->check(CLI::Range(1, 4096));
    synth->add_option("--steps", spec.steps, "Optimizer steps")->check(CLI::Range(1, 100000000));
    synth->add_option("--layers", spec.layers, "Layers per step")->check(CLI::Range(1, 1000));
    synth->add_option("--ops-per-rank", spec.opsPerRank,
                      "Approximate ops per rank (overrides --steps)");
    synth->add_option("--incidents-per-step", spec.incidentsPerStep)->check(CLI::Range(0, 1000));
    synth->add_option("--seed", spec.seed);

    meshscope::RecordOptions rec;
    std::string runDir;
    auto* record = app.add_subcommand(
        "record",
        "Run a training command with the capture agent in every worker:\n"
        "  meshscope record [-o RUN] [--policy P] [--level L] -- torchrun --nproc_per_node=2 "
        "train.py\n  meshscope record -n 2 -- python train.py");
    record->add_option("-o,--output", runDir, "Run directory (default ./meshscope-runs/<time>)");
    record
        ->add_option("--policy", rec.policy,
                     "observe | replicate | auto | strict, or a TOML policy file")
        ->capture_default_str();
    record->add_option("--level", rec.level, "dtensor | all")
        ->check(CLI::IsMember({"dtensor", "all"}))
        ->capture_default_str();
    record->add_option("-n,--nproc", rec.nproc, "Start N local ranks (no torchrun needed)")
        ->check(CLI::Range(1, 256));
    record->add_option("command", rec.command, "Training command, after --")
        ->required()
        ->expected(-1);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    try {
        if (*summary) return runSummary(path, json, partial);
        if (*info) return runInfo(path);
        if (*synth) return runSynth(out, spec);
        if (*record) {
            rec.runDir = runDir;
            return runRecord(rec);
        }
    } catch (const meshscope::StoreError& e) {
        std::cerr << "meshscope: " << e.what() << "\n";
        return kExitUnreadable;
    } catch (const meshscope::PolicyError& e) {
        std::cerr << "meshscope: bad policy: " << e.what() << "\n";
        return 2;
    } catch (const std::runtime_error& e) {
        std::cerr << "meshscope: " << e.what() << "\n";
        return 2;
    }
    return 2;
}
