#include "core/report/html_report.h"

#include "core/util/terminal_text.h"

#include "core/analysis/incident_explanation.h"
#include "core/analysis/mesh_picture.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/report/report.h"
#include "core/report/report_text.h"
#include "core/util/utf8.h"

namespace meshscope {
namespace {

constexpr std::string_view kCsp =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'";

constexpr std::string_view kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 32px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#b8c0d0}main{padding:8px 32px 40px;max-width:1320px}
h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid #d8dce3;padding-bottom:4px}
table{border-collapse:collapse;background:#fff;font-size:13px}td,th{border:1px solid #dde1e7;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
.finding{padding:6px 10px;margin:4px 0;border-left:4px solid #c62828;background:#fff}
.finding.invalid,.finding.divergent{border-color:#8e24aa;background:#fbf3fd}.finding b{text-transform:uppercase;font-size:12px;margin-right:6px}
.ok{padding:6px 10px;border-left:4px solid #2e7d32;background:#fff}
details.group{background:#fff;border:1px solid #dde1e7;border-radius:4px;margin:10px 0;padding:0 12px}
details.group>summary{cursor:pointer;padding:9px 0;font-weight:600}details.group[open]>summary{border-bottom:1px solid #eef1f5}
code,pre{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12.5px}pre{background:#f1f3f6;padding:8px 10px;overflow-x:auto;border-radius:3px}
.tag{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px;margin-right:4px;background:#e3e7ee}
.grid{display:grid;grid-template-columns:minmax(360px,1fr) minmax(420px,1.2fr);gap:16px}.muted{color:#69707d}.explain{margin:6px 0 10px;font-weight:500}
svg text{font-family:system-ui,sans-serif}.legend span{margin-right:14px}
details.stacks>summary{cursor:pointer;color:#69707d;margin:6px 0}details.stacks pre{max-height:420px;overflow:auto}
h3{font-size:15px;margin:18px 0 6px}.finding.straggler{border-color:#ef6c00;background:#fff8f0}
td pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}pre.fix{white-space:pre-wrap;overflow-wrap:anywhere}div.mesh{overflow-x:auto;max-width:100%}
)css";

std::string esc(std::string_view text) {
    return htmlEscape(text);
}

}  // namespace

// "#c62828": an incident state's colour (vocabulary.h).
std::string stateColour(IncidentState state) {
    return fmt::format("#{:06x}", incidentStateInfo(state).rgb);
}

// ---- the mesh drawing of one incident ----

// Ranks drawn at most: a report of a 1,024-rank mesh shows its first 64.
constexpr size_t kMaxMeshCells = 64;

void writeMeshDrawing(const IncidentDetail& d, std::ostream& out) {
    // The layout the GUI's inspector draws too (core/analysis/mesh_picture.h).
    MeshPicture pic = MeshPicture::ofIncident(d);
    if (!pic.mesh || pic.mesh->shape.empty()) {  // an incident on no known mesh: its ranks in a row
        MeshRecord mesh;
        mesh.shape = {int64_t(std::max<size_t>(d.mesh ? d.mesh->ranks.size() : 1, 1))};
        mesh.dimNames = {"rank"};
        if (d.mesh) mesh.ranks = d.mesh->ranks, mesh.deviceType = d.mesh->deviceType;
        pic.mesh = mesh;
    }
    MeshGrid grid = meshGrid(pic, kMaxMeshCells);
    const int64_t cols = int64_t(std::max<size_t>(grid.columns, 1));
    const int64_t rows = (int64_t(grid.cells.size()) + cols - 1) / cols;
    // The gap holds the arrow and the action above it ("sharded_from_local").
    const int cellW = 190, plainW = 170, gap = 128;
    const OperandDetail* plain = pic.plain ? &*pic.plain : nullptr;
    size_t lines = grid.cells.empty() ? 1 : grid.cells.front().lines.size() - 1;
    const int cellH = 30 + 15 * int(std::max<size_t>(lines, 1));
    int width = plainW + gap + int(cols) * (cellW + 8) + 10;
    int height = std::max(int(rows) * (cellH + 8) + 30, 132);
    out << fmt::format(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' role='img' "
        "aria-label='operands on the device mesh'>\n",
        width, height);  // inside div.mesh, which scrolls a wide mesh
    int meshX = plainW + gap;
    out << fmt::format("<text x='{}' y='14' font-size='12' fill='#69707d'>{}</text>\n", meshX,
                       esc(d.mesh ? grid.title : std::string("device mesh")));
    if (plain) {
        const bool raised = d.outcome != Outcome::Reconciled;
        const std::string colour =
            stateColour(raised ? IncidentState::Raised : IncidentState::Promoted);
        // Its label or the evidence of its origin, in two lines; all of it on hover.
        const std::string& about = plain->label.empty() ? d.evidence : plain->label;
        std::vector<std::string> wrapped = wrapLabel(about, 25, 2);
        out << fmt::format(
            "<g><title>{}</title><rect x='2' y='24' width='{}' height='92' rx='4' fill='#fff6f6' "
            "stroke='#d32f2f' stroke-dasharray='5 3'/>\n<text x='10' y='42' font-size='12' "
            "font-weight='600'>plain torch.Tensor</text>\n<text x='10' y='60' "
            "font-size='12'>{} {}</text>\n",
            esc(about), plainW - 4, esc(plain->dtype), esc(plain->shape));
        for (size_t i = 0; i < wrapped.size(); ++i)
            out << fmt::format("<text x='10' y='{}' font-size='12'>{}</text>\n", 77 + 16 * i,
                               esc(wrapped[i]));
        out << fmt::format(
            "<text x='10' y='109' font-size='11' fill='#69707d'>operand {}</text></g>\n",
            plain->index);
        out << fmt::format(
            "<path d='M{} 62h{}' stroke='{}' stroke-width='2' fill='none'/><path d='M{} 57l8 "
            "5l-8 5z' fill='{}'/>\n<text x='{}' y='54' font-size='11' "
            "text-anchor='middle'>{}</text>\n",
            plainW, gap - 8, colour, meshX - 8, colour, plainW + gap / 2,
            raised ? "raised" : esc(toString(d.action)));
    }
    for (size_t c = 0; c < grid.cells.size(); ++c) {
        const MeshCell& cell = grid.cells[c];
        int64_t row = int64_t(c) / cols, col = int64_t(c) % cols;
        int cx = meshX + int(col) * (cellW + 8), cy = 24 + int(row) * (cellH + 8);
        out << fmt::format(
            "<rect x='{}' y='{}' width='{}' height='{}' rx='4' fill='{}' stroke='#8a94a6'/>\n<text "
            "x='{}' y='{}' font-size='12' font-weight='600'>{}{}</text>\n",
            cx, cy, cellW, cellH, cell.here ? "#eef4ff" : "#fff", cx + 8, cy + 17,
            esc(cell.lines.front()), cell.here ? " (this incident)" : "");
        for (size_t i = 1; i < cell.lines.size(); ++i) {
            // "op0 rows 0-7 of [16, 32]": the operand's name muted, its piece plain
            const std::string& line = cell.lines[i];
            size_t space = line.find(' ');
            std::string name = line.substr(0, space),
                        piece = space == std::string::npos ? "" : line.substr(space + 1);
            bool promoted = cell.promotedLine && i + 1 == cell.lines.size();
            out << fmt::format(
                "<text x='{}' y='{}' font-size='11'{}><tspan{}>{}</tspan> {}</text>\n", cx + 8,
                cy + 34 + 15 * int(i - 1),
                promoted ? fmt::format(" fill='{}'",
                                       d.outcome == Outcome::Reconciled ? "#1b5e20" : "#a31515")
                         : "",
                promoted ? "" : " fill='#69707d'", esc(name), esc(piece));
        }
    }
    out << "</svg>\n";
}

namespace {

void writeStack(const std::vector<SourceFrame>& stack, std::ostream& out) {
    if (stack.empty()) return;
    out << "<pre>";
    for (const SourceFrame& f : stack)
        out << esc(formatLocation(f)) << "  <span class=muted>" << esc(f.function) << "</span>\n";
    out << "</pre>\n";
}

// The incident tags' colours: the timeline's marker colours (vocabulary.h),
// as text on a pale background of the same hue; INVALID inverted.
std::string incidentStateStyle() {
    std::string css;
    for (const IncidentStateInfo& s : kIncidentStates)
        css +=
            s.kind == IncidentState::Invalid
                ? fmt::format(".tag.{}{{background:#{:06x};color:#fff}}", s.key, s.rgb)
                : fmt::format(".tag.{}{{background:#{:06x}22;color:#{:06x}}}", s.key, s.rgb, s.rgb);
    for (const IncidentKindInfo& k : kIncidentKinds)
        css += fmt::format(".tag.kind-{}{{background:#{:06x};color:#fff}}", k.key, k.rgb);
    return css + "\n";
}

void writeOperandTable(const IncidentDetail& ex, std::ostream& out) {
    out << "<table><tr><th>operand</th><th>dtype</th><th>shape</th><th>local</th><th>"
           "placements</th><th>label</th></tr>\n";
    for (const OperandDetail& o : ex.operands)
        out << fmt::format(
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            o.index,
            o.output  ? " out"
            : o.plain ? " <b>plain</b>"
                      : "",
            esc(o.dtype), esc(o.shape), esc(o.localShape),
            o.scalar ? fmt::format("scalar {}", o.scalarValue) : esc(o.placements), esc(o.label));
    out << "</table>\n";
}

void writeFix(const IncidentExplanation& e, std::ostream& out) {
    out << "<h4>Fix</h4><p>" << esc(e.fix.summary) << "</p>\n";
    if (!e.fix.code.empty()) out << "<pre class=fix><code>" << esc(e.fix.code) << "</code></pre>\n";
    if (std::string where = describePlace(e.fix.place); !where.empty() && !e.fix.code.empty())
        out << "<p class=where>" << esc(where) << "</p>\n";
    else if (!e.fix.place.unplaced.empty())
        out << "<p class=where>Where it goes: " << esc(e.fix.place.unplaced) << "</p>\n";
}

// A group of failures (no strategy, DTensor error, collective failure or
// hang): its kind instead of an origin, the error and the fix; a hang's
// Python stacks of all threads folded away.
void writeFailureGroup(const IncidentGroup& g, std::ostream& out) {
    const IncidentDetail& ex = g.example;
    const IncidentExplanation e = explainIncident(ex, &g);
    const IncidentKindInfo& kind = incidentKindInfo(g.kind);
    out << fmt::format(
        "<details class=group{}><summary><span class='tag kind-{}' title='{}'>{}</span> "
        "<code>{}</code> at <code>{}</code> &middot; {} &middot; {} incident(s)</summary>\n",
        g.id < 10 ? " open" : "", kind.key, esc(kind.title), esc(kind.tag), esc(g.op),
        esc(formatLocation(g.site)), esc(kind.title), g.count);
    out << "<p class=explain>" << esc(e.summary) << "</p>\n<div class=grid><div>\n<table>\n";
    auto row = [&](std::string_view key, const std::string& value) {
        out << "<tr><th>" << key << "</th><td>" << value << "</td></tr>\n";
    };
    row("kind", fmt::format("{} (<code>{}</code>)", esc(kind.title), kind.key));
    row("per rank", esc(report_text::perRankCounts(
                        g.perRank, [](int r) { return fmt::format("rank {}:", r); })));
    row("steps", fmt::format("{} to {}", g.firstStep, g.lastStep));
    std::string evidence;
    for (const std::string& text : g.evidence)
        evidence += esc(text) + "<br>";
    row(isCollectiveKind(g.kind) ? "collective" : "evidence", evidence);
    if (!e.placements.empty()) row("placements", "<code>" + esc(e.placements) + "</code>");
    row(e.reconciliationLabel, "<pre>" + esc(e.reconciliation.substr(0, 4000)) + "</pre>");
    out << "</table>\n";
    writeFix(e, out);
    out << "</div><div>\n";
    if (!ex.operands.empty()) {
        out << "<h4>Operands (rank " << ex.rank << ", step " << ex.step << ")</h4>\n";
        writeOperandTable(ex, out);
    }
    out << "<h4>Stack (innermost first)</h4>\n";
    writeStack(ex.stack, out);
    if (!e.detail.empty())
        out << "<details class=stacks><summary>Python stacks of all threads (rank " << ex.rank
            << ")</summary>\n<pre>" << esc(e.detail) << "</pre></details>\n";
    out << "</div></div></details>\n";
}

void writeGroup(const IncidentGroup& g, std::ostream& out) {
    if (g.kind != IncidentKind::MixedTensor) return writeFailureGroup(g, out);
    const IncidentDetail& ex = g.example;
    const IncidentExplanation e = explainIncident(ex, &g);
    const IncidentStateInfo& state =
        incidentStateInfo(g.invalid > 0        ? IncidentState::Invalid
                          : g.unreconciled > 0 ? IncidentState::Raised
                                               : IncidentState::Promoted);
    out << fmt::format(
        "<details class=group{}><summary><span class='tag {}' title='{}'>{}</span> <code>{}</code> "
        "at <code>{}</code> &middot; origin {} ({}) &middot; {} incident(s)</summary>\n",
        g.id < 10 ? " open" : "", state.key, state.meaning, state.label, esc(g.op),
        esc(formatLocation(g.site)), originText(g.origin), esc(describeOrigin(g.origin)), g.count);
    out << "<p class=explain>" << esc(e.summary) << "</p>\n<div class=grid><div>\n<table>\n";
    auto row = [&](std::string_view key, const std::string& value) {
        out << "<tr><th>" << key << "</th><td>" << value << "</td></tr>\n";
    };
    row("per rank", esc(report_text::perRankCounts(
                        g.perRank, [](int r) { return fmt::format("rank {}:", r); })));
    row("steps", fmt::format("{} to {} ({} step(s) with incidents)", g.firstStep, g.lastStep,
                             g.perStep.size()));
    std::string actions;
    for (const auto& [act, n] : g.actions)
        actions += fmt::format("<span class=tag>{} {}</span>", esc(toString(act)), n);
    for (const auto& [oc, n] : g.outcomes)
        actions += fmt::format("<span class=tag>{} {}</span>", esc(toString(oc)), n);
    row("actions", actions);
    if (g.verified + g.invalid + g.unverified > 0)
        row("cross-rank check",
            fmt::format("{} verified, {}{} INVALID{}, {} unverified", g.verified,
                        g.invalid ? "<span class='tag invalid'>" : "", g.invalid,
                        g.invalid ? "</span>" : "", g.unverified));
    std::string evidence;
    for (const std::string& e : g.evidence)
        evidence += esc(e) + "<br>";
    if (g.distinctEvidence > int64_t(g.evidence.size()))
        evidence += fmt::format("<span class=muted>{} distinct in all</span>", g.distinctEvidence);
    row("evidence", evidence);
    row("policy rule", esc(e.policyRule));
    row("plain operand", esc(e.plainOperand));
    row(e.reconciliationLabel, "<code>" + esc(e.reconciliation.substr(0, 600)) + "</code>");
    row("plain tensor created at", "<code>" + esc(e.createdAt) + "</code>");
    if (ex.fingerprint)
        row("fingerprint", fmt::format("<code>{:016x}</code> (rank {})", *ex.fingerprint, ex.rank));
    out << "</table>\n";
    writeFix(e, out);
    out << "</div><div>\n<h4>Operands on the mesh (rank " << ex.rank << ", step " << ex.step
        << ")</h4>\n";
    out << "<div class=mesh>";
    writeMeshDrawing(ex, out);
    out << "</div>";
    writeOperandTable(ex, out);
    out << "<h4>Stack (innermost first)</h4>\n";
    writeStack(ex.stack, out);
    out << "</div></div></details>\n";
}

}  // namespace

std::string htmlEscape(std::string_view raw) {
    std::string text = terminalSafe(raw, /*keepLines=*/true);  // no raw control bytes
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string jsonForScript(const std::string& json) {
    std::string out;
    out.reserve(json.size());
    for (char c : json) {
        if (c == '<')
            out += "\\u003c";
        else if (c == '>')
            out += "\\u003e";
        else if (c == '&')
            out += "\\u0026";
        else
            out += c;
    }
    return out;
}

namespace {

// The UTF-8 code points of `text` (a stray continuation byte stays with the
// point before it): cuts between them never split a sequence.
std::vector<std::string_view> codePoints(std::string_view text) {
    std::vector<std::string_view> points;
    for (size_t i = 0; i < text.size();) {
        size_t n = 1;
        while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80)
            ++n;
        points.push_back(text.substr(i, n));
        i += n;
    }
    return points;
}

}  // namespace

std::vector<std::string> wrapLabel(std::string_view text, size_t width, size_t maxLines) {
    std::vector<std::string_view> points = codePoints(text);
    auto skipSpaces = [&](size_t at) {
        while (at < points.size() && points[at] == " ")
            ++at;
        return at;
    };
    auto join = [&](size_t from, size_t to) {
        std::string line;
        for (size_t k = from; k < to; ++k)
            line += points[k];
        return line;
    };
    std::vector<std::string> lines;
    size_t at = skipSpaces(0);
    while (at < points.size() && lines.size() < maxLines && width > 0) {
        size_t end = std::min(points.size(), at + width);
        if (end < points.size()) {  // break at the last space that fits, if any
            size_t space = end;
            while (space > at && points[space] != " ")
                --space;
            if (space > at) end = space;
        }
        if (lines.size() + 1 == maxLines && skipSpaces(end) < points.size()) {
            // text left over after the last line: it ends in an ellipsis
            lines.push_back(join(at, std::min(end, at + width - 1)) + "\u2026");
            break;
        }
        lines.push_back(join(at, end));
        at = skipSpaces(end);
    }
    return lines;
}

namespace {

// ---- the report's sections, in page order ----

void writeHead(const RunAnalysis& a, std::ostream& out, const HtmlReportOptions& options) {
    const RunSummary& s = a.summary;
    out << "<!DOCTYPE html>\n<html lang=en><head>\n<meta http-equiv='Content-Security-Policy' "
           "content=\""
        << kCsp << "\">\n<meta charset=utf-8>\n<meta name=viewport content='width=device-width'>\n"
        << "<title>meshscope report: " << esc(s.runId) << "</title>\n<style>" << kStyle
        << incidentStateStyle() << "</style>\n</head><body>\n";
    out << "<header><h1>meshscope report</h1><p>run <code>" << esc(s.runId)
        << "</code> &middot; world size " << s.worldSize << " &middot; " << s.ranks.size()
        << " rank(s) readable &middot; " << a.incidents.size() << " incident(s) in "
        << a.groups.size() << " group(s) &middot; " << esc(options.generator)
        << "</p></header>\n<main>\n";
}

void writeFindings(const RunAnalysis& a, std::ostream& out) {
    out << "<h2>Findings</h2>\n";
    if (a.findings.empty())
        out << "<div class=ok>No findings: every incident was reconciled, promotions agree "
               "across ranks and the ranks ran the same sequences.</div>\n";
    std::vector<const Finding*> ordered;
    for (const Finding& f : a.findings)
        ordered.push_back(&f);
    std::stable_sort(ordered.begin(), ordered.end(), [](const Finding* x, const Finding* y) {
        return findingKindInfo(x->kind).order < findingKindInfo(y->kind).order;
    });
    for (const Finding* f : ordered)
        out << "<div class='finding " << toString(f->kind) << "'><b>" << toString(f->kind) << "</b>"
            << esc(f->message) << "</div>\n";
}

// The ranks table; a larger job's lists the timeline's ranks (`listed`)
// and sums up the others in one row.
void writeRanks(const RunSummary& s, const std::vector<TimelineLane>& listed, std::ostream& out) {
    out << "<h2>Ranks</h2>\n<table><tr><th>rank</th><th>host</th><th>ops</th><th>steps</th><th>"
           "collectives</th><th>bytes</th><th>incidents</th><th>by origin</th><th>dropped</th><th>"
           "status</th></tr>\n";
    std::set<int> shown;
    if (listed.size() < s.ranks.size())
        for (const TimelineLane& l : listed)
            shown.insert(l.rank);
    std::vector<const RankSummaryRow*> others;
    for (const RankSummaryRow& r : s.ranks) {
        if (!shown.empty() && !shown.contains(r.rank)) {
            others.push_back(&r);
            continue;
        }
        std::string origins, drops;
        for (const auto& [o, n] : r.summary.incidentsByOrigin)
            origins += fmt::format("{} {} ", originText(o), n);
        for (const auto& [reason, n] : r.summary.drops)
            drops += fmt::format("{} {} ", esc(reason), n);
        out << fmt::format(
            "<tr><td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td "
            "class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td><td>{}</td><td>{}</"
            "td></tr>\n",
            r.rank, esc(r.info.hostname), r.summary.ops, r.summary.steps, r.summary.collectives,
            r.summary.collectiveBytes, r.summary.incidents, esc(origins),
            drops.empty() ? "0" : drops, esc(r.status));
    }
    if (!others.empty()) {
        RanksSummedUp sum = sumUp(others);
        auto number = [](int64_t v) { return std::to_string(v); };
        std::string status = report_text::joinCounts(sum.statuses, esc);
        out << fmt::format(
            "<tr class=muted><td colspan=2>{} more: {}</td><td class=n>{}</td><td class=n>{}</td>"
            "<td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td></td><td>{}</td>"
            "<td>{}</td></tr>\n",
            others.size(), esc(formatRankList(sum.ranks)), sum.ops.text(number),
            sum.steps.text(number), sum.collectives.text(number), sum.bytes.text(number),
            sum.incidents.text(number), sum.dropped, status);
    }
    out << "</table>\n";
    for (const std::string& p : s.problems)
        out << "<div class=finding><b>problem</b>" << esc(p) << "</div>\n";
}

// Where each rank stopped, when one did not end cleanly (stopsWorthShowing).
void writeStops(const RunAnalysis& a, std::ostream& out) {
    if (!report_text::stopsWorthShowing(a.stops)) return;
    out << "<h2>Where each rank stopped</h2>\n<table><tr><th>rank</th><th>state</th></tr>\n";
    for (const report_text::StopRow& row : report_text::stopRows(a.stops)) {
        const RankStop& s = *row.stop;
        std::string tag;
        if (s.stoppedIn)
            tag = fmt::format("<span class='tag kind-{}'>{}</span> ",
                              incidentKindInfo(*s.stoppedIn).key,
                              esc(incidentKindInfo(*s.stoppedIn).tag));
        out << fmt::format("<tr><td class=n>{}</td><td>{}{}</td></tr>\n", esc(row.ranks), tag,
                           esc(s.state()));
    }
    out << "</table>\n";
}

void writeGroups(const RunAnalysis& a, std::ostream& out, int maxInDetail) {
    out << "<h2>Incident groups</h2>\n";
    if (a.groups.empty()) out << "<div class=ok>No mixed-tensor incidents.</div>\n";
    int shown = 0;
    for (const IncidentGroup& g : a.groups) {
        if (shown++ >= maxInDetail) break;
        writeGroup(g, out);
    }
    if (int(a.groups.size()) <= maxInDetail) return;
    out << "<p>" << a.groups.size() - size_t(maxInDetail)
        << " more group(s):</p>\n<table><tr><th>op</th><th>site</th><th>origin</th><th>"
           "count</th></tr>\n";
    for (size_t i = size_t(maxInDetail); i < a.groups.size(); ++i) {
        const IncidentGroup& g = a.groups[i];
        out << "<tr><td><code>" << esc(g.op) << "</code></td><td><code>"
            << esc(formatLocation(g.site)) << "</code></td><td>"
            << (g.kind == IncidentKind::MixedTensor ? originText(g.origin)
                                                    : esc(incidentKindInfo(g.kind).tag))
            << "</td><td class=n>" << g.count << "</td></tr>\n";
    }
    out << "</table>\n";
}

void writeDivergences(const RunAnalysis& a, std::ostream& out) {
    if (a.divergences.empty()) return;
    out << "<h2>Divergent ranks</h2>\n<table><tr><th>kind</th><th>rank</th><th>thread</th><th>"
           "index</th><th>step</th><th>this rank</th><th>other ranks</th></tr>\n";
    for (const Divergence& d : a.divergences)
        out << fmt::format(
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td "
            "class=n>{}</td><td>{}</td><td>{}</td></tr>\n",
            toString(d.kind), d.rank, d.thread, d.index, d.step,
            d.actual.empty() ? "<i>ended</i>" : "<code>" + esc(d.actual) + "</code>",
            d.expected.empty() ? "<i>ended</i>" : "<code>" + esc(d.expected) + "</code>");
    out << "</table>\n";
}

void writeInvalidPromotions(const RunAnalysis& a, std::ostream& out) {
    constexpr int kMostRows = 100;
    int invalid = 0;
    for (const PromotionCheck& c : a.promotionChecks) {
        if (c.verdict != Verdict::Invalid) continue;
        if (invalid++ == 0)
            out << "<h2>INVALID promotions</h2>\n<table><tr><th>group</th><th>step</th><th>"
                   "occurrence</th><th>fingerprints</th></tr>\n";
        if (invalid > kMostRows) continue;
        std::string fps;
        for (const auto& [rank, fp] : c.fingerprints)
            fps += fp ? fmt::format("rank {}: <code>{:016x}</code> ", rank, *fp)
                      : fmt::format("rank {}: - ", rank);
        out << fmt::format(
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>\n",
            esc(a.groups[size_t(c.group)].op), c.step, c.occurrence, fps);
    }
    if (invalid > 0) out << "</table>\n";
    if (invalid > kMostRows) out << "<p class=muted>" << invalid - kMostRows << " more.</p>\n";
}

// Machine-readable findings and groups (data only: the CSP allows no script).
void writeDataAndEnd(const RunAnalysis& a, std::ostream& out) {
    nlohmann::json data = {{"run_id", a.summary.runId},
                           {"findings", nlohmann::json::array()},
                           {"groups", nlohmann::json::array()}};
    for (const Finding& f : a.findings)
        data["findings"].push_back({{"kind", toString(f.kind)}, {"message", f.message}});
    for (const IncidentGroup& g : a.groups)
        data["groups"].push_back({{"kind", toString(g.kind)},
                                  {"op", g.op},
                                  {"origin", originText(g.origin)},
                                  {"file", g.site.file},
                                  {"line", g.site.line},
                                  {"count", g.count},
                                  {"invalid", g.invalid},
                                  {"unreconciled", g.unreconciled}});
    out << "<script type='application/json' id='meshscope-data'>"
        << jsonForScript(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
        << "</script>\n</main></body></html>\n";
}

}  // namespace

void writeHtmlReport(const RunReader& run, const RunAnalysis& a, std::ostream& out,
                     const HtmlReportOptions& options) {
    writeHead(a, out, options);
    writeFindings(a, out);
    const std::vector<TimelineLane> lanes = timelineLanes(run, a);
    writeRanks(a.summary, lanes, out);
    writeStops(a, out);
    out << "<h2>Timeline</h2>\n";
    writeTimeline(run, a, lanes, out, options.timelineWidth);
    writeTimeSection(a.time, out);
    writeGroups(a, out, options.maxGroupsInDetail);
    writeDivergences(a, out);
    writeInvalidPromotions(a, out);
    writeDataAndEnd(a, out);
}

}  // namespace meshscope
