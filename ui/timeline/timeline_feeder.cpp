#include "ui/timeline/timeline_feeder.h"

#include <algorithm>
#include <exception>

#include "core/model/run_clock.h"

namespace meshscope::ui {

namespace {

// The index of id's text in track.strings; `text(id)` reads it on first use.
template <class Text>
uint32_t resolveString(RankTimeline& track, StringId id, const Text& text) {
    if (!id.valid()) return 0;
    auto [it, fresh] = track.stringIndex.try_emplace(id.value(), uint32_t(track.strings.size()));
    if (fresh) track.strings.push_back(text(id));
    return it->second;
}

void readThreadNames(const std::map<std::string, std::string>& meta, RankTimeline& track) {
    const std::string prefix(kThreadMetaPrefix);
    for (auto it = meta.lower_bound(prefix);
         it != meta.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
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
        lane.spans.resummarize();
        lane.endsSorted =
            std::is_sorted(lane.spans.begin(), lane.spans.end(),
                           [](const Span& a, const Span& b) { return a.end() < b.end(); });
    }
}

// Appends ops to their lanes; repairs the order of lanes that got one out of
// order when destroyed (also when a read fails midway).
class OpAppender {
  public:
    explicit OpAppender(RankTimeline& track)
        : m_track(track), m_unsorted(track.lanes.size(), false) {}
    ~OpAppender() { repairLanes(m_track, m_unsorted); }
    OpAppender(const OpAppender&) = delete;
    OpAppender& operator=(const OpAppender&) = delete;

    void add(const OpRow& op, uint32_t name) {
        if (!m_last || m_last->thread != op.thread || m_last->depth != op.depth) {
            m_last = &m_track.lane(op.thread, op.depth);
            m_unsorted.resize(m_track.lanes.size(), false);
        }
        Span s{op.startNs, std::max(op.endNs, op.startNs), op.seq, name, op.phase, op.incident};
        if (!m_last->spans.empty()) {
            const Span& prev = m_last->spans.back();
            if (s.start < prev.start) m_unsorted[size_t(m_last - m_track.lanes.data())] = true;
            if (s.end() < prev.end()) m_last->endsSorted = false;
        }
        m_last->maxDuration = std::max(m_last->maxDuration, s.duration());
        m_last->spans.push_back(s);
        m_track.firstNs = std::min(m_track.firstNs, s.start);
        m_track.lastNs = std::max(m_track.lastNs, s.end());
        m_track.lastOpSeq = op.seq;  // kept per op: a reader error mid-page loses nothing
        // ops come in seq order: a step's first data, forward or backward op
        // starts its training (the set-up before it is not the step's)
        if (op.step != m_step && (op.phase == Phase::Data || op.phase == Phase::Forward ||
                                  op.phase == Phase::Backward)) {
            m_step = op.step;
            auto [it, fresh] = m_track.stepStarts.try_emplace(op.step, s.start);
            if (!fresh) it->second = std::min(it->second, s.start);
        }
        ++m_track.opCount;
    }

