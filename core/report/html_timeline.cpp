// The HTML report's per-rank timeline: step bands, collectives and
// incident marks per rank as inline SVG (the report's CSP allows no
// script), the set-up before the first step folded, at most
// kMaxTimelineLanes ranks of a larger job.

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/analysis/incident_explanation.h"
#include "core/analysis/time_breakdown.h"
#include "core/model/run_clock.h"
#include "core/report/html_report.h"
#include "core/report/report_text.h"

namespace meshscope {
namespace {

// Lanes drawn at most. A larger job's timeline draws the ranks that need a
// look, in rank order: those with a failure, then those whose time outside
// collectives is at least kOutlierDeviation off the median rank's (the
// overview's order), then those with a raised incident, then the first
// ranks; the JSON report has every rank.
constexpr size_t kMaxTimelineLanes = 64;
constexpr double kOutlierDeviation = 0.1;

// The time before the first step is folded into kFoldShare of the width
// when it would take more than kFoldAbove of it.
constexpr double kFoldAbove = 0.1, kFoldShare = 0.08;

}  // namespace

std::vector<TimelineLane> timelineLanes(const RunReader& run, const RunAnalysis& a) {
    const size_t n = run.ranks().size();
    std::map<int, size_t> readerOf;
    for (size_t i = 0; i < n; ++i)
        readerOf.emplace(run.ranks()[i].info().rank, i);
    std::vector<size_t> picked;
    std::vector<bool> taken(n, false);
    auto take = [&](int rank) {
        auto it = readerOf.find(rank);
        if (picked.size() == kMaxTimelineLanes || it == readerOf.end() || taken[it->second]) return;
        taken[it->second] = true;
        picked.push_back(it->second);
    };
    if (n > kMaxTimelineLanes) {
        for (const IncidentRef& ref : a.incidents)
            if (ref.kind != IncidentKind::MixedTensor) take(ref.rank);
        for (const RankSteps& r : a.time.ranks)
            if (std::abs(r.deviation) >= kOutlierDeviation) take(r.rank);
        for (const IncidentRef& ref : a.incidents)
            if (ref.outcome != Outcome::Reconciled) take(ref.rank);
    }
    for (size_t i = 0; i < n; ++i)
        take(run.ranks()[i].info().rank);
    std::vector<TimelineLane> lanes;
    for (size_t i : picked)
        lanes.push_back({run.ranks()[i].info().rank, i});
    std::sort(lanes.begin(), lanes.end(),
              [](const TimelineLane& x, const TimelineLane& y) { return x.rank < y.rank; });
    return lanes;
}

void writeTimeline(const RunReader& run, const RunAnalysis& a,
                   const std::vector<TimelineLane>& lanes, std::ostream& out, int width) {
    std::map<int, int> laneOf;
    RunClock clock;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (size_t i = 0; i < lanes.size(); ++i) {
        const RankReader& r = run.ranks()[lanes[i].reader];
        const RankSummary& s = a.summary.ranks[lanes[i].reader].summary;
        laneOf[lanes[i].rank] = int(i);
        clock.addRank(lanes[i].rank, r.info().clockOriginWallNs);
        if (s.ops > 0 || s.incidents > 0) {
            t0 = std::min(t0, clock.wall(lanes[i].rank, s.firstNs));
            t1 = std::max(t1, clock.wall(lanes[i].rank, s.lastNs));
        }
    }
    for (const IncidentRef& ref : a.incidents)
        if (laneOf.contains(ref.rank)) {
            t0 = std::min(t0, clock.wall(ref.rank, ref.timeNs));
            t1 = std::max(t1, clock.wall(ref.rank, ref.timeNs));
        }
    if (t0 >= t1 || lanes.empty()) {
        out << "<p class=muted>No timed events recorded.</p>\n";
        return;
    }
    if (lanes.size() < run.ranks().size())
        out << fmt::format(
            "<p class=muted>{} of {} ranks drawn, in rank order: those with a failure first, then "
            "those at least {:g} % off the median rank's time outside collectives, then those "
            "with a raised incident; every rank is in the JSON report.</p>\n",
            lanes.size(), run.ranks().size(), kOutlierDeviation * 100);
    // Each rank's optimizer steps, and where the earliest first step starts:
    // the time before it (set-up, the process group starting) is folded
    // into a narrow band when it would take more than a tenth of the width.
    std::vector<std::vector<OptimizerStepRecord>> steps(lanes.size());
    std::vector<int64_t> firstStepAt(lanes.size());  // a rank's own, in its clock
    std::optional<int64_t> stepsFrom;
    for (size_t i = 0; i < lanes.size(); ++i) {
        const RankReader& r = run.ranks()[lanes[i].reader];
        steps[i] = r.optimizerSteps();
        firstStepAt[i] = a.summary.ranks[lanes[i].reader].summary.firstNs;
        if (steps[i].empty()) continue;
        if (std::optional<int64_t> start = firstStepStart(r, steps[i].front())) {
            firstStepAt[i] = *start;
            int64_t wall = clock.wall(lanes[i].rank, *start);
            stepsFrom = stepsFrom ? std::min(*stepsFrom, wall) : wall;
        }
    }
    const int left = 70, laneHeight = 46, top = 22;
    // in double: recorded times may span the whole int64 range
    const double span = double(t1) - double(t0);
    const bool fold = stepsFrom && *stepsFrom > t0 && *stepsFrom < t1 &&
                      (double(*stepsFrom) - double(t0)) > span * kFoldAbove;
    // the fold's band, the gap after it, and the steps' width
    const int foldWidth = fold ? std::max(96, int(width * kFoldShare)) : 0;
    const int foldGap = fold ? 10 : 0;
    const double from = fold ? double(*stepsFrom) : double(t0);
    const double stepsSpan = double(t1) - from;
    auto x = [&](int64_t wall) {
        double w = double(wall);
        if (fold && w < from)
            return left +
                   std::clamp((w - double(t0)) / (from - double(t0)), 0.0, 1.0) * (foldWidth - 1);
        return left + foldWidth + foldGap +
               std::clamp((w - from) / stepsSpan, 0.0, 1.0) * (width - 1 - foldWidth - foldGap);
    };
    int height = top + laneHeight * int(lanes.size()) + 10;
    out << fmt::format(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' role='img' "
        "aria-label='per-rank timeline'>\n",
        left + width + 10, height);
    if (fold)
        out << fmt::format(
            "<text x='{}' y='14' font-size='11' fill='#69707d'><title>the time before the "
            "first step (set-up), folded</title>set-up {}</text>\n",
            left, htmlEscape(formatDuration(int64_t(from - double(t0)))));
    out << fmt::format(
        "<text x='{}' y='14' font-size='11' fill='#69707d'>{}</text><text x='{}' y='14' "
        "font-size='11' fill='#69707d' text-anchor='end'>{:.1f} ms (wall clock, ranks "
        "aligned)</text>\n",
        left + foldWidth + foldGap, fold ? "0 ms (first step)" : "0 ms", left + width,
        stepsSpan / 1e6);
    for (size_t i = 0; i < lanes.size(); ++i) {
        const RankReader& r = run.ranks()[lanes[i].reader];
        int y = top + int(i) * laneHeight;
        out << fmt::format(
            "<rect x='{}' y='{}' width='{}' height='{}' fill='#fff' stroke='#dde1e7'/><text "
            "x='8' y='{}' font-size='12'>rank {}</text>\n",
            left, y, width, laneHeight - 6, y + 24, r.info().rank);
        if (fold)  // the folded set-up: greyed, with a break after it
            out << fmt::format(
                "<rect x='{}' y='{}' width='{}' height='{}' fill='#eceff3'/><path d='M{} {}l4 "
                "{}' stroke='#8a94a6' stroke-width='1.5'/>\n",
                left, y, foldWidth, laneHeight - 6, left + foldWidth + foldGap / 2 - 2, y,
                laneHeight - 6);
        // Step bands: alternate shades; when steps are narrower than 2 px,
        // one band per pixel run of steps.
        int64_t previousEnd = firstStepAt[i];
        double lastX = -1;
        int shade = 0;
        for (const OptimizerStepRecord& s : steps[i]) {
            double xa = x(clock.wall(lanes[i].rank, previousEnd));
            double xb = x(clock.wall(lanes[i].rank, s.endNs));
            previousEnd = s.endNs;
            if (xb - lastX < 2 && &s != &steps[i].back()) continue;
            double from = std::max(xa, lastX);
            lastX = xb;
            out << fmt::format(
                "<rect x='{:.1f}' y='{}' width='{:.1f}' height='{}' fill='{}'><title>step "
                "{}</title></rect>\n",
                from, y + 1, std::max(0.5, xb - from), laneHeight - 8,
                shade++ % 2 ? "#eef2f8" : "#f8f9fb", s.step);
        }
        // Collectives from issue to the end of their life: a bar where it is
        // wider than 2 px (a hang reads as a long bar), else one mark per
        // pixel column.
        std::map<int, std::pair<int64_t, int64_t>> columns;  // column -> (count, bytes)
        for (const CollectiveRecord& c : r.collectivesInTimeRange(INT64_MIN, INT64_MAX)) {
            double xa = x(clock.wall(lanes[i].rank, c.startNs));
            double xb = x(clock.wall(lanes[i].rank, std::max(c.startNs, c.endNs)));
            if (xb - xa >= 2 || c.state != CollectiveState::Completed) {
                out << fmt::format(
                    "<rect x='{:.1f}' y='{}' width='{:.1f}' height='8' fill='{}'><title>{} on {}, "
                    "{} bytes, {} after {:.3f} s (its collective #{})</title></rect>\n",
                    xa, y + laneHeight - 17, std::max(2.0, xb - xa),
                    c.state == CollectiveState::Completed ? "#1e88e5"
                    : c.state == CollectiveState::Failed  ? "#c62828"
                    : c.state == CollectiveState::Pending ? "#212121"
                                                          : "#90a4ae",
                    htmlEscape(r.string(c.kind)), htmlEscape(r.string(c.group)), c.bytes,
                    toString(c.state), double(saturatingSub(c.endNs, c.startNs)) / 1e9,
                    c.seq.value() - 1);
                continue;
            }
            auto& col = columns[int(xa)];
            ++col.first;
            col.second = saturatingAdd(col.second, c.bytes);
        }
        for (const auto& [col, cb] : columns)
            out << fmt::format(
                "<rect x='{}' y='{}' width='2' height='8' fill='#1e88e5'><title>{} "
                "collective(s), {} bytes</title></rect>\n",
                col, y + laneHeight - 17, cb.first, cb.second);
    }
    // Incidents, one mark per pixel column, lane and state; failures (other
    // kinds) in their kind's colour.
    std::map<std::tuple<int, int, IncidentState>, int64_t> marks;
    std::map<std::tuple<int, int, IncidentKind>, int64_t> failures;
    for (const IncidentRef& ref : a.incidents) {
        auto lane = laneOf.find(ref.rank);
        if (lane == laneOf.end()) continue;  // a rank the timeline leaves out
        int col = int(x(clock.wall(ref.rank, ref.timeNs)));
        if (ref.kind != IncidentKind::MixedTensor)
            ++failures[{lane->second, col, ref.kind}];
        else
            ++marks[{lane->second, col, incidentState(ref.outcome, ref.verdict)}];
    }
    std::set<IncidentKind> kindsShown;
    for (const auto& [key, n] : failures) {
        auto [lane, col, kind] = key;
        kindsShown.insert(kind);
        out << fmt::format(
            "<path d='M{} {}l5 6l-5 6l-5 -6z' fill='{}'><title>{} incident(s) {}</title></path>\n",
            col, top + lane * laneHeight + 6, report_text::kindColour(kind), n,
            incidentKindInfo(kind).tag);
    }
    for (const auto& [key, n] : marks) {
        auto [lane, col, state] = key;
        const std::string fill = stateColour(state);
        out << fmt::format(
            "<path d='M{} {}l4 7h-8z' fill='{}' stroke='{}'><title>{} incident(s) "
            "{}</title></path>\n",
            col, top + lane * laneHeight + 6 + 8 * int(state), fill,
            state == IncidentState::Invalid ? "#000" : fill, n, incidentStateInfo(state).key);
    }
    out << "</svg>\n<div class='legend muted'>";
    for (const IncidentStateInfo& state : kIncidentStates)
        out << fmt::format("<span title='{}'>&#9650; <b style='color:{}'>{}</b></span>",
                           state.meaning, stateColour(state.kind), state.label);
    for (IncidentKind kind : kindsShown)
        out << fmt::format("<span>&#9670; <b style='color:{}'>{}</b></span>",
                           report_text::kindColour(kind), incidentKindInfo(kind).tag);
    out << "<span><b style='color:#1e88e5'>|</b> collectives</span><span>shaded bands: "
           "optimizer steps</span>";
    if (fold) out << "<span>grey band: the set-up before the first step, folded</span>";
    out << "</div>\n";
}

}  // namespace meshscope
