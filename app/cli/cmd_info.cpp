#include <fmt/format.h>

#include <memory>

#include "app/cli/cli.h"

namespace meshscope::cli {

Command addInfo(CLI::App& app) {
    auto path = std::make_shared<std::string>();
    auto* sub = app.add_subcommand("info", "Manifest and rank files of a run");
    sub->add_option("run", *path, "Run directory or rank file")->required();
    return {
        sub, [path] {
            // info describes damaged runs too: problems are part of its output.
            RunReader run = RunReader::open(*path);
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
            return run.problems().empty() ? kExitOk : kExitUnreadable;
        }};
}

}  // namespace meshscope::cli
