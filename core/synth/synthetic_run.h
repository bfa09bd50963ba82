#pragma once

// A deterministic synthetic training run: forward/backward/optimizer ops on a
// 1-D mesh, gradient all-reduces, and mixed-tensor incidents of every origin
// class. Feeds the demo, fixtures, benchmarks and the GUI's load tests
// through the same RankWriter the capture agent uses.

#include <cstdint>
#include <filesystem>

#include "core/store/rank_writer.h"

namespace meshscope {

struct SyntheticRunSpec {
    int ranks = 2;
    int steps = 8;
    int layers = 4;
    int incidentsPerStep = 2;  // spread over origin classes A-G
    uint64_t seed = 1;
    // When > 0, the number of steps is chosen to give about this many ops per rank.
    int64_t opsPerRank = 0;
    // End the run the way a broken job ends: rank 0 meets an op with no
    // sharding strategy and a DTensor error, then every rank hangs in a
    // collective its peers never issue (the watchdog's incident, with the
    // threads' stacks), and launch.json says `record` killed them.
    bool failures = false;
    // The replica check's fingerprints at every optimizer step: each layer's
    // norm weight replicated on every rank (with its gradient and Adam
    // state) and its sharded weight (not compared). layers.1's norm drifts:
    // its gradient differs from step 1 on (never reduced across the ranks),
    // its weight and state from step 2 on.
    bool drift = false;
    // A straggler: this rank's input takes `stragglerNs` longer every step
    // (its aten::stack), and the other ranks spend that time waiting in the
    // step's gradient all-reduce. -1: none.
    int straggler = -1;
    int64_t stragglerNs = 20'000'000;
};

struct SyntheticRankTotals {
    int64_t ops = 0;
    int64_t incidents = 0;
    int64_t collectives = 0;
    int64_t steps = 0;
};

// Ops one step produces on one rank for `layers` layers.
int64_t syntheticOpsPerStep(int layers);

SyntheticRankTotals writeSyntheticRank(RankWriter& writer, const SyntheticRunSpec& spec, int rank);

// Writes all ranks of a run into `runDir` (which must not hold rank files).
SyntheticRankTotals writeSyntheticRun(const std::filesystem::path& runDir,
                                      const SyntheticRunSpec& spec);

}  // namespace meshscope
