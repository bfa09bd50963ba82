#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "app/cli/cli.h"

namespace meshscope::cli {

Command addCheck(CLI::App& app) {
    struct Options {
        std::string path;
        std::vector<std::string> failOn{"any"};
        bool partial = false;
        bool noOps = false;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand(
        "check",
        "CI gate: exit 1 with one line per finding, 0 when the run is clean.\n"
        "  unreconciled: an incident that was not reconciled (raised, strict, failed)\n"
        "  invalid:      a Replicate/scalar promotion whose content differs across ranks\n"
        "  divergent:    ranks whose op or incident sequences differ (predicts hangs)\n"
        "  any:          all of these, plus missing or unreadable ranks");
    sub->add_option("run", o->path, "Run directory or rank file")->required();
    sub->add_option("--fail-on", o->failOn, "unreconciled | invalid | divergent | any (repeatable)")
        ->check(CLI::IsMember({"unreconciled", "invalid", "divergent", "any"}))
        ->delimiter(',')
        ->capture_default_str();
    sub->add_flag("--partial", o->partial,
                  "Check the readable ranks of a damaged run (missing ranks become findings)");
    sub->add_flag("--no-op-compare", o->noOps, "Skip comparing op sequences across ranks");
    return {sub, [o] {
                auto opened = openRun(o->path, o->partial);
                if (!opened) return kExitUnreadable;
                RunAnalysis analysis = analyzeWithProgress(*opened, !o->noOps);
                std::vector<FindingKind> kinds;
                for (const std::string& k : o->failOn) {
                    if (k == "any") {
                        kinds = {FindingKind::Unreconciled, FindingKind::Invalid,
                                 FindingKind::Divergent, FindingKind::MissingRank,
                                 FindingKind::Unreadable};
                        break;
                    }
                    kinds.push_back(*findingKindFromString(k));
                }
                auto findings = findingsOf(analysis, kinds);
                for (const Finding* f : findings)
                    fmt::print("{}: {}\n", toString(f->kind), f->message);
                int64_t reconciled = 0;
                for (const IncidentRef& r : analysis.incidents)
                    reconciled += r.outcome == Outcome::Reconciled;
                fmt::print(stderr,
                           "meshscope check: {} finding(s); {} incident(s) in {} group(s), {} "
                           "reconciled; {} promotion(s) checked across ranks; {} ops compared\n",
                           findings.size(), analysis.incidents.size(), analysis.groups.size(),
                           reconciled, analysis.promotionChecks.size(), analysis.opsCompared);
                return findings.empty() ? kExitOk : kExitFindings;
            }};
}

}  // namespace meshscope::cli
