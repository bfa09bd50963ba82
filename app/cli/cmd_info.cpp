#include <fmt/format.h>

#include <memory>

#include "app/cli/cli.h"
#include "core/analysis/run_summary.h"
#include "core/util/terminal_text.h"

namespace meshscope::cli {

Command addInfo(CLI::App& app) {
    auto path = std::make_shared<std::string>();
    auto* sub = app.add_subcommand("info", "Manifest and rank files of a run");
    sub->add_option("run", *path, "Run directory or rank file")->required();
    return {sub, [path] {
                // info describes damaged runs too: what it could read on stdout,
                // each problem on stderr as every command writes them.
                RunReader run = RunReader::open(*path);
                if (const auto& m = run.manifest()) {
                    fmt::print(
                        "run id       {}\ncreated      {}\nworld size   {}\nschema       v{}\n",
                        terminalSafe(m->runId), terminalSafe(m->created), m->worldSize,
                        m->schemaVersion);
                    std::string command;
                    for (const auto& arg : m->command)
                        command += (command.empty() ? "" : " ") + arg;
                    fmt::print("command      {}\ntorch        {}\n", terminalSafe(command),
                               terminalSafe(m->torchVersion));
                }
                for (const auto& rank : run.ranks()) {
                    const auto& info = rank.info();
                    fmt::print("rank {:<5}   {}  host {} pid {}  {}\n", info.rank,
                               terminalSafe(rank.path().string()), terminalSafe(info.hostname),
                               info.pid, rankStatusText(run, info));
                }
                std::vector<std::string> problems;
                for (const auto& p : run.problems())
                    problems.emplace_back(p.what());
                // the op counts other commands show come from chunk headers: check the ops
                for (const RankReader& rank : run.ranks())
                    try {
                        rank.verify(RankReader::VerifyDepth::Ops);
                    } catch (const StoreError& e) {
                        problems.emplace_back(e.what());
                    }
                for (const std::string& p : problems)
                    fmt::print(stderr, "meshscope: {}\n", terminalSafe(p));
                return problems.empty() ? kExitOk : kExitUnreadable;
            }};
}

}  // namespace meshscope::cli
