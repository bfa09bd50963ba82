#include "ui/timeline/timeline_feeder.h"

#include <algorithm>
#include <exception>

#include "core/model/run_clock.h"

namespace meshscope::ui {

namespace {

// The index of id's text in track.strings, read on first use.
uint32_t resolveString(const RankReader& reader, RankTimeline& track, StringId id) {
    if (!id.valid()) return 0;
    auto [it, fresh] = track.stringIndex.try_emplace(id.value(), uint32_t(track.strings.size()));
    if (fresh) track.strings.push_back(reader.string(id));
    return it->second;
}

void readThreadNames(const RankInfo& info, RankTimeline& track) {
    const std::string prefix(kThreadMetaPrefix);
    for (auto it = info.meta.lower_bound(prefix);
         it != info.meta.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
        track.threadNames[uint32_t(std::strtoul(it->first.c_str() + prefix.size(), nullptr, 10))] =
            it->second;
}

// Restores start order in lanes that received an out-of-order span, and
// whether their ends are sorted too.
void repairLanes(RankTimeline& track, const std::vector<bool>& unsorted) {
    for (size_t i = 0; i < track.lanes.size() && i < unsorted.size(); ++i) {
        if (!unsorted[i]) continue;
        Lane& lane = track.lanes[i];
        std::stable_sort(lane.spans.begin(), lane.spans.end(),
                         [](const Span& a, const Span& b) { return a.start < b.start; });
        lane.endsSorted =
            std::is_sorted(lane.spans.begin(), lane.spans.end(),
                           [](const Span& a, const Span& b) { return a.end < b.end; });
    }
}

int64_t feedOps(const RankReader& reader, RankTimeline& track, int64_t maxOps) {
    std::vector<bool> unsorted(track.lanes.size(), false);
    Lane* last = nullptr;
    int64_t added = 0;
    auto visit = [&](const OpRecord& op) {
        if (!last || last->thread != op.thread || last->depth != op.depth) {
            last = &track.lane(op.thread, op.depth);
            unsorted.resize(track.lanes.size(), false);
        }
        Span s{op.startNs,     std::max(op.endNs, op.startNs),
               op.seq.value(), resolveString(reader, track, op.name),
               op.phase,       bool(op.incident)};
        if (!last->spans.empty()) {
            const Span& prev = last->spans.back();
            if (s.start < prev.start) unsorted[size_t(last - track.lanes.data())] = true;
            if (s.end < prev.end) last->endsSorted = false;
        }
        last->maxDuration = std::max(last->maxDuration, saturatingSub(s.end, s.start));
        last->spans.push_back(s);
        track.firstNs = std::min(track.firstNs, s.start);
        track.lastNs = std::max(track.lastNs, s.end);
        track.lastOpSeq = s.seq;  // kept per op: a reader error mid-page loses nothing
        ++track.opCount;
        ++added;
    };
    try {
        reader.scanOps(OpSeq{track.lastOpSeq}, maxOps, visit);
    } catch (...) {
        repairLanes(track, unsorted);
        throw;
    }
    repairLanes(track, unsorted);
    return added;
}

int64_t feedIncidents(const RankReader& reader, RankTimeline& track) {
    auto rows = reader.incidentsAfter(IncidentSeq{track.lastIncidentSeq}, kNoLimit, false);
    for (const IncidentRecord& inc : rows) {
        IncidentMark m{inc.timeNs,
                       inc.seq.value(),
                       inc.step,
                       inc.thread,
                       resolveString(reader, track, inc.op),
                       inc.action,
                       inc.outcome,
                       Verdict::NotChecked,
                       inc.kind};
        auto at = std::upper_bound(track.incidents.begin(), track.incidents.end(), m.time,
                                   [](int64_t t, const IncidentMark& x) { return t < x.time; });
        track.incidents.insert(at, m);
        track.lastIncidentSeq = std::max(track.lastIncidentSeq, inc.seq.value());
        track.firstNs = std::min(track.firstNs, inc.timeNs);
        track.lastNs = std::max(track.lastNs, inc.timeNs);
    }
    return int64_t(rows.size());
}

// A seq missing this far below the newest is taken as lost, not late.
constexpr int64_t kCollectiveLookback = 4096;

int64_t feedCollectives(const RankReader& reader, RankTimeline& track) {
    auto rows = reader.collectivesAfter(CollectiveSeq{track.lastCollectiveSeq});
    int64_t added = 0;
    for (const CollectiveRecord& c : rows) {
        if (!track.collectivesAbove.insert(c.seq.value()).second) continue;  // read before
        ++added;
        CollectiveSpan s{
            c.startNs, std::max(c.endNs, c.startNs),         c.seq.value(), c.op.value(), c.step,
            c.bytes,   resolveString(reader, track, c.kind), c.thread,      c.state};
        auto at = std::upper_bound(track.collectives.begin(), track.collectives.end(), s.start,
                                   [](int64_t t, const CollectiveSpan& x) { return t < x.start; });
        track.collectives.insert(at, s);
        track.maxCollectiveDuration =
            std::max(track.maxCollectiveDuration, saturatingSub(s.end, s.start));
    }
    auto& above = track.collectivesAbove;
    int64_t newest = above.empty() ? track.lastCollectiveSeq : *above.rbegin();
    while (!above.empty() && (*above.begin() == track.lastCollectiveSeq + 1 ||
                              *above.begin() < newest - kCollectiveLookback)) {
        track.lastCollectiveSeq = *above.begin();
        above.erase(above.begin());
    }
    return added;
}

int64_t feedSteps(const RankReader& reader, RankTimeline& track) {
    auto rows = reader.optimizerStepsAfter(track.lastStep);
    for (const OptimizerStepRecord& s : rows) {
        track.steps.push_back({s.step, s.startNs, std::max(s.endNs, s.startNs)});
        track.lastStep = std::max(track.lastStep, s.step);
    }
    return int64_t(rows.size());
}

}  // namespace

void initRank(const RankReader& reader, RankTimeline& track) {
    const RankInfo& info = reader.info();
    track.rank = info.rank;
    track.host = info.hostname;
    track.pid = info.pid;
    track.wallOriginNs = info.clockOriginWallNs;
    readThreadNames(info, track);
    track.state = info.endedNs ? RankState::Finished : RankState::Live;
    track.lastGrowth = std::chrono::steady_clock::now();
}

FeedResult feedRank(const RankReader& reader, RankTimeline& track, int64_t maxOps) {
    FeedResult r;
    try {
        r.ops = feedOps(reader, track, maxOps);
        r.incidents = feedIncidents(reader, track);
        r.collectives = feedCollectives(reader, track);
        r.steps = feedSteps(reader, track);
        if (r.ops > 0) readThreadNames(reader.info(), track);
    } catch (const std::exception& e) {
        r.error = e.what();
    }
    if (r.grew()) track.lastGrowth = std::chrono::steady_clock::now();
    return r;
}

}  // namespace meshscope::ui
