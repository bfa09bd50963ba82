#pragma once

// Where the time of a run goes, for a healthy run as much as a failing one:
// - per-op statistics (count, total and mean time, the placements each op
//   was called with), collectives beside them;
// - each rank's steps split into time with a collective in flight and time
//   outside collectives (its own work, which the other ranks wait for);
// - the slowest rank of each step, and ranks that are slowest step after
//   step (stragglers, an opt-in finding of `check`);
// - the ranks in overview order, outliers first, for the heat maps.
//
// A step is the time from the end of the previous optimizer.step() (for the
// first step: its first data, forward or backward op, else its first
// record; the set-up before it is not a step) to the end of its own
// optimizer.step(); the records after the last optimizer.step() are not a
// step.
//
// It streams: one rank at a time, ops and collectives page by page. What it
// keeps is bounded by the ops' distinct names, one entry per step across
// ranks and kMaxStepColumns cells per rank.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/run_reader.h"

namespace meshscope {

struct IncidentRef;
struct Finding;

struct OpStat {
    std::string name;  // "aten::mm.default"; collectives: their kind ("all_reduce")
    bool collective = false;
    int64_t count = 0;
    int64_t totalNs = 0;  // host time, including the ops it called
    int64_t maxNs = 0;
    int64_t bytes = 0;  // collectives
    int ranks = 0;      // ranks that ran it
    // The placements of its tensor inputs ("[Shard(dim=0)] x [Replicate()]",
    // "plain" for a plain tensor), most frequent first, the first few.
    std::vector<std::string> placements;
    int64_t morePlacements = 0;  // distinct placements not listed
    int64_t meanNs() const { return count > 0 ? totalNs / count : 0; }
};

// One cell of a rank's row in the overview: one step, or consecutive steps
// when a run has more than kMaxStepColumns of them.
struct StepCell {
    int64_t steps = 0;         // steps of the column this rank recorded
    int64_t wallNs = 0;        // their time, summed
    int64_t collectiveNs = 0;  // of which with a collective in flight
    int64_t incidents = 0;
    int64_t slowest = 0;  // steps of the column in which this rank was the slowest
    int64_t outsideNs() const { return wallNs - collectiveNs; }
};

struct StepColumn {
    int64_t firstStep = 0, lastStep = 0;
};

struct RankSteps {
    int rank = 0;
    std::vector<StepCell> cells;  // one per TimeBreakdown::columns
    int64_t steps = 0;            // steps measured
    // Medians over its steps.
    int64_t medianStepNs = 0, medianOutsideNs = 0, medianCollectiveNs = 0;
    int64_t slowestIn = 0;  // steps in which it was the slowest rank
    int64_t incidents = 0;
    // How far its median time outside collectives is from the median rank's
    // (0.25: a quarter longer); ranks are ordered by it, largest first.
    double deviation = 0;
};

// The rank the others waited for in one step: the longest time outside
// collectives.
struct SlowestRank {
    int64_t step = 0;
    int rank = -1;
    int64_t outsideNs = 0;
    int64_t meanOthersNs = 0;  // the other ranks' mean time outside collectives
    int ranks = 0;             // ranks that recorded the step
    // Its time outside collectives over the others' mean (0: they had none).
    double ratio() const {
        return meanOthersNs > 0 ? double(outsideNs) / double(meanOthersNs) : 0.0;
    }
};

struct TimeBreakdown {
    bool computed = false;
    std::vector<OpStat> ops;  // by total time, longest first (collectives among them)
    std::vector<StepColumn> columns;
    std::vector<RankSteps> ranks;      // overview order: outliers first
    std::vector<SlowestRank> slowest;  // by step; steps at least two ranks recorded
    int64_t stepsPerColumn = 1;
};

inline constexpr size_t kMaxStepColumns = 256;
inline constexpr size_t kPlacementsListed = 6;

struct TimeBreakdownOptions {
    // Called now and then: ops read, ops in all (0 unknown).
    std::function<void(int64_t, int64_t)> progress;
    // The ops of every rank, when the caller has counted them; -1: counted here.
    int64_t totalOps = -1;
};

TimeBreakdown computeTimeBreakdown(const RunReader& run, const std::vector<IncidentRef>& incidents,
                                   const TimeBreakdownOptions& options = {});

// A straggler is a rank that was the slowest in at least half the steps
// (at least kStragglerMinSteps) and whose median time outside collectives is
// at least kStragglerRatio times the median rank's and kStragglerMinNs
// longer: the other ranks wait for it in every collective.
inline constexpr int64_t kStragglerMinSteps = 3;
inline constexpr double kStragglerRatio = 1.2;
inline constexpr int64_t kStragglerMinNs = 1'000'000;
std::vector<Finding> stragglerFindings(const TimeBreakdown& time);

// The `limit` steps whose slowest rank was furthest ahead of the others
// (largest ratio first): the steps a report lists.
std::vector<const SlowestRank*> stepsFurthestAhead(const TimeBreakdown& time, size_t limit);

// Where a rank's first step starts, as the breakdown counts it: the first
// data, forward or backward op of the step of its first optimizer.step()
// (`first`), else that step's first op; nullopt when no op of that step was
// recorded. Reads the rank's ops only up to that step's end.
std::optional<int64_t> firstStepStart(const RankReader& rank, const OptimizerStepRecord& first);

// "12.3 ms", "850 us", "2.41 s".
std::string formatDuration(int64_t ns);

}  // namespace meshscope
