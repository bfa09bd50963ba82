// The JSON report: the run's analysis as one document (what the golden
// tests compare; `meshscope report --format json`).

#include <ostream>

#include "core/report/report.h"
#include "core/report/report_text.h"

namespace meshscope {
namespace {

using namespace report_text;

nlohmann::json frameToJson(const SourceFrame& f) {
    return {{"file", f.file}, {"line", f.line}, {"function", f.function}};
}

template <typename Map, typename Key>
nlohmann::json countsToJson(const Map& counts, Key key) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, n] : counts)
        out[key(k)] = n;
    return out;
}

nlohmann::json groupToJson(const IncidentGroup& g) {
    return {
        {"id", g.id},
        {"kind", toString(g.kind)},
        {"op", g.op},
        {"origin", originText(g.origin)},
        {"origin_description", describeOrigin(g.origin)},
        {"site", frameToJson(g.site)},
        {"count", g.count},
        {"per_rank", countsToJson(g.perRank, [](int r) { return std::to_string(r); })},
        {"per_step", countsToJson(g.perStep, [](int64_t s) { return std::to_string(s); })},
        {"first_step", g.firstStep},
        {"last_step", g.lastStep},
        {"actions", countsToJson(g.actions, [](Action a) { return std::string(toString(a)); })},
        {"outcomes", countsToJson(g.outcomes, [](Outcome o) { return std::string(toString(o)); })},
        {"unreconciled", g.unreconciled},
        {"verification",
         {{"verified", g.verified}, {"invalid", g.invalid}, {"unverified", g.unverified}}},
        {"evidence", g.evidence},
        {"distinct_evidence", g.distinctEvidence},
        {"fix", fixToJson(g.fix)},
        {"example", incidentDetailToJson(g.example, explainIncident(g.example, &g))},
    };
}

// Where one rank stopped (RankStop); `stopped_in` is the kind of the
// collective incident it ended in, null when none.
nlohmann::json replicasToJson(const ReplicaCheck& check) {
    nlohmann::json drifts = nlohmann::json::array();
    for (const ReplicaDrift& d : check.drifts)
        drifts.push_back({{"name", d.name},
                          {"replica_key", d.key},
                          {"module", d.module},
                          {"placements", d.placements},
                          {"first_step", d.firstStep},
                          {"last_equal_step", d.lastEqualStep},
                          {"first_role", d.firstRole},
                          {"rank_groups", d.groups},
                          {"cause", toString(d.cause)},
                          {"cause_text", d.causeText},
                          {"fix", fixToJson(d.fix)}});
    return {{"sampled_steps", check.steps},
            {"tensors_compared", check.tensorsCompared},
            {"drifts", drifts}};
}

nlohmann::json stopToJson(const RankStop& s) {
    nlohmann::json pendingSite = nullptr;
    if (s.stoppedIn) pendingSite = frameToJson(s.pendingSite);
    nlohmann::json exceptionSite = nullptr;
    if (!s.exception.empty()) exceptionSite = frameToJson(s.exceptionSite);
    return {{"rank", s.rank},
            {"closed", s.closed},
            {"end", toString(s.end)},
            {"ended", s.ended},
            {"exception", s.exception},
            {"exception_site", exceptionSite},
            {"collectives", s.collectives},
            {"last_collective", s.lastCollective},
            {"still_pending", s.stillPending},
            {"stopped_in", s.stoppedIn ? nlohmann::json(toString(*s.stoppedIn)) : nullptr},
            {"pending", s.pending},
            {"pending_site", pendingSite},
            {"state", s.state()}};
}

nlohmann::json divergenceToJson(const Divergence& d) {
    return {{"kind", toString(d.kind)}, {"rank", d.rank},     {"thread", d.thread},
            {"index", d.index},         {"step", d.step},     {"expected", d.expected},
            {"actual", d.actual},       {"others", d.others}, {"site", frameToJson(d.site)}};
}

}  // namespace

// A fix with where its code goes: "place" {how: before/after/replace with
// file and line, or unplaced with why}.
nlohmann::json fixToJson(const FixSuggestion& fix) {
    nlohmann::json place = {{"how", toString(fix.place.how)}};
    if (fix.place.how == FixPlace::How::Unplaced) {
        place["why"] = fix.place.unplaced;
    } else {
        place["file"] = fix.place.file;
        place["line"] = fix.place.line;
    }
    return {{"summary", fix.summary}, {"code", fix.code}, {"place", place}};
}

