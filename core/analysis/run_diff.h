#pragma once

// What changed between two recordings of (usually) the same training: which
// incident groups appeared or disappeared (keyed by call site, op and origin
// class, so a fix shows up as a disappearance), where each rank's op
// sequence first differs, and each rank's collectives by kind and call site.

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/run_analysis.h"

namespace meshscope {

struct GroupChange {
    std::string op;
    OriginClass origin = OriginClass::Unknown;
    SourceFrame site;
    int64_t countA = 0, countB = 0;
    int64_t unreconciledA = 0, unreconciledB = 0;
};

struct OpSequenceChange {
    int rank = 0;
    uint32_t thread = 0;
    int64_t index = 0;
    std::string a, b;  // op at `index` in each run ("" = that run's sequence ended)
    int64_t step = -1;
};

// One rank's collectives of one kind issued from one call site, in each run
// (a count or a byte total that differs).
struct CollectiveChange {
    int rank = 0;
    std::string kind;
    std::string site;  // "train.py:30", the innermost recorded frame; "" unknown
    int64_t countA = 0, countB = 0;
    int64_t bytesA = 0, bytesB = 0;
};

struct RunDiff {
    std::vector<GroupChange> appeared;     // in B only
    std::vector<GroupChange> disappeared;  // in A only
    std::vector<GroupChange> changed;      // in both, with other counts
    std::vector<OpSequenceChange> opChanges;
    std::vector<CollectiveChange> collectiveChanges;  // ranks in both runs
    std::vector<int> ranksOnlyInA, ranksOnlyInB;
    int64_t opsCompared = 0;
    bool empty() const {
        return appeared.empty() && disappeared.empty() && changed.empty() && opChanges.empty() &&
               collectiveChanges.empty() && ranksOnlyInA.empty() && ranksOnlyInB.empty();
    }
};

RunDiff diffRuns(const RunReader& a, const RunAnalysis& analysisA, const RunReader& b,
                 const RunAnalysis& analysisB, bool compareOps = true);

std::string formatDiffText(const RunDiff& diff);
nlohmann::json diffToJson(const RunDiff& diff);

}  // namespace meshscope
