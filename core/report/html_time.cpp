// The HTML report's "Where the time goes": ranks-by-steps heat maps (step
// time, time with a collective in flight, incidents; outliers first), each
// rank's steps, the slowest rank of each step, stragglers, and the ops by
// time. Static SVG and tables: the report's CSP allows no script.

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <ostream>

#include <fmt/format.h>

#include "core/report/html_report.h"

namespace meshscope {
namespace {

std::string esc(std::string_view text) {
    return htmlEscape(text);
}

// Light (short, few) to dark (long, many).
constexpr std::array<std::string_view, 8> kHeat = {"#fff7ec", "#fee8c8", "#fdd49e", "#fdbb84",
                                                   "#fc8d59", "#ef6548", "#d7301f", "#990000"};
constexpr std::string_view kNoStep = "#e3e7ee";

struct HeatMap {
    std::string_view title;
    std::string_view unit;  // "time" or "count"
    // a cell's value; none when the rank recorded no step there
    std::function<std::optional<double>(const StepCell&)> value;
};

std::string valueText(double v, std::string_view unit) {
    return unit == "count" ? fmt::format("{:.0f}", v) : formatDuration(int64_t(v));
}

void writeHeatMap(const TimeBreakdown& t, const HeatMap& map, size_t rows, std::ostream& out) {
    // The first column (set-up, warm-up) is left out of a time scale when
    // there are others: it would make every later step look alike.
    size_t scaleFrom = map.unit == "time" && t.columns.size() > 1 ? 1 : 0;
    // durations scale from 0: a few percent of noise must not look like a
    // hot spot
    double lo = map.unit == "time" ? 0.0 : INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < rows; ++i)
        for (size_t c = scaleFrom; c < t.ranks[i].cells.size(); ++c)
            if (auto v = map.value(t.ranks[i].cells[c]))
                lo = std::min(lo, *v), hi = std::max(hi, *v);
    if (lo > hi) return;
    const int left = 72, top = 18, rowHeight = 12;
    const int cellWidth = std::clamp(960 / std::max<int>(1, int(t.columns.size())), 2, 64);
    const int width = cellWidth * int(t.columns.size());
    auto bin = [&](double v) {
        if (hi <= lo) return size_t(0);
        double f =
            map.unit == "count" ? std::log1p(v - lo) / std::log1p(hi - lo) : (v - lo) / (hi - lo);
        return std::min(kHeat.size() - 1, size_t(std::clamp(f, 0.0, 1.0) * double(kHeat.size())));
    };
    out << fmt::format("<h3>{}</h3>\n", map.title);
    out << fmt::format(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' role='img' "
        "aria-label='{} by rank and step'>\n",
        left + width + 8, top + rowHeight * int(rows) + 4, map.title);
    const StepColumn& first = t.columns.front();
    const StepColumn& last = t.columns.back();
    out << fmt::format(
        "<text x='{}' y='12' font-size='11' fill='#69707d'>step {}</text><text x='{}' y='12' "
        "font-size='11' fill='#69707d' text-anchor='end'>step {}</text>\n",
        left, first.firstStep, left + width, last.lastStep);
    for (size_t i = 0; i < rows; ++i) {
        const RankSteps& r = t.ranks[i];
        int y = top + int(i) * rowHeight;
        out << fmt::format(
            "<a href='#rank-steps-{}'><text x='4' y='{}' font-size='10'>rank {}</text></a>\n",
            r.rank, y + rowHeight - 2, r.rank);
        // one rect per run of cells in the same colour
        for (size_t c = 0; c < r.cells.size();) {
            std::optional<double> v = map.value(r.cells[c]);
            size_t end = c + 1;
            double runLo = v.value_or(0), runHi = v.value_or(0);
            while (end < r.cells.size()) {
                std::optional<double> w = map.value(r.cells[end]);
                if (w.has_value() != v.has_value() || (v && bin(*w) != bin(*v))) break;
                if (w) runLo = std::min(runLo, *w), runHi = std::max(runHi, *w);
                ++end;
            }
            std::string what =
                !v               ? "no step recorded"
                : runLo == runHi ? valueText(runLo, map.unit)
                                 : valueText(runLo, map.unit) + " to " + valueText(runHi, map.unit);
            int64_t slowest = 0;
            for (size_t k = c; k < end; ++k)
                slowest += r.cells[k].slowest;
            out << fmt::format(
                "<rect x='{}' y='{}' width='{}' height='{}' fill='{}'><title>rank {}, steps {}-{}: "
                "{}{}</title></rect>\n",
                left + int(c) * cellWidth, y, int(end - c) * cellWidth, rowHeight - 1,
                v ? kHeat[bin(*v)] : kNoStep, r.rank, t.columns[c].firstStep,
                t.columns[end - 1].lastStep, what,
                slowest > 0 ? fmt::format("; the slowest rank in {} of them", slowest) : "");
            c = end;
        }
    }
    out << "</svg>\n";
    out << fmt::format("<div class='legend muted'>light {} to dark {}", valueText(lo, map.unit),
                       valueText(hi, map.unit));
    if (scaleFrom > 0) out << " (the first column, with the set-up, is not in the scale)";
    if (t.stepsPerColumn > 1) out << fmt::format("; {} steps a column", t.stepsPerColumn);
    out << "; grey: no step recorded</div>\n";
}

void writeOps(const TimeBreakdown& t, std::ostream& out) {
    constexpr size_t kOpsListed = 40;
    out << "<h3>Ops by time</h3>\n<p class=muted>Host time of each op (including the ops it "
           "called) and of each collective (issue to completion), all ranks together.</p>\n"
           "<table><tr><th>op</th><th>calls</th><th>total</th><th>mean</th><th>max</th><th>"
           "ranks</th><th>placements of its inputs</th></tr>\n";
    for (size_t i = 0; i < t.ops.size() && i < kOpsListed; ++i) {
        const OpStat& o = t.ops[i];
        std::string placements;
        for (const std::string& p : o.placements)
            placements += "<code>" + esc(p) + "</code><br>";
        if (o.morePlacements > 0) placements += fmt::format("{} more", o.morePlacements);
        if (o.collective) placements = fmt::format("<i>collective</i>, {} bytes", o.bytes);
        out << fmt::format(
            "<tr><td><code>{}</code></td><td class=n>{}</td><td class=n>{}</td><td "
            "class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>\n",
            esc(o.name), o.count, formatDuration(o.totalNs), formatDuration(o.meanNs()),
            formatDuration(o.maxNs), o.ranks, placements);
    }
    out << "</table>\n";
    if (t.ops.size() > kOpsListed)
        out << fmt::format("<p class=muted>{} more op(s) are in the JSON report.</p>\n",
                           t.ops.size() - kOpsListed);
}

void writeRankSteps(const TimeBreakdown& t, std::ostream& out) {
    constexpr size_t kRanksListed = 256;
    out << "<h3>Steps per rank</h3>\n<p class=muted>Medians over each rank's steps; ranks "
           "furthest from the median rank's time outside collectives first.</p>\n<table><tr><th>"
           "rank</th><th>steps</th><th>step</th><th>outside collectives</th><th>collective in "
           "flight</th><th>slowest in</th><th>incidents</th></tr>\n";
    for (size_t i = 0; i < t.ranks.size() && i < kRanksListed; ++i) {
        const RankSteps& r = t.ranks[i];
        out << fmt::format(
            "<tr id='rank-steps-{}'><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td "
            "class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>\n",
            r.rank, r.rank, r.steps, formatDuration(r.medianStepNs),
            formatDuration(r.medianOutsideNs), formatDuration(r.medianCollectiveNs), r.slowestIn,
            r.incidents);
    }
    out << "</table>\n";
    if (t.ranks.size() > kRanksListed)
        out << fmt::format("<p class=muted>{} more rank(s) are in the JSON report.</p>\n",
                           t.ranks.size() - kRanksListed);
}

void writeSlowest(const TimeBreakdown& t, std::ostream& out) {
    constexpr size_t kStepsListed = 20;
    if (t.slowest.empty()) return;
    std::vector<const SlowestRank*> worst = stepsFurthestAhead(t, kStepsListed);
    out << fmt::format(
        "<h3>The slowest rank of each step</h3>\n<p class=muted>The rank with the longest time "
        "outside collectives: the others wait for it. The {} step(s) where it was furthest ahead "
        "of the others, of {}.</p>\n<table><tr><th>step</th><th>slowest rank</th><th>outside "
        "collectives</th><th>other ranks' mean</th><th>ratio</th></tr>\n",
        worst.size(), t.slowest.size());
    for (const SlowestRank* s : worst)
        out << fmt::format(
            "<tr><td class=n>{}</td><td class=n><a href='#rank-steps-{}'>{}</a></td><td "
            "class=n>{}</td><td class=n>{}</td><td class=n>{:.2f}x</td></tr>\n",
            s->step, s->rank, s->rank, formatDuration(s->outsideNs),
            formatDuration(s->meanOthersNs), s->ratio());
    out << "</table>\n";
}

}  // namespace

