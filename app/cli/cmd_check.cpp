#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "app/cli/cli.h"
#include "core/util/terminal_text.h"

namespace meshscope::cli {

Command addCheck(CLI::App& app) {
    struct Options {
        std::string path;
        std::vector<std::string> failOn{"any"};
        bool partial = false;
        bool noOps = false;
    };
    auto o = std::make_shared<Options>();
    std::string about = "CI gate: exit 1 with one line per finding, 0 when the run is clean.";
    for (const FindingKindInfo& k : kFindingKinds)
        about += fmt::format("\n  {:<18} {}", std::string(k.name) + ":", k.meaning);
    about += fmt::format("\n  {:<18} {}", "any:", "all of these but reconciled and straggler");
    auto* sub = app.add_subcommand("check", about);
    sub->add_option("run", o->path, "Run directory or rank file")->required();
    std::vector<std::string> kinds;
    for (const FindingKindInfo& k : kFindingKinds)
        kinds.emplace_back(k.name);
    kinds.emplace_back("any");
    std::string help;
    for (const std::string& k : kinds)
        help += (help.empty() ? "" : " | ") + k;
    sub->add_option("--fail-on", o->failOn, help + " (repeatable)")
        ->check(CLI::IsMember(kinds))
        ->delimiter(',')
        ->capture_default_str();
    sub->add_flag("--partial", o->partial,
                  "Check the readable ranks of a damaged run (missing ranks become findings)");
    sub->add_flag("--no-op-compare", o->noOps, "Skip comparing op sequences across ranks");
    return {sub, [o] {
                auto opened =
                    openVerifiedRun(o->path, o->partial, RankReader::VerifyDepth::Everything);
                if (!opened) return kExitUnreadable;
                std::vector<FindingKind> kinds;
                for (const std::string& k : o->failOn) {
                    if (k == "any") {
                        for (const FindingKindInfo& info : kFindingKinds)
                            if (info.inAny) kinds.push_back(info.kind);
                        continue;
                    }
                    kinds.push_back(*findingKindFromString(k));
                }
                auto asked = [&](FindingKind kind) {
                    return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
                };
                // the step timings are read only for the gate that needs them
                RunAnalysis analysis =
                    analyzeWithProgress(*opened, !o->noOps, asked(FindingKind::Straggler));
                auto findings = findingsOf(analysis, kinds);
                std::vector<Finding> optIn;
                if (asked(FindingKind::Reconciled)) optIn = reconciledFindings(analysis);
                if (asked(FindingKind::Straggler))
                    for (Finding& f : stragglerFindings(analysis.time))
                        optIn.push_back(std::move(f));
                for (const Finding& f : optIn)
                    findings.push_back(&f);
                for (const Finding* f : findings)
                    fmt::print("{}: {}\n", toString(f->kind), terminalSafe(f->message));
                // what was left out of the cross-rank comparisons, and why
                for (const RecordingReach& r : analysis.reach)
                    if (!r.note.empty())
                        fmt::print(stderr, "meshscope check: note: {}\n", terminalSafe(r.note));
                int64_t reconciled = 0;
                for (const IncidentRef& r : analysis.incidents)
                    reconciled += r.outcome == Outcome::Reconciled;
                fmt::print(stderr,
                           "meshscope check: {} finding(s); {} incident(s) in {} group(s), {} "
                           "reconciled; {} promotion(s) checked across ranks; {} ops compared; {} "
                           "replicated tensor(s) compared at {} sampled step(s)\n",
                           findings.size(), analysis.incidents.size(), analysis.groups.size(),
                           reconciled, analysis.promotionChecks.size(), analysis.opsCompared,
                           analysis.replicas.tensorsCompared, analysis.replicas.steps.size());
                return findings.empty() ? kExitOk : kExitFindings;
            }};
}

}  // namespace meshscope::cli
