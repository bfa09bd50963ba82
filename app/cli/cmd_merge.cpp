#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "app/cli/cli.h"
#include "core/store/run_merge.h"

namespace meshscope::cli {

Command addMerge(CLI::App& app) {
    struct Options {
        std::vector<std::string> inputs;
        std::string out;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand(
        "merge", "Combine the run directories of several nodes (same run id) into one run");
    sub->add_option("runs", o->inputs, "Run directories, one per node")
        ->required()
        ->expected(1, -1);
    sub->add_option("-o,--output", o->out, "Run directory to create")->required();
    return {sub, [o] {
                std::vector<std::filesystem::path> inputs(o->inputs.begin(), o->inputs.end());
                MergeResult r;
                try {
                    r = mergeRuns(inputs, o->out);
                } catch (const MergeTargetError& e) {
                    std::cerr << "meshscope: " << e.what() << "\n";
                    return kExitUsage;
                }
                for (const std::string& live : r.liveRanks)
                    std::cerr << "meshscope: warning: " << live
                              << " is still being written: the merged copy holds what it had "
                                 "committed; merge again once the job ended\n";
                std::string ranks;
                for (int rank : r.ranks)
                    ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
                fmt::print("merged {} rank(s) ({}) of world size {} into {}\n", r.ranks.size(),
                           ranks, r.worldSize, o->out);
                if (!r.missingRanks.empty()) {
                    std::string missing;
                    for (int rank : r.missingRanks)
                        missing += (missing.empty() ? "" : ",") + std::to_string(rank);
                    if (r.missingRankCount > int64_t(r.missingRanks.size()))
                        missing += fmt::format(" and {} more",
                                               r.missingRankCount - int64_t(r.missingRanks.size()));
                    std::cerr << "meshscope: warning: rank(s) " << missing
                              << " are in none of the inputs\n";
                }
                return kExitOk;
            }};
}

}  // namespace meshscope::cli
