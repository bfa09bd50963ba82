#include <spawn.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "app/cli/cli.h"
#include "app/cli/record/launcher.h"
#include "core/analysis/run_analysis.h"
#include "core/analysis/run_summary.h"
#include "core/model/settings.h"
#include "core/policy/policy.h"
#include "core/store/manifest.h"
#include "core/store/schema.h"

namespace meshscope::cli {
namespace {

// Where the Python package with the loader lives: $MESHSCOPE_PYTHONPATH, the
// build tree's staged package, or the `meshscope` importable by python3.
std::vector<std::string> agentPythonPath() {
    if (const char* env = std::getenv(std::string(setting("pythonpath").env).c_str());
        env && *env) {
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
            "(scripts/build.sh), pip install it, or set " +
            std::string(setting("pythonpath").env));
    return {found + "/meshscope/_loader", found};
}

// The GUI beside this executable, started detached (it outlives the
// recording) once the run directory has its manifest, so it opens the run
// and follows it live.
std::jthread startGuiWhenRunAppears(const std::filesystem::path& runDir) {
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) {
        std::cerr << "meshscope: --gui: no display here; open the run afterwards with "
                     "meshscope-gui "
                  << runDir.string() << "\n";
        return {};
    }
    std::error_code ec;
    std::filesystem::path gui =
        std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "meshscope-gui";
    if (ec || !std::filesystem::exists(gui)) {
        std::cerr << "meshscope: --gui: meshscope-gui is not installed beside meshscope "
                     "(build with -DMESHSCOPE_BUILD_UI=ON)\n";
        return {};
    }
    return std::jthread([gui, runDir](std::stop_token stop) {
        while (!stop.stop_requested() && !std::filesystem::exists(runDir / schema::kManifestName))
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (stop.stop_requested() && !std::filesystem::exists(runDir / schema::kManifestName))
            return;
        std::string exe = gui.string(), dir = std::filesystem::absolute(runDir).string();
        char* argv[] = {exe.data(), dir.data(), nullptr};
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);  // survives the recording
        pid_t pid = 0;
        if (posix_spawn(&pid, exe.c_str(), nullptr, &attr, argv, environ) != 0)
            std::cerr << "meshscope: --gui: cannot start " << exe << "\n";
        posix_spawnattr_destroy(&attr);
    });
}

// `location` relative to the working directory when it lies below it.
std::string shownPath(const std::string& location) {
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    if (ec || location.empty() || location.front() != '/') return location;
    std::string prefix = cwd.string() + "/";
    return location.starts_with(prefix) ? location.substr(prefix.size()) : location;
}

// The incident groups of the run, one line each (call site, op, kind or
// origin, what the policy did, how often), whatever the policy: `auto` and
// `replicate` repair what they find, and the call sites still need a fix.
void printIncidentGroups(const RunAnalysis& analysis, std::ostream& out) {
    if (analysis.groups.empty()) return;
    constexpr size_t kListed = 12;
    out << fmt::format("incidents by call site ({} group(s)):\n", analysis.groups.size());
    for (size_t i = 0; i < analysis.groups.size() && i < kListed; ++i) {
        const IncidentGroup& g = analysis.groups[i];
        std::string what = g.kind == IncidentKind::MixedTensor
                               ? fmt::format("origin {}", char(g.origin))
                               : std::string(incidentKindInfo(g.kind).tag);
        std::string actions = formatActions(g);
        out << fmt::format("  {}  {}  {}  x{}{}{}\n", shownPath(formatLocation(g.site)), g.op, what,
                           g.count, actions.empty() ? "" : "  (" + actions + ")",
                           g.unreconciled ? fmt::format("  {} unreconciled", g.unreconciled) : "");
        if (!g.fix.summary.empty()) out << "      fix: " << g.fix.summary << "\n";
    }
    if (analysis.groups.size() > kListed)
        out << fmt::format("  ... and {} more group(s): see the report\n",
                           analysis.groups.size() - kListed);
}

// Replicated state the ranks no longer hold equal (the replica check), one
// line each with its fix: nothing raised for it while the job ran.
void printDrifts(const ReplicaCheck& replicas, std::ostream& out) {
    if (replicas.drifts.empty()) return;
    constexpr size_t kListed = 12;
    out << fmt::format(
        "replicas that drift apart ({} parameter(s); compared at {} sampled "
        "step(s)):\n",
        replicas.drifts.size(), replicas.steps.size());
    for (size_t i = 0; i < replicas.drifts.size() && i < kListed; ++i) {
        const ReplicaDrift& d = replicas.drifts[i];
        out << fmt::format("  {}{}  ranks {}  from step {} ({} first)\n      {}\n      fix: {}\n",
                           d.name, d.key.empty() ? "" : " [" + d.key + "]",
                           formatRankGroups(d.groups), d.firstStep, d.firstRole, d.causeText,
                           d.fix.code);
    }
    if (replicas.drifts.size() > kListed)
        out << fmt::format("  ... and {} more: meshscope check\n",
                           replicas.drifts.size() - kListed);
}

// What to run next on the recorded run.
void printNextSteps(const std::filesystem::path& runDir, std::ostream& out) {
    std::string dir = runDir.string();
    out << "next:\n"
        << "  meshscope check " << dir
        << "    # findings, one a line; exit 1 on any (--fail-on reconciled: also what "
           "the policy repaired)\n"
        << "  meshscope report " << dir << " -o " << (runDir / "report.html").string()
        << "    # incidents, fixes, placements\n";
    std::error_code ec;
    auto gui = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "meshscope-gui";
    if (!ec && std::filesystem::exists(gui))
        out << "  " << gui.string() << " " << dir << "    # the timeline of every rank\n";
}

