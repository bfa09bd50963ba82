#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "core/analysis/run_diff.h"

namespace meshscope::cli {

Command addDiff(CLI::App& app) {
    struct Options {
        std::string a, b;
        bool json = false;
        bool partial = false;
        bool noOps = false;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand(
        "diff",
        "Incidents that appear or disappear between two runs (by call site, op and origin), "
        "and where each rank's op sequence first differs. Exit 1 when they differ.");
    sub->add_option("run_a", o->a, "First run")->required();
    sub->add_option("run_b", o->b, "Second run")->required();
    sub->add_flag("--json", o->json, "Print JSON");
    sub->add_flag("--partial", o->partial, "Compare the readable ranks of damaged runs");
    sub->add_flag("--no-op-compare", o->noOps, "Compare incidents only");
    return {sub, [o] {
                auto a = openVerifiedRun(o->a, o->partial, RankReader::VerifyDepth::Everything);
                if (!a) return kExitUnreadable;
                auto b = openVerifiedRun(o->b, o->partial, RankReader::VerifyDepth::Everything);
                if (!b) return kExitUnreadable;
                RunDiff diff = diffRuns(*a, analyzeWithProgress(*a, false, false), *b,
                                        analyzeWithProgress(*b, false, false), !o->noOps);
                if (o->json)
                    std::cout << diffToJson(diff).dump(2, ' ', false,
                                                       nlohmann::json::error_handler_t::replace)
                              << "\n";
                else
                    std::cout << formatDiffText(diff);
                return diff.empty() ? kExitOk : kExitFindings;
            }};
}

}  // namespace meshscope::cli
