#include "ui/timeline/timeline_data.h"

#include "core/analysis/incident_explanation.h"
#include "core/model/run_clock.h"
#include "core/report/report_text.h"

#include <algorithm>
#include <unordered_map>

namespace meshscope::ui {

IncidentState markKind(const IncidentMark& mark) {
    return incidentState(mark.outcome, mark.verdict);
}

const std::string& RankTimeline::string(uint32_t id) const {
    static const std::string kNone;
    return id < strings.size() ? strings[id] : kNone;
}

Lane& RankTimeline::lane(uint32_t thread, uint16_t depth) {
    for (Lane& l : lanes)
        if (l.thread == thread && l.depth == depth) return l;
    Lane& fresh = lanes.emplace_back();
    fresh.thread = thread;
    fresh.depth = depth;
    if (spill) fresh.spans.spillTo(spill);
    return fresh;
}

std::vector<size_t> RankTimeline::laneOrder() const {
    std::vector<size_t> order(lanes.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::pair(lanes[a].thread, lanes[a].depth) <
               std::pair(lanes[b].thread, lanes[b].depth);
    });
    return order;
}

std::string RankTimeline::threadName(uint32_t thread) const {
    auto it = threadNames.find(thread);
    if (it != threadNames.end() && !it->second.empty()) return it->second;
    return "thread " + std::to_string(thread);
}

void TimelineData::realign(AlignMode mode) {
    alignMode = mode;
    if (ranks.empty()) return;
    RunClock clock;
    for (const RankTimeline& r : ranks)
        clock.addRank(r.rank, r.wallOriginNs);
    // Reference for step alignment: the lowest rank that has steps.
    const RankTimeline* ref = nullptr;
    for (const RankTimeline& r : ranks)
        if (!r.steps.empty()) {
            ref = &r;
            break;
        }
    for (RankTimeline& r : ranks) {
        int64_t wallDelta = clock.offset(r.rank);
        if (mode == AlignMode::WallClock || !ref) {
            r.align = AlignMap::offset(wallDelta);
            continue;
        }
        int64_t refDelta = clock.offset(ref->rank);
        std::unordered_map<int64_t, int64_t> refEnd;
        for (const StepBand& s : ref->steps)
            refEnd.emplace(s.step, saturatingAdd(s.end, refDelta));
        std::vector<std::pair<int64_t, int64_t>> knots;
        for (const StepBand& s : r.steps)
            if (auto it = refEnd.find(s.step); it != refEnd.end())
                knots.emplace_back(s.end, it->second);
        r.align = knots.empty() ? AlignMap::offset(wallDelta)
                                : AlignMap::piecewise(std::move(knots), wallDelta);
    }
}

int64_t stepStart(const RankTimeline& rank, int64_t step) {
    for (const StepBand& b : rank.steps)
        if (b.step == step - 1) return b.end;
    auto it = rank.stepStarts.find(step);
    return it != rank.stepStarts.end() ? it->second : rank.firstNs;
}

std::pair<double, double> TimelineData::alignedRange() const {
    double lo = 0, hi = 0;
    bool any = false;
    for (const RankTimeline& r : ranks) {
        if (r.empty()) continue;
        double a = r.align.toAligned(r.firstNs), b = r.align.toAligned(r.lastNs);
        lo = any ? std::min(lo, a) : a;
        hi = any ? std::max(hi, b) : b;
        any = true;
    }
    return {lo, hi};
}

int64_t TimelineData::totalOps() const {
    int64_t n = 0;
    for (const RankTimeline& r : ranks)
        n += r.opCount;
    return n;
}

void TimelineData::applyVerdicts(const RunAnalysis& analysis) {
    std::unordered_map<int64_t, Verdict> verdicts;  // (rank << 40 | seq) -> verdict
    for (const IncidentRef& ref : analysis.incidents)
        verdicts[(int64_t(ref.rank) << 40) | ref.seq.value()] = ref.verdict;
    for (RankTimeline& r : ranks)
        for (IncidentMark& m : r.incidents)
            if (auto it = verdicts.find((int64_t(r.rank) << 40) | m.seq); it != verdicts.end())
                m.verdict = it->second;
}

void TimelineData::applyReach(const std::vector<RecordingReach>& reaches) {
    for (const RecordingReach& reach : reaches) {
        RankTimeline* r = findRank(reach.rank);
        if (!r || reach.end == RecordingReach::End::Live) continue;
        bool closed = reach.end == RecordingReach::End::Closed;
        // A closed file of a rank still followed live may hold rows the
        // timeline has not read yet: the live poll that reads its last rows
        // marks it finished (an analysis finished meanwhile used to, and the
        // rest of the rank was never read).
        if (closed && r->state == RankState::Live) continue;
        r->state = closed ? RankState::Finished : RankState::Stopped;
        // a closed file of a rank that was killed or died says so too
        bool clean = reach.how == "ended" || reach.how == "exited with 0";
        r->endLabel = closed && clean ? "" : reach.how;
    }
}