// A run directory record() made that holds nothing but how the ranks
// ended: removed, so no empty run is left to open.
void removeIfOnlyLaunchFile(const RecordResult& result) {
    if (!result.createdDir) return;
    std::error_code ec;
    constexpr std::string_view kLeft[] = {"launch.json", kJobClaimName, ".manifest.lock"};
    for (const auto& entry : std::filesystem::directory_iterator(result.runDir, ec))
        if (std::find(std::begin(kLeft), std::end(kLeft), entry.path().filename().string()) ==
            std::end(kLeft))
            return;
    for (std::string_view name : kLeft)
        std::filesystem::remove(result.runDir / name, ec);
    std::filesystem::remove(result.runDir, ec);
}

}  // namespace

Command addRecord(CLI::App& app) {
    struct Options {
        RecordOptions rec;
        std::string runDir;
        bool gui = false;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand(
        "record",
        "Run a training command with the capture agent in every worker:\n"
        "  meshscope record [-o RUN] [--policy P] [--level L] -- torchrun --nproc_per_node=2 "
        "train.py\n  meshscope record -n 2 -- python train.py");
    sub->add_option("-o,--output", o->runDir, "Run directory (default ./meshscope-runs/<time>)");
    std::string policies;
    for (std::string_view name : policyModeNames())
        policies += (policies.empty() ? "" : " | ") + std::string(name);
    sub->add_option("--policy", o->rec.policy, policies + ", or a TOML policy file")
        ->capture_default_str();
    sub->add_option("--level", o->rec.level, "dtensor | all")
        ->check(CLI::IsMember({"dtensor", "all"}))
        ->capture_default_str();
    sub->add_option("-n,--nproc", o->rec.nproc, "Start N local ranks (no torchrun needed)")
        ->check(CLI::Range(1, 256));
    sub->add_option("--kill-grace", o->rec.killGraceSeconds,
                    "Seconds between SIGTERM and SIGKILL when the job stops (a rank failed, or "
                    "Ctrl-C / SIGTERM to meshscope); env " +
                        std::string(setting("kill_grace").env))
        ->envname(std::string(setting("kill_grace").env))
        ->check(CLI::Range(0, 3600))
        ->capture_default_str();
    sub->add_option("--watchdog", o->rec.watchdogSeconds,
                    "Seconds a collective may stay pending before each rank writes the Python "
                    "stacks of its threads into its rank file and prints them (0: off; default " +
                        std::string(setting("watchdog_s").fallback) +
                        ", PyTorch's NCCL heartbeat timeout); env " +
                        std::string(setting("watchdog_s").env))
        ->check(CLI::Range(0.0, 86400.0));
    sub->add_option("--run-id", o->rec.runId,
                    "The run id every rank records (default: a new one). Give each node of a "
                    "multi-node job the same id, then `meshscope merge` their folders; env " +
                        std::string(setting("run_id").env))
        ->envname(std::string(setting("run_id").env));
    sub->add_flag("--gui", o->gui, "Open the run in meshscope-gui and follow it live");
    sub->add_option("command", o->rec.command, "Training command, after --")
        ->required()
        ->expected(-1);
    return {sub, [o] {
                RecordOptions options = o->rec;
                options.runDir = o->runDir;
                options.pythonPath = agentPythonPath();
                std::jthread gui;
                if (o->gui) {
                    if (options.runDir.empty()) options.runDir = defaultRunDir();
                    gui = startGuiWhenRunAppears(options.runDir);
                }
                RecordResult result;
                try {
                    result = record(options, std::cerr);
                } catch (const CommandNotFound& e) {
                    std::cerr << "meshscope: " << e.what() << "\n";
                    return kExitCommandNotFound;
                }
                int incomplete = result.exitCode ? result.exitCode : kExitIncompleteRecording;
                if (result.dirDeleted) return incomplete;  // said by record()
                if (result.rankFiles == 0) {
                    if (!result.ranks.empty()) {
                        std::cerr << "meshscope: nothing was recorded: each rank that attached "
                                     "could not create its file (said above)\n";
                    } else {
                        // the ranks said why ("meshscope: not recording pid ...")
                        std::cerr << "meshscope: nothing was recorded: no process of the job "
                                     "attached the capture agent (it attaches in each Python "
                                     "process with torch; one that could not said why above, as "
                                     "'meshscope: not recording')\n";
                    }
                    removeIfOnlyLaunchFile(result);
                    return incomplete;
                }
                std::cerr << "meshscope: run recorded in " << result.runDir.string() << "\n";
                try {
                    RunReader run = RunReader::open(result.runDir);
                    if (!run.ranks().empty()) {
                        std::cerr << formatSummaryText(summarize(run));
                        AnalysisOptions analysisOptions;
                        analysisOptions.compareOps = false;  // `check` does that
                        RunAnalysis analysis = analyze(run, analysisOptions);
                        printIncidentGroups(analysis, std::cerr);
                        printDrifts(analysis.replicas, std::cerr);
                    }
                } catch (const StoreError& e) {
                    std::cerr << "meshscope: " << e.what() << "\n";
                }
                printNextSteps(result.runDir, std::cerr);
                if (result.lostRecords) {
                    std::cerr << "meshscope: the recording is incomplete: records were lost to "
                                 "the disk (said above); what was committed is readable\n";
                    return incomplete;
                }
                return result.exitCode;
            }};
}

}  // namespace meshscope::cli
