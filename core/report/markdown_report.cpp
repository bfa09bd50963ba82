// The Markdown report: findings, ranks, where each rank stopped (when one
// did not end cleanly) and incident groups with their fix, for a pull
// request or an issue; every recorded string escaped.

#include <algorithm>
#include <ostream>

#include "core/analysis/incident_explanation.h"
#include "core/model/run_clock.h"
#include "core/report/report.h"
#include "core/report/report_text.h"
#include "core/util/terminal_text.h"
#include "core/util/utf8.h"

namespace meshscope {
namespace {

using namespace report_text;

// Text for a Markdown paragraph or table cell: CommonMark backslash escapes
// for the characters that can start inline markup, raw HTML, an entity or a
// table cell; newlines folded. Our own text starts every line, so block
// markers (#, -, +) never lead.
std::string md(std::string_view raw) {
    std::string text = terminalSafe(raw, /*keepLines=*/true);  // no raw control bytes
    std::string out;
    for (char c : text) {
        if (c == '\n' || c == '\r') {
            out += ' ';
            continue;
        }
        if (std::string_view("\\`*_{}[]<>|&~").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

// An inline code span that no content can close: fenced with one backtick
// more than the longest run inside.
std::string mdCode(std::string_view raw) {
    std::string text = terminalSafe(raw, /*keepLines=*/true);
    size_t longest = 0, run = 0;
    std::string flat;
    for (char c : text) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
        flat += (c == '\n' || c == '\r') ? ' ' : c;
    }
    std::string fence(longest + 1, '`');
    return fence + " " + flat + " " + fence;
}

std::string mdFence(std::string_view raw, std::string_view lang) {
    std::string text = terminalSafe(raw, /*keepLines=*/true);
    size_t longest = 0, run = 0;
    for (char c : text) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    std::string fence(std::max<size_t>(3, longest + 1), '`');
    while (!text.empty() && text.back() == '\n')
        text.pop_back();
    return fmt::format("{}{}\n{}\n{}\n", fence, lang, text, fence);
}

// "| operand | role | ..." for an incident's operands.
void writeOperands(const IncidentDetail& ex, std::ostream& out) {
    out << "| operand | role | dtype | shape | local shape | placements | label |\n"
           "|---:|---|---|---|---|---|---|\n";
    for (const OperandDetail& o : ex.operands)
        out << fmt::format(
            "| {} | {} | {} | {} | {} | {} | {} |\n", o.index,
            o.output ? "output" : (o.plain ? "**plain input**" : "input"), md(o.dtype), md(o.shape),
            md(o.localShape),
            o.scalar ? md(fmt::format("scalar {}", o.scalarValue)) : md(o.placements), md(o.label));
}

void writeFixAndStack(const IncidentDetail& ex, const IncidentExplanation& e, std::ostream& out) {
    out << fmt::format("\n**Fix:** {}\n\n", md(e.fix.summary));
    if (!e.fix.code.empty()) out << mdFence(e.fix.code, "python");
    if (std::string where = describePlace(e.fix.place); !where.empty() && !e.fix.code.empty())
        out << fmt::format("Where: {}\n", md(where));
    else if (!e.fix.place.unplaced.empty())
        out << fmt::format("Where it goes: {}\n", md(e.fix.place.unplaced));
    if (!ex.stack.empty()) {
        std::string frames;
        for (const SourceFrame& f : ex.stack)
            frames += fmt::format("{}  {}\n", formatLocation(f), f.function);
        out << "\nStack (innermost first):\n\n" << mdFence(frames, "");
    }
}

std::string perRankText(const IncidentGroup& g) {
    return perRankCounts(g.perRank, [](int r) { return fmt::format("rank {}", r); });
}

void writeMixedGroup(const IncidentGroup& g, std::ostream& out) {
    out << fmt::format("### {}. {} at {}: origin {} ({})\n\n", g.id + 1, mdCode(g.op),
                       mdCode(formatLocation(g.site)), originText(g.origin),
                       describeOrigin(g.origin));
    const IncidentDetail& ex = g.example;
    const IncidentExplanation e = explainIncident(ex, &g);
    out << md(e.summary) << ".\n\n";
    out << fmt::format("- {} incident(s); per rank: {}; steps {} to {}\n", g.count, perRankText(g),
                       g.firstStep, g.lastStep);
    out << fmt::format("- actions: {}; outcomes: {}\n",
                       joinCounts(g.actions, [](Action x) { return toString(x); }),
                       joinCounts(g.outcomes, [](Outcome x) { return toString(x); }));
    if (g.verified + g.invalid + g.unverified > 0) {
        std::string verdicts;
        auto add = [&](int64_t n, std::string_view what) {
            if (n > 0) verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", n, what);
        };
        add(g.verified, "verified");
        add(g.invalid, "**INVALID** (content differs across ranks)");
        add(g.unverified, "unverified (one rank or no fingerprint)");
        out << "- cross-rank verification: " << verdicts << "\n";
    }
    for (size_t i = 0; i < g.evidence.size(); ++i)
        out << fmt::format("- evidence: {}\n", md(g.evidence[i]));
    if (g.distinctEvidence > int64_t(g.evidence.size()))
        out << fmt::format("- ... {} distinct evidence texts in all\n", g.distinctEvidence);
    out << fmt::format("\nExample: rank {}, step {}, {}; policy rule {}\n\n", ex.rank, ex.step,
                       toString(ex.outcome), e.policyRule.empty() ? "-" : mdCode(e.policyRule));
    out << fmt::format("- {}: {}\n- plain tensor created at: {}\n\n", e.reconciliationLabel,
                       mdCode(e.reconciliation), md(e.createdAt));
    writeOperands(ex, out);
    writeFixAndStack(ex, e, out);
}

// A group of failures (no strategy, DTensor error, collective failure or
// hang): its kind instead of an origin, the error in full and, for a hang,
// the Python stacks of all the rank's threads.
void writeFailureGroup(const IncidentGroup& g, std::ostream& out) {
    const IncidentKindInfo& kind = incidentKindInfo(g.kind);
    out << fmt::format("### {}. {} at {}: {}\n\n", g.id + 1, mdCode(g.op),
                       mdCode(formatLocation(g.site)), kind.title);
    const IncidentDetail& ex = g.example;
    const IncidentExplanation e = explainIncident(ex, &g);
    // An error quoted at its end may bring its own full stop.
    out << md(e.summary) << (e.summary.ends_with('.') ? "\n\n" : ".\n\n");
    out << fmt::format("- kind: **{}** ({}); {} incident(s); per rank: {}; steps {} to {}\n",
                       kind.tag, kind.key, g.count, perRankText(g), g.firstStep, g.lastStep);
    for (size_t i = 0; i < g.evidence.size(); ++i)
        out << fmt::format("- {}: {}\n", isCollectiveKind(g.kind) ? "collective" : "evidence",
                           md(g.evidence[i]));
    if (!e.placements.empty()) out << fmt::format("- placements: {}\n", mdCode(e.placements));
    out << fmt::format("\nExample: rank {}, step {}; {}:\n\n", ex.rank, ex.step,
                       e.reconciliationLabel);
    out << mdFence(e.reconciliation, "text");
    if (!ex.operands.empty()) {
        out << "\n";
        writeOperands(ex, out);
    }
    writeFixAndStack(ex, e, out);
    if (!e.detail.empty())
        out << fmt::format("\nPython stacks of all threads (rank {}):\n\n", ex.rank)
            << mdFence(e.detail, "text");
}

// Where each rank stopped, when one did not end cleanly (stopsWorthShowing).
void writeStops(const RunAnalysis& a, std::ostream& out) {
    if (!stopsWorthShowing(a.stops)) return;
    out << "\n## Where each rank stopped\n\n| rank | state |\n|---:|---|\n";
    for (const StopRow& row : stopRows(a.stops))
        out << fmt::format("| {} | {} |\n", row.ranks, md(row.stop->state()));
}

// Where the time goes: ops by time, each rank's steps (outliers first), the
// slowest rank of each step and the stragglers among them.
void writeTime(const TimeBreakdown& t, std::ostream& out) {
    if (!t.computed || (t.ops.empty() && t.ranks.empty())) return;
    constexpr size_t kOpsListed = 25, kRanksListed = 32, kStepsListed = 20;
    out << "\n## Where the time goes\n\n";
    if (!t.ops.empty()) {
        out << "Host time of each op (including the ops it called) and of each collective "
               "(issue to completion), all ranks together:\n\n"
               "| op | calls | total | mean | max | ranks | placements of its inputs |\n"
               "|---|---:|---:|---:|---:|---:|---|\n";
        for (size_t i = 0; i < t.ops.size() && i < kOpsListed; ++i) {
            const OpStat& o = t.ops[i];
            std::string placements;
            for (const std::string& p : o.placements)
                placements += (placements.empty() ? "" : "; ") + mdCode(p);
            if (o.morePlacements > 0) placements += fmt::format("; {} more", o.morePlacements);
            if (o.collective) placements = fmt::format("collective, {} bytes", o.bytes);
            out << fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", mdCode(o.name), o.count,
                               formatDuration(o.totalNs), formatDuration(o.meanNs()),
                               formatDuration(o.maxNs), o.ranks, placements);
        }
        if (t.ops.size() > kOpsListed)
            out << fmt::format("\n{} more op(s) are in the JSON report.\n",
                               t.ops.size() - kOpsListed);
    }
    bool steps = false;
    for (const RankSteps& r : t.ranks)
        steps = steps || r.steps > 0;
    if (!steps) {
        out << "\nNo optimizer step was recorded: there are no steps to break down.\n";
        return;
    }
    out << "\nEach rank's steps, medians over its steps; a step ends with its optimizer.step(). "
           "Ranks furthest from the median rank's time outside collectives come first:\n\n"
           "| rank | steps | step | outside collectives | collective in flight | slowest in | "
           "incidents |\n|---:|---:|---:|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < t.ranks.size() && i < kRanksListed; ++i) {
        const RankSteps& r = t.ranks[i];
        out << fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", r.rank, r.steps,
                           formatDuration(r.medianStepNs), formatDuration(r.medianOutsideNs),
                           formatDuration(r.medianCollectiveNs), r.slowestIn, r.incidents);
    }
    if (t.ranks.size() > kRanksListed)
        out << fmt::format("\n{} more rank(s), closer to the median, are in the JSON report.\n",
                           t.ranks.size() - kRanksListed);
    if (t.slowest.empty()) return;
    std::vector<const SlowestRank*> worst = stepsFurthestAhead(t, kStepsListed);
    out << fmt::format(
        "\nThe slowest rank of a step (the longest time outside collectives: the "
        "others wait for it), for the {} step(s) where it was furthest ahead of "
        "the others, of {}:\n\n| step | slowest rank | outside collectives | "
        "other ranks' mean | ratio |\n|---:|---:|---:|---:|---:|\n",
        worst.size(), t.slowest.size());
    for (const SlowestRank* s : worst)
        out << fmt::format("| {} | {} | {} | {} | {:.2f}x |\n", s->step, s->rank,
                           formatDuration(s->outsideNs), formatDuration(s->meanOthersNs),
                           s->ratio());
    for (const Finding& f : stragglerFindings(t))
        out << fmt::format("\n**Straggler:** {}\n", md(f.message));
}

}  // namespace