void TimelineData::applyStops(const RunAnalysis& analysis) {
    for (RankTimeline& r : ranks)
        r.stop.reset();
    applyReach(analysis.reach);
    if (!report_text::stopsWorthShowing(analysis.stops)) return;
    for (const RankStop& s : analysis.stops) {
        RankTimeline* r = findRank(s.rank);
        if (!r || r->state == RankState::Live) continue;
        StopMark m;
        m.state = s.state();
        m.kind = s.stoppedIn;
        if (s.stoppedIn && s.pendingNs >= 0) {
            m.time = s.pendingNs;
            m.label = "stopped: " + std::string(incidentKindInfo(*s.stoppedIn).tag);
        } else if (s.lastCollectiveNs >= 0) {
            m.time = s.lastCollectiveNs;
            m.kind.reset();
            m.label = "last collective";
        } else {
            continue;
        }
        r->stop = std::move(m);
    }
}

RankTimeline* TimelineData::findRank(int rank) {
    for (RankTimeline& r : ranks)
        if (r.rank == rank) return &r;
    return nullptr;
}

const RankTimeline* TimelineData::findRank(int rank) const {
    for (const RankTimeline& r : ranks)
        if (r.rank == rank) return &r;
    return nullptr;
}

const RankTimeline& RankRef::find() const {
    const std::vector<RankTimeline>& ranks = m_data->ranks;
    for (size_t i = 0; i < ranks.size(); ++i)
        if (ranks[i].rank == m_rank) {
            m_hint = i;
            return ranks[i];
        }
    static const RankTimeline gone;  // never: ranks are only added
    return gone;
}

namespace {

// First span that may end at or after raw time t.
size_t firstCandidate(const Lane& lane, int64_t t) {
    if (lane.endsSorted) return lane.spans.firstEndingAt(t);
    int64_t from = t > std::numeric_limits<int64_t>::min() + lane.maxDuration
                       ? t - lane.maxDuration
                       : std::numeric_limits<int64_t>::min();
    return lane.spans.firstStartingAt(0, from);
}

}  // namespace

void visibleItems(const Lane& lane, const Projection& p, double widthPx, double minPx,
                  std::vector<DrawItem>& out) {
    out.clear();
    const SpanColumn& spans = lane.spans;
    if (spans.empty()) return;
    constexpr size_t kBucket = SpanColumn::kSpansPerBucket;
    int64_t t0 = p.toRaw(0), t1 = saturatingAdd(p.toRaw(widthPx), 1);
    size_t i = firstCandidate(lane, t0);
    const size_t n = spans.size();
    auto narrow = [&](const SpanColumn::Bucket& b) {
        return p.toPx(b.maxEnd) - p.toPx(b.minStart) < minPx;
    };
    while (i < n) {
        // Zoomed out, a whole bucket narrower than minPx folds by its
        // summary, with the narrow buckets after it that start before
        // x0 + minPx: the view reads no span of them.
        if (i % kBucket == 0 && i + kBucket <= n) {
            const SpanColumn::Bucket& b = spans.bucket(i / kBucket);
            if (b.minStart >= t1) break;
            if (double x0 = p.toPx(b.minStart); p.toPx(b.maxEnd) - x0 < minPx) {
                int64_t limit = p.toRaw(x0 + minPx), end = b.maxEnd;
                size_t k = i / kBucket + 1;
                for (; (k + 1) * kBucket <= n && spans.bucket(k).minStart < limit &&
                       narrow(spans.bucket(k));
                     ++k)
                    end = std::max(end, spans.bucket(k).maxEnd);
                out.push_back({b.minStart, end, uint32_t(i), uint32_t(k * kBucket - i)});
                i = k * kBucket;
                continue;
            }
        }
        const Span& s = spans[i];
        if (s.start >= t1) break;
        double x0 = p.toPx(s.start), x1 = p.toPx(s.end());
        if (x1 - x0 >= minPx || i + 1 == n) {
            out.push_back({s.start, s.end(), uint32_t(i), 1});
            ++i;
            continue;
        }
        // Fold every span starting before x0 + minPx into one item; it ends
        // at the next bucket when that one folds by its summary.
        size_t j = std::max(i + 1, spans.firstStartingAt(i + 1, p.toRaw(x0 + minPx)));
        size_t boundary = (i / kBucket + 1) * kBucket;
        if (j > boundary && boundary + kBucket <= n && narrow(spans.bucket(boundary / kBucket)))
            j = boundary;
        int64_t end = std::max(s.end(), spans[j - 1].end());
        out.push_back({s.start, end, uint32_t(i), uint32_t(j - i)});
        i = j;
    }
}

int64_t spanAt(const Lane& lane, int64_t t) {
    size_t i = firstCandidate(lane, t);
    for (; i < lane.spans.size() && lane.spans[i].start <= t; ++i)
        if (lane.spans[i].end() >= t) return int64_t(i);
    return -1;
}

std::vector<uint32_t> density(const RankTimeline& rank, double a0, double a1, int bins) {
    std::vector<uint32_t> out(size_t(std::max(bins, 0)), 0);
    if (bins <= 0 || a1 <= a0) return out;
    std::vector<int64_t> edges(size_t(bins) + 1);
    for (int b = 0; b <= bins; ++b)
        edges[size_t(b)] = rank.align.toRaw(a0 + (a1 - a0) * b / bins);
    for (const Lane& lane : rank.lanes) {
        double prev = lane.spans.startsBefore(edges[0]);
        for (int b = 0; b < bins; ++b) {
            double next = lane.spans.startsBefore(edges[size_t(b) + 1]);
            out[size_t(b)] += uint32_t(std::llround(next) - std::llround(prev));
            prev = next;
        }
    }
    return out;
}

}  // namespace meshscope::ui
