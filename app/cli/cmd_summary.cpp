#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "core/analysis/run_summary.h"

namespace meshscope::cli {

Command addSummary(CLI::App& app) {
    struct Options {
        std::string path;
        bool json = false;
        bool partial = false;
        bool all = false;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand("summary", "Per-rank ops, steps, incidents and drops");
    sub->add_option("run", o->path, "Run directory or rank file")->required();
    sub->add_flag("--json", o->json, "Print JSON instead of a table");
    sub->add_flag("--partial", o->partial, "Summarize the readable ranks of a damaged run");
    sub->add_flag("--all", o->all,
                  "List every rank (past " + std::to_string(kSummaryRanksListed) +
                      " ranks the table lists those that need a look and sums up the others)");
    return {sub, [o] {
                auto opened = openVerifiedRun(o->path, o->partial, RankReader::VerifyDepth::Ops);
                if (!opened) return kExitUnreadable;
                RunSummary summary = summarize(*opened);
                if (o->json)
                    std::cout << summaryToJson(summary).dump(
                                     2, ' ', false, nlohmann::json::error_handler_t::replace)
                              << "\n";
                else
                    std::cout << formatSummaryText(summary, o->all ? 0 : kSummaryRanksListed);
                return kExitOk;
            }};
}

}  // namespace meshscope::cli