  private:
    RankTimeline& m_track;
    std::vector<bool> m_unsorted;
    Lane* m_last = nullptr;
    int64_t m_step = std::numeric_limits<int64_t>::min();
};

OpRow opRow(const OpRecord& op) {
    return {op.seq.value(), op.startNs, op.endNs,          op.thread, op.depth,
            op.name,        op.phase,   bool(op.incident), op.step};
}

void addIncident(RankTimeline& track, const IncidentRecord& inc, uint32_t op) {
    IncidentMark m{inc.timeNs,  inc.seq.value(),     inc.step, inc.thread, op, inc.action,
                   inc.outcome, Verdict::NotChecked, inc.kind};
    auto at = std::upper_bound(track.incidents.begin(), track.incidents.end(), m.time,
                               [](int64_t t, const IncidentMark& x) { return t < x.time; });
    track.incidents.insert(at, m);
    track.lastIncidentSeq = std::max(track.lastIncidentSeq, inc.seq.value());
    track.firstNs = std::min(track.firstNs, inc.timeNs);
    track.lastNs = std::max(track.lastNs, inc.timeNs);
}

constexpr int64_t kIncidentPage = 4096;

// A seq missing this far below the newest is taken as lost, not late.
constexpr int64_t kCollectiveLookback = 4096;

// Whether `c` was new (collectives arrive out of seq order, and a poll may
// read one again).
template <class Text>
bool addCollective(RankTimeline& track, const CollectiveRecord& c, const Text& text) {
    if (c.seq.value() <= track.lastCollectiveSeq ||
        !track.collectivesAbove.insert(c.seq.value()).second)
        return false;  // read before
    CollectiveSpan s{
        c.startNs, std::max(c.endNs, c.startNs),       c.seq.value(), c.op.value(), c.step,
        c.bytes,   resolveString(track, c.kind, text), c.thread,      c.state};
    auto at = std::upper_bound(track.collectives.begin(), track.collectives.end(), s.start,
                               [](int64_t t, const CollectiveSpan& x) { return t < x.start; });
    track.collectives.insert(at, s);
    track.maxCollectiveDuration =
        std::max(track.maxCollectiveDuration, saturatingSub(s.end, s.start));
    return true;
}

// Moves lastCollectiveSeq up over the seqs read without a gap.
void settleCollectives(RankTimeline& track) {
    auto& above = track.collectivesAbove;
    int64_t newest = above.empty() ? track.lastCollectiveSeq : *above.rbegin();
    while (!above.empty() && (*above.begin() == track.lastCollectiveSeq + 1 ||
                              *above.begin() < newest - kCollectiveLookback)) {
        track.lastCollectiveSeq = *above.begin();
        above.erase(above.begin());
    }
}

void addStep(RankTimeline& track, const OptimizerStepRecord& s) {
    track.steps.push_back({s.step, s.startNs, std::max(s.endNs, s.startNs)});
    track.lastStep = std::max(track.lastStep, s.step);
}

}  // namespace

void initRank(const RankInfo& info, RankTimeline& track) {
    track.rank = info.rank;
    track.host = info.hostname;
    track.pid = info.pid;
    track.wallOriginNs = info.clockOriginWallNs;
    readThreadNames(info.meta, track);
    track.state = info.endedNs ? RankState::Finished : RankState::Live;
    track.lastGrowth = std::chrono::steady_clock::now();
}

FeedResult feedRank(const RankReader& reader, RankTimeline& track, int64_t maxOps) {
    FeedResult r;
    auto text = [&](StringId id) { return reader.string(id); };
    try {
        {
            OpAppender ops(track);
            reader.scanOps(OpSeq{track.lastOpSeq}, maxOps, [&](const OpRecord& op) {
                ops.add(opRow(op), resolveString(track, op.name, text));
                ++r.ops;
            });
        }
        for (;;) {  // in pages: an incident record is large (its texts)
            auto page =
                reader.incidentsAfter(IncidentSeq{track.lastIncidentSeq}, kIncidentPage, false);
            for (const IncidentRecord& inc : page)
                addIncident(track, inc, resolveString(track, inc.op, text));
            r.incidents += int64_t(page.size());
            if (int64_t(page.size()) < kIncidentPage) break;
        }
        for (const CollectiveRecord& c :
             reader.collectivesAfter(CollectiveSeq{track.lastCollectiveSeq}))
            r.collectives += addCollective(track, c, text);
        settleCollectives(track);
        auto steps = reader.optimizerStepsAfter(track.lastStep);
        for (const OptimizerStepRecord& s : steps)
            addStep(track, s);
        r.steps = int64_t(steps.size());
        if (r.ops > 0) readThreadNames(reader.info().meta, track);
    } catch (const std::exception& e) {
        r.error = e.what();
    }
    if (r.grew()) track.lastGrowth = std::chrono::steady_clock::now();
    return r;
}

FeedCursor cursorOf(const RankTimeline& track) {
    return {track.rank, track.lastOpSeq, track.lastIncidentSeq, track.lastCollectiveSeq,
            track.lastStep};
}

RankRows readRows(const RankReader& reader, const FeedCursor& cursor, int64_t maxOps) {
    RankRows rows;
    rows.rank = cursor.rank;
    auto named = [&](StringId id) {
        if (id.valid() && !rows.strings.count(id.value()))
            rows.strings.emplace(id.value(), reader.string(id));
    };
    try {
        reader.scanOps(OpSeq{cursor.lastOpSeq}, maxOps, [&](const OpRecord& op) {
            rows.ops.push_back(opRow(op));
            named(op.name);
        });
        rows.incidents =
            reader.incidentsAfter(IncidentSeq{cursor.lastIncidentSeq}, kNoLimit, false);
        for (const IncidentRecord& inc : rows.incidents)
            named(inc.op);
        rows.collectives = reader.collectivesAfter(CollectiveSeq{cursor.lastCollectiveSeq});
        for (const CollectiveRecord& c : rows.collectives)
            named(c.kind);
        rows.steps = reader.optimizerStepsAfter(cursor.lastStep);
    } catch (const std::exception& e) {
        rows.error = e.what();
    }
    return rows;
}

FeedResult applyRows(const RankRows& rows, RankTimeline& track) {
    FeedResult r;
    r.error = rows.error;
    auto text = [&](StringId id) {
        auto it = rows.strings.find(id.value());
        return it == rows.strings.end() ? std::string() : it->second;
    };
    {
        OpAppender ops(track);
        for (const OpRow& op : rows.ops)
            if (op.seq > track.lastOpSeq) {
                ops.add(op, resolveString(track, op.name, text));
                ++r.ops;
            }
    }
    for (const IncidentRecord& inc : rows.incidents)
        if (inc.seq.value() > track.lastIncidentSeq) {
            addIncident(track, inc, resolveString(track, inc.op, text));
            ++r.incidents;
        }
    for (const CollectiveRecord& c : rows.collectives)
        r.collectives += addCollective(track, c, text);
    settleCollectives(track);
    for (const OptimizerStepRecord& s : rows.steps)
        if (s.step > track.lastStep) {
            addStep(track, s);
            ++r.steps;
        }
    if (!rows.meta.empty()) readThreadNames(rows.meta, track);
    if (r.grew()) track.lastGrowth = std::chrono::steady_clock::now();
    return r;
}

}  // namespace meshscope::ui
