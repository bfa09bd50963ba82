#pragma once

// The timeline's in-memory index of a run. Per rank: op spans in lanes (one
// per thread and nesting depth) sorted by start, optimizer steps,
// collectives and incident markers. TimelineFeeder fills it incrementally,
// by the same code for a finished run and a live one; the canvas queries it:
// culling by binary search and folding of spans narrower than a few pixels
// into one item with a count, so a frame costs O(pixels x log spans) however
// many spans are in view. Every op is a 20-byte Span in a lane's SpanColumn,
// whose full blocks live in a spill file mapped back: the memory the GUI
// holds follows the spans the view reads, not the run's length.
// Qt-free.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/analysis/run_analysis.h"
#include "ui/timeline/align_map.h"
#include "ui/timeline/span_column.h"

namespace meshscope::ui {

// Spans of one thread at one nesting depth: they do not overlap, so sorted
// by start they are sorted by end too (up to clamped children).
struct Lane {
    uint32_t thread = 0;
    uint16_t depth = 0;
    SpanColumn spans;         // sorted by start; full blocks spilled to disk and mapped
    int64_t maxDuration = 0;  // longest span: bounds the culling search
    bool endsSorted = true;   // ends non-decreasing too: binary search on end
};

struct StepBand {
    int64_t step = 0;
    int64_t start = 0, end = 0;  // the optimizer.step() call
};

// A collective from issue to the end of its life (completion, failure, or
// the end of the rank's recording while it was pending).
struct CollectiveSpan {
    int64_t start = 0, end = 0;
    int64_t seq = 0, op = 0, step = -1;
    int64_t bytes = 0;
    uint32_t kind = 0;  // index into the rank's RankTimeline::strings
    uint32_t thread = 0;
    CollectiveState state = CollectiveState::Completed;
};

struct IncidentMark {
    int64_t time = 0;  // rank-local ns
    int64_t seq = 0;   // IncidentSeq value
    int64_t step = -1;
    uint32_t thread = 0;
    uint32_t op = 0;  // index into the rank's RankTimeline::strings
    Action action = Action::Observed;
    Outcome outcome = Outcome::Raised;
    Verdict verdict = Verdict::NotChecked;
    IncidentKind kind = IncidentKind::MixedTensor;
};

// How a mixed-tensor marker is coloured: core/model/vocabulary.h's incident
// states (what happened to the plain tensor). Other kinds take their kind's
// colour (markColor).
IncidentState markKind(const IncidentMark& mark);

// Where a rank stopped (RankStop), placed on its timeline: the collective
// incident it ended in, else its last collective.
struct StopMark {
    int64_t time = 0;                  // rank-local ns
    std::optional<IncidentKind> kind;  // the incident it stopped in; none: last collective
    std::string label;                 // "stopped: hang", "last collective"
    std::string state;                 // RankStop::state()
};

enum class RankState : uint8_t {
    Live,      // a writer may still add rows
    Finished,  // the writer closed its file
    Stopped,   // no new rows for a while and the writer is gone
};

struct RankTimeline {
    int rank = 0;
    std::string host;
    int64_t pid = 0;
    int64_t wallOriginNs = 0;  // wall-clock ns since the epoch at the clock origin
    std::map<uint32_t, std::string> threadNames;
    std::vector<Lane> lanes;  // in order of first appearance; see laneOrder()
    std::vector<StepBand> steps;
    // Where each step's training started (its first data, forward or
    // backward op; rank-local ns): the first step runs from there, the
    // others from the end of the previous optimizer.step(), to the end of
    // their own.
    std::map<int64_t, int64_t> stepStarts;
    std::deque<CollectiveSpan> collectives;  // sorted by start; grows block by block
    int64_t maxCollectiveDuration = 0;
    std::vector<IncidentMark> incidents;  // sorted by time
    std::optional<StopMark> stop;         // set by TimelineData::applyStops
    int64_t firstNs = std::numeric_limits<int64_t>::max();
    int64_t lastNs = std::numeric_limits<int64_t>::min();
    int64_t opCount = 0;
    // The rank's strings the timeline uses, in order of first use ([0]: none),
    // and where each StringId's text is: ids of a damaged file may be sparse
    // or huge, so nothing is sized by an id.
    std::vector<std::string> strings{std::string()};
    std::unordered_map<int64_t, uint32_t> stringIndex;
    AlignMap align;
    // Where the full blocks of lanes created from now on go: a cache file
    // of this rank (span_cache.h); null: the process's spill file.
    std::shared_ptr<SpillStore> spill;