nlohmann::json explanationToJson(const IncidentExplanation& e) {
    return {{"kind", toString(e.kind)},
            {"kind_title", e.kindTitle},
            {"summary", e.summary},
            {"plain_operand", e.plainOperand},
            {"origin", e.origin},
            {"evidence", e.evidence},
            {"created_at", e.createdAt},
            {"reconciliation", {{"label", e.reconciliationLabel}, {"text", e.reconciliation}}},
            {"policy_rule", e.policyRule},
            {"verdict", e.verdict},
            {"fix", fixToJson(e.fix)},
            {"fix_scope", e.fixScope},
            {"placements", e.placements}};
}

nlohmann::json incidentDetailToJson(const IncidentDetail& d, const IncidentExplanation& e) {
    nlohmann::json stack = nlohmann::json::array();
    for (const SourceFrame& f : d.stack)
        stack.push_back(frameToJson(f));
    nlohmann::json operands = nlohmann::json::array();
    for (const OperandDetail& o : d.operands) {
        nlohmann::json j = {
            {"index", o.index}, {"role", o.output ? "output" : "input"}, {"plain", o.plain}};
        if (o.scalar) {
            j["scalar"] = o.scalarValue;
        } else {
            j.update({{"dtype", o.dtype},
                      {"shape", o.shape},
                      {"local_shape", o.localShape},
                      {"device", o.device},
                      {"placements", o.placements},
                      {"label", o.label},
                      {"numel", o.numel}});
        }
        operands.push_back(std::move(j));
    }
    nlohmann::json mesh = nullptr;
    if (d.mesh)
        mesh = {{"device_type", d.mesh->deviceType},
                {"shape", d.mesh->shape},
                {"dim_names", d.mesh->dimNames},
                {"ranks", d.mesh->ranks}};
    return {{"rank", d.rank},
            {"seq", d.seq.value()},
            {"step", d.step},
            {"kind", toString(d.kind)},
            {"op", d.op},
            {"origin", originText(d.origin)},
            {"evidence", d.evidence},
            {"policy_rule", d.policyRule},
            {"action", toString(d.action)},
            {"outcome", toString(d.outcome)},
            {"error", d.error},
            {"promoted_placements", d.promotedPlacements},
            {"fingerprint", d.fingerprint ? nlohmann::json(fingerprintText(d.fingerprint))
                                          : nlohmann::json(nullptr)},
            {"plain_operand", d.operandIndex},
            {"created_at", d.createdAt},
            {"stack", stack},
            {"operands", operands},
            {"mesh", mesh},
            {"detail", d.detail},
            {"explanation", explanationToJson(e)}};
}

// Where the time goes (time_breakdown.h): op statistics, each rank's
// steps in overview order (cells by column), the slowest rank of each step
// and the stragglers `check --fail-on straggler` would report.
nlohmann::json timeToJson(const TimeBreakdown& t) {
    nlohmann::json ops = nlohmann::json::array();
    for (const OpStat& o : t.ops)
        ops.push_back({{"name", o.name},
                       {"collective", o.collective},
                       {"count", o.count},
                       {"total_ns", o.totalNs},
                       {"mean_ns", o.meanNs()},
                       {"max_ns", o.maxNs},
                       {"bytes", o.bytes},
                       {"ranks", o.ranks},
                       {"placements", o.placements},
                       {"more_placements", o.morePlacements}});
    nlohmann::json columns = nlohmann::json::array();
    for (const StepColumn& c : t.columns)
        columns.push_back({c.firstStep, c.lastStep});
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankSteps& r : t.ranks) {
        nlohmann::json cells = nlohmann::json::array();
        for (const StepCell& c : r.cells)
            cells.push_back({c.steps, c.wallNs, c.collectiveNs, c.incidents, c.slowest});
        ranks.push_back({{"rank", r.rank},
                         {"steps", r.steps},
                         {"median_step_ns", r.medianStepNs},
                         {"median_outside_collectives_ns", r.medianOutsideNs},
                         {"median_collective_ns", r.medianCollectiveNs},
                         {"slowest_in", r.slowestIn},
                         {"incidents", r.incidents},
                         {"deviation", r.deviation},
                         {"cells", cells}});
    }
    nlohmann::json slowest = nlohmann::json::array();
    for (const SlowestRank& s : t.slowest)
        slowest.push_back({{"step", s.step},
                           {"rank", s.rank},
                           {"outside_collectives_ns", s.outsideNs},
                           {"others_mean_ns", s.meanOthersNs},
                           {"ranks", s.ranks}});
    nlohmann::json stragglers = nlohmann::json::array();
    for (const Finding& f : stragglerFindings(t))
        stragglers.push_back({{"rank", f.rank}, {"message", f.message}});
    return {{"ops", ops},
            {"steps_per_column", t.stepsPerColumn},
            {"columns", columns},
            {"cell_fields", {"steps", "wall_ns", "collective_ns", "incidents", "slowest"}},
            {"ranks", ranks},
            {"slowest", slowest},
            {"stragglers", stragglers}};
}