void writeTimeSection(const TimeBreakdown& t, std::ostream& out) {
    if (!t.computed || (t.ops.empty() && t.ranks.empty())) return;
    out << "<h2>Where the time goes</h2>\n";
    for (const Finding& f : stragglerFindings(t))
        out << "<div class='finding straggler'><b>straggler</b>" << esc(f.message) << "</div>\n";
    bool steps = !t.columns.empty();
    if (steps) {
        constexpr size_t kRanksDrawn = 64;
        size_t rows = std::min(t.ranks.size(), kRanksDrawn);
        out << "<p class=muted>Ranks by steps, the ranks furthest from the median rank's time "
               "outside collectives first. A step ends with its optimizer.step(). A rank's name "
               "leads to its row below.</p>\n";
        auto perStep = [](int64_t ns, const StepCell& c) -> std::optional<double> {
            if (c.steps == 0) return std::nullopt;
            return double(ns) / double(c.steps);
        };
        writeHeatMap(t,
                     {"Time outside collectives (the ranks' own work: the slowest makes the "
                      "others wait)",
                      "time", [&](const StepCell& c) { return perStep(c.outsideNs(), c); }},
                     rows, out);
        writeHeatMap(t,
                     {"Step time", "time", [&](const StepCell& c) { return perStep(c.wallNs, c); }},
                     rows, out);
        writeHeatMap(t,
                     {"Time with a collective in flight (waiting for the others, or moving "
                      "data)",
                      "time", [&](const StepCell& c) { return perStep(c.collectiveNs, c); }},
                     rows, out);
        bool incidents = false;
        for (const RankSteps& r : t.ranks)
            incidents = incidents || r.incidents > 0;
        if (incidents)
            writeHeatMap(t,
                         {"Incidents", "count",
                          [](const StepCell& c) -> std::optional<double> {
                              if (c.steps == 0 && c.incidents == 0) return std::nullopt;
                              return double(c.incidents);
                          }},
                         rows, out);
        if (t.ranks.size() > rows)
            out << fmt::format(
                "<p class=muted>{} more rank(s), closer to the median, are not drawn; every rank "
                "is in the JSON report.</p>\n",
                t.ranks.size() - rows);
        writeRankSteps(t, out);
        writeSlowest(t, out);
    } else {
        out << "<p class=muted>No optimizer step was recorded: there are no steps to break "
               "down.</p>\n";
    }
    if (!t.ops.empty()) writeOps(t, out);
}

}  // namespace meshscope