    // Feeding state: what has been read so far.
    int64_t lastOpSeq = 0, lastIncidentSeq = 0;
    // Collectives arrive out of seq order (recorded when their life ends):
    // every seq up to lastCollectiveSeq has been read, and those above it in
    // collectivesAbove.
    int64_t lastCollectiveSeq = 0;
    std::set<int64_t> collectivesAbove;
    int64_t lastStep = std::numeric_limits<int64_t>::min();
    RankState state = RankState::Live;
    // How a rank that did not end cleanly ended: "killed by SIGKILL",
    // "died of SIGABRT", "exited with 1"; "" for a clean end or a live rank.
    std::string endLabel;
    std::chrono::steady_clock::time_point lastGrowth{};

    const std::string& string(uint32_t id) const;
    bool empty() const { return firstNs > lastNs; }
    Lane& lane(uint32_t thread, uint16_t depth);  // created when missing
    std::vector<size_t> laneOrder() const;        // lane indices by (thread, depth)
    std::string threadName(uint32_t thread) const;
};

// Where `step` of `rank` starts: the end of the previous optimizer.step(),
// else its first data, forward or backward op, else the rank's first record.
int64_t stepStart(const RankTimeline& rank, int64_t step);

enum class AlignMode : uint8_t { WallClock, Step };

struct TimelineData {
    std::vector<RankTimeline> ranks;  // ascending rank
    AlignMode alignMode = AlignMode::WallClock;

    // Recomputes every rank's AlignMap (after a mode change or new steps).
    void realign(AlignMode mode);
    // Aligned range covering every rank's data; {0, 0} when empty.
    std::pair<double, double> alignedRange() const;
    int64_t totalOps() const;
    // Sets each marker's cross-rank verdict from an analysis of the run.
    void applyVerdicts(const RunAnalysis& analysis);
    // Places each rank's stop (RankStop) when the run did not end cleanly
    // (a rank stopped in a collective incident, left its file open or was
    // killed); a rank still live gets none. Clears them otherwise.
    void applyStops(const RunAnalysis& analysis);
    // Each rank's state from how its recording ended (RecordingReach): a
    // killed rank of a finished run is never live. applyStops does it too.
    void applyReach(const std::vector<RecordingReach>& reaches);
    RankTimeline* findRank(int rank);
    const RankTimeline* findRank(int rank) const;
};

// A rank of a TimelineData by its number, found again when `ranks` changed
// (a rank that starts late is inserted in order, which moves the others):
// what the timeline's tracks hold instead of references into the vector.
class RankRef {
  public:
    RankRef(const TimelineData& data, int rank) : m_data(&data), m_rank(rank) {}
    // Inline where it was found last (drawing asks per item); else found again.
    const RankTimeline& operator*() const {
        const std::vector<RankTimeline>& ranks = m_data->ranks;
        if (m_hint < ranks.size() && ranks[m_hint].rank == m_rank) return ranks[m_hint];
        return find();
    }
    const RankTimeline* operator->() const { return &**this; }
    int rank() const { return m_rank; }

  private:
    const RankTimeline& find() const;
    const TimelineData* m_data;
    int m_rank;
    mutable size_t m_hint = 0;  // where it was last found
};

// Maps one rank's raw ns to pixels of the current view and back.
struct Projection {
    const AlignMap* align = nullptr;
    double viewStart = 0;  // aligned ns at pixel 0
    double pxPerNs = 1;

    double toPx(int64_t raw) const { return (align->toAligned(raw) - viewStart) * pxPerNs; }
    int64_t toRaw(double px) const { return align->toRaw(viewStart + px / pxPerNs); }
};

// One thing to draw on a lane: a span, or `count` consecutive spans folded
// because each was narrower than the minimum width.
struct DrawItem {
    int64_t start = 0, end = 0;  // raw ns covered
    uint32_t first = 0;          // index of the first span in the lane
    uint32_t count = 1;
};

// Items of `lane` visible between pixels [0, widthPx), spans narrower than
// `minPx` folded together. Clears `out` first.
void visibleItems(const Lane& lane, const Projection& p, double widthPx, double minPx,
                  std::vector<DrawItem>& out);

// Index of the span of `lane` covering raw time t, or -1.
int64_t spanAt(const Lane& lane, int64_t t);

// Op counts of a rank in `bins` equal slices of aligned [a0, a1): the minimap.
std::vector<uint32_t> density(const RankTimeline& rank, double a0, double a1, int bins);

}  // namespace meshscope::ui