nlohmann::json reportToJson(const RunAnalysis& a, const ReportOptions& options) {
    nlohmann::json findings = nlohmann::json::array();
    for (const Finding& f : a.findings)
        findings.push_back({{"kind", toString(f.kind)},
                            {"message", f.message},
                            {"group", f.group},
                            {"rank", f.rank}});
    nlohmann::json groups = nlohmann::json::array();
    for (const IncidentGroup& g : a.groups)
        groups.push_back(groupToJson(g));
    int64_t verified = 0, invalid = 0, unverified = 0;
    nlohmann::json invalidChecks = nlohmann::json::array();
    for (const PromotionCheck& c : a.promotionChecks) {
        verified += c.verdict == Verdict::Verified;
        unverified += c.verdict == Verdict::Unverified;
        if (c.verdict != Verdict::Invalid) continue;
        ++invalid;
        nlohmann::json fps = nlohmann::json::object();
        for (const auto& [rank, fp] : c.fingerprints)
            fps[std::to_string(rank)] = fp ? nlohmann::json(fingerprintText(fp)) : nullptr;
        invalidChecks.push_back({{"group", c.group},
                                 {"step", c.step},
                                 {"occurrence", c.occurrence},
                                 {"action", toString(c.action)},
                                 {"fingerprints", fps}});
    }
    nlohmann::json divergences = nlohmann::json::array();
    for (const Divergence& d : a.divergences)
        divergences.push_back(divergenceToJson(d));
    nlohmann::json stops = nlohmann::json::array();
    for (const RankStop& s : a.stops)
        stops.push_back(stopToJson(s));
    nlohmann::json notes = nlohmann::json::array();  // what the comparisons left out
    for (const RecordingReach& r : a.reach)
        if (!r.note.empty()) notes.push_back(r.note);
    nlohmann::json report = {{"meshscope_report", 1},
                             {"generator", options.generator},
                             {"run", summaryToJson(a.summary)},
                             {"findings", findings},
                             {"groups", groups},
                             {"promotions",
                              {{"checked", int64_t(a.promotionChecks.size())},
                               {"verified", verified},
                               {"invalid", invalid},
                               {"unverified", unverified},
                               {"invalid_checks", invalidChecks}}},
                             {"divergences", divergences},
                             {"stops", stops},
                             {"comparison_notes", notes},
                             {"missing_ranks", a.missingRanks},
                             {"ops_compared", a.opsCompared}};
    if (a.time.computed) report["time"] = timeToJson(a.time);
    // only where replicas were compared (golden reports stay as they are)
    if (a.replicas.tensorsCompared > 0) report["replicas"] = replicasToJson(a.replicas);
    // only when the list above is cut short (golden reports stay as they are)
    if (a.missingRankCount > int64_t(a.missingRanks.size()))
        report["missing_rank_count"] = a.missingRankCount;
    return report;
}

void writeJsonReport(const RunReader&, const RunAnalysis& analysis, std::ostream& out,
                     const ReportOptions& options) {
    out << reportToJson(analysis, options).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
}

}  // namespace meshscope
