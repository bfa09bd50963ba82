#include "core/analysis/incident_explanation.h"

#include <fmt/format.h>

#include "core/analysis/fix_placement.h"

#include <algorithm>

namespace meshscope {

IncidentState incidentState(Outcome outcome, Verdict verdict) {
    if (verdict == Verdict::Invalid) return IncidentState::Invalid;
    return outcome == Outcome::Reconciled ? IncidentState::Promoted : IncidentState::Raised;
}

std::string describeVerdict(Verdict verdict) {
    const std::string name(toString(verdict));
    switch (verdict) {
        case Verdict::Verified:
            return name + ": the same content on every rank that promoted it";
        case Verdict::Invalid:
            return name + ": ranks promoted different content as if it were the same";
        case Verdict::Unverified:
            return name + ": only one rank recorded it, or no fingerprint";
        case Verdict::NotChecked:
            break;
    }
    return name + ": not a promotion that must agree across ranks";
}

namespace {

const OperandDetail* plainOperandOf(const IncidentDetail& incident) {
    auto it = std::find_if(incident.operands.begin(), incident.operands.end(),
                           [](const OperandDetail& o) { return o.plain; });
    return it == incident.operands.end() ? nullptr : &*it;
}

}  // namespace

FixSuggestion suggestFixFor(const IncidentDetail& incident) {
    if (incident.kind != IncidentKind::MixedTensor) {
        FailedCall call{incident.op, {}, -1, {}, {}};
        for (const OperandDetail& o : incident.operands) {
            if (o.output || o.placements.empty()) continue;
            if (call.placements.empty()) {
                call.ndim = shapeRank(o.shape);
                call.name = o.label;
            }
            call.placements.push_back(o.placements);
        }
        // a failure's detail is its op's non-tensor arguments ("dim=-1")
        if (incident.kind == IncidentKind::NoShardingStrategy ||
            incident.kind == IncidentKind::DTensorError)
            call.args = incident.detail;
        return fixForFailure(incident.kind, call, incident.error);
    }
    const OperandDetail* plain = plainOperandOf(incident);
    FixFacts facts;
    facts.name = plain ? std::string_view(plain->label) : std::string_view();
    facts.ndim = plain ? shapeRank(plain->shape) : -1;
    if (incident.mesh) facts.meshDims = incident.mesh->dimNames;
    SourceLines source;
    return placeFix(fixForIncident(incident.origin, incident.evidence, facts), incident, source);
}

std::string plainOperandName(const IncidentDetail& incident) {
    const OperandDetail* plain = plainOperandOf(incident);
    return plain ? plain->label : std::string();
}

std::string describePlainOperand(const IncidentDetail& incident) {
    const OperandDetail* plain = plainOperandOf(incident);
    if (!plain) return "the plain operand (not recorded)";
    std::string text = fmt::format("operand {}", plain->index);
    for (const std::string* s : {&plain->label, &plain->dtype, &plain->shape})
        if (!s->empty()) text += " " + *s;
    return text;
}

namespace {

std::string reconciliationText(const IncidentDetail& d) {
    const std::string error = d.error.empty() ? "no error text recorded" : d.error;
    // ASCII arrow: the text is also pasted into terminals and issues.
    if (d.outcome == Outcome::Reconciled)
        return "plain (no placement) -> " + (d.promotedPlacements.empty()
                                                 ? std::string(toString(d.action))
                                                 : "DTensor " + d.promotedPlacements);
    if (d.outcome == Outcome::Failed)
        return "promotion to " + (d.promotedPlacements.empty() ? "?" : d.promotedPlacements) +
               " failed: " + error;
    return error;
}

std::string outcomeClause(const IncidentDetail& d) {
    if (d.outcome == Outcome::Reconciled)
        return d.promotedPlacements.empty()
                   ? fmt::format("reconciled ({})", toString(d.action))
                   : fmt::format("promoted to DTensor {}", d.promotedPlacements);
    if (d.outcome == Outcome::Failed) return "its promotion failed and the op raised";
    return "the op raised";
}

}  // namespace

namespace {

// A failure (no strategy, DTensor error, collective failure or hang).
IncidentExplanation explainFailure(const IncidentDetail& d, const IncidentGroup* group,
                                   const std::string& evidence) {
    IncidentExplanation e;
    e.kind = d.kind;
    e.kindTitle = incidentKindInfo(d.kind).title;
    const std::string& text = evidence.empty() ? d.evidence : evidence;
    e.evidence = text.empty() ? "none recorded" : text;
    e.createdAt = "";
    for (const OperandDetail& o : d.operands)
        if (!o.output && !o.placements.empty())
            e.placements += (e.placements.empty() ? "" : ", ") + o.placements;
    e.reconciliationLabel = d.kind == IncidentKind::CollectiveHang ? "pending" : "raised";
    e.reconciliation = d.error.empty() ? "no error text recorded" : d.error;
    // a collective's detail is the rank's Python stacks; a failed op's, its
    // non-tensor arguments (in the summary); a partial read's, the value read
    bool collective =
        d.kind == IncidentKind::CollectiveHang || d.kind == IncidentKind::CollectiveError;
    if (collective) e.detail = d.detail;
    std::string args = collective || d.detail.empty() ? "" : " (" + d.detail + ")";
    e.fix = group ? group->fix : suggestFixFor(d);
    if (group)
        e.fixScope = fmt::format("group #{}, {} incident(s) at {}", group->id, group->count,
                                 formatLocation(group->site));
    switch (d.kind) {
        case IncidentKind::NoShardingStrategy:
            e.summary = fmt::format("{}{} has no sharding strategy for operands {}; the op raised",
                                    opWithoutStrategy(d.error, d.op), args,
                                    e.placements.empty() ? "(not recorded)" : e.placements);
            break;
        case IncidentKind::DTensorError:
            e.summary = fmt::format("{}{} raised in DTensor's dispatch: {}", d.op, args,
                                    firstLine(d.error));
            break;
        case IncidentKind::CollectiveError:
            e.summary = fmt::format("collective {} failed: {}", e.evidence, firstLine(d.error));
            break;
        case IncidentKind::CollectiveHang:
            e.summary =
                fmt::format("collective {} did not complete: {}", e.evidence, firstLine(d.error));
            break;
        case IncidentKind::PartialRead:
            e.summary = e.evidence + ": this rank's unreduced share, not the value";
            e.reconciliationLabel = "read";
            e.reconciliation = d.detail.empty() ? "the value was read as it was" : d.detail;
            break;
        case IncidentKind::MixedTensor:
        case IncidentKind::End:
            break;
    }
    return e;
}

}  // namespace

IncidentExplanation explainIncident(const IncidentDetail& d, const IncidentGroup* group,
                                    std::optional<Verdict> verdict, const std::string& evidence) {
    if (d.kind != IncidentKind::MixedTensor) return explainFailure(d, group, evidence);
    IncidentExplanation e;
    e.kindTitle = incidentKindInfo(d.kind).title;
    e.plainOperand = describePlainOperand(d);
    e.origin = fmt::format("{} - {}", originLetter(d.origin), describeOrigin(d.origin));
    const std::string& text = evidence.empty() ? d.evidence : evidence;
    e.evidence = text.empty() ? "none recorded" : text;
    e.createdAt = d.createdAt.empty() ? "not recorded" : d.createdAt;
    e.reconciliationLabel = d.outcome == Outcome::Reconciled ? "placements" : "raised";
    e.reconciliation = reconciliationText(d);
    e.policyRule = d.policyRule;
    if (verdict) e.verdict = describeVerdict(*verdict);
    e.fix = group ? group->fix : suggestFixFor(d);
    if (group)
        e.fixScope = fmt::format("group #{}, {} incident(s) at {}", group->id, group->count,
                                 formatLocation(group->site));
    e.summary = fmt::format("{} got {} as a plain torch.Tensor beside DTensors; origin {} ({}); {}",
                            d.op, e.plainOperand, originLetter(d.origin), describeOrigin(d.origin),
                            outcomeClause(d));
    if (verdict == Verdict::Invalid) e.summary += "; INVALID across ranks";
    return e;
}

}  // namespace meshscope
