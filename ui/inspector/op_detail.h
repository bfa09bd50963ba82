#pragma once

// One recorded op with its strings resolved: what the inspector shows when
// the selection or the replay cursor is on an op. Qt-free.

#include <optional>
#include <string>
#include <vector>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

struct OpDetail {
    int rank = 0;
    OpSeq seq;
    std::string name;
    int64_t startNs = 0, endNs = 0;  // rank-local monotonic ns
    uint32_t thread = 0;
    std::string threadName;
    int64_t step = -1;
    Phase phase = Phase::Other;
    int depth = 0;
    std::vector<OperandDetail> operands;
    std::vector<SourceFrame> stack;  // innermost user frame first
    IncidentSeq reconciles;          // the incident this promoted op reconciled, if any
    std::optional<MeshRecord> mesh;  // mesh of its DTensor operands
};

std::optional<OpDetail> describeOp(const RankReader& rank, OpSeq seq);

}  // namespace meshscope::ui