void writeMarkdownReport(const RunAnalysis& a, std::ostream& out, const ReportOptions& options) {
    const RunSummary& s = a.summary;
    out << fmt::format("# meshscope report: run {}\n\n", mdCode(s.runId));
    out << fmt::format(
        "World size {}, {} rank(s) readable; {} incident(s) in {} group(s); "
        "{} finding(s). Written by {}.\n\n",
        s.worldSize, s.ranks.size(), a.incidents.size(), a.groups.size(), a.findings.size(),
        md(options.generator));
    out << "## Findings\n\n";
    if (a.findings.empty()) out << "None.\n";
    for (const Finding& f : a.findings)
        out << fmt::format("- **{}** {}\n", toString(f.kind), md(f.message));
    out << "\n## Ranks\n\n| rank | ops | steps | collectives | bytes | incidents | dropped | "
           "status |\n|---:|---:|---:|---:|---:|---:|---:|---|\n";
    TableRanks table = tableRanks(s, kSummaryRanksListed);
    for (const RankSummaryRow* row : table.listed) {
        const RankSummaryRow& r = *row;
        int64_t dropped = 0;
        for (const auto& [reason, n] : r.summary.drops)
            dropped = saturatingAdd(dropped, int64_t(n));  // recorded counts may be anything
        out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", r.rank, r.summary.ops,
                           r.summary.steps, r.summary.collectives, r.summary.collectiveBytes,
                           r.summary.incidents, dropped, md(r.status));
    }
    if (const auto& others = table.others; !others.empty()) {  // a large job: one summing row
        RanksSummedUp sum = sumUp(others);
        auto number = [](int64_t v) { return std::to_string(v); };
        out << fmt::format("| {} more: {} | {} | {} | {} | {} | {} | {} | {} |\n", others.size(),
                           formatRankList(sum.ranks), sum.ops.text(number), sum.steps.text(number),
                           sum.collectives.text(number), sum.bytes.text(number),
                           sum.incidents.text(number), sum.dropped,
                           md(joinCounts(sum.statuses, [](const std::string& k) { return k; })));
        out << "\nThe ranks table of a large job lists the ranks that need a look, then the "
               "first ranks; the JSON report and `meshscope summary --all` list every rank.\n";
    }
    for (const std::string& p : s.problems)
        out << fmt::format("\nProblem: {}\n", md(p));
    writeStops(a, out);
    out << "\n## Incident groups\n\n";
    if (a.groups.empty()) out << "No mixed-tensor incidents.\n";
    int shown = 0;
    for (const IncidentGroup& g : a.groups) {
        if (shown++ == options.maxGroupsInDetail) {
            out << fmt::format("\n{} more group(s) are in the JSON report.\n",
                               a.groups.size() - size_t(options.maxGroupsInDetail));
            break;
        }
        if (g.kind == IncidentKind::MixedTensor)
            writeMixedGroup(g, out);
        else
            writeFailureGroup(g, out);
        out << "\n";
    }
    if (!a.divergences.empty()) {
        out << "## Divergent ranks\n\n| kind | rank | thread | index | step | this rank | others "
               "|\n|---|---:|---:|---:|---:|---|---|\n";
        constexpr size_t kDivergencesListed = 32;
        for (size_t i = 0; i < a.divergences.size() && i < kDivergencesListed; ++i) {
            const Divergence& d = a.divergences[i];
            out << fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", toString(d.kind), d.rank,
                               d.thread, d.index, d.step,
                               d.actual.empty() ? "(ended)" : md(d.actual),
                               d.expected.empty() ? "(ended)" : md(d.expected));
        }
        if (a.divergences.size() > kDivergencesListed)
            out << fmt::format("\n{} more divergence(s) are in the JSON report.\n",
                               a.divergences.size() - kDivergencesListed);
    }
    writeTime(a.time, out);
}

}  // namespace meshscope
