#pragma once

// Opens a rank file and runs every query on it. Used by the damaged-file
// tests and the fuzz harness: any outcome but a clean result or a StoreError
// (a crash, a hang, another exception) is a bug.

#include <filesystem>

#include "core/store/rank_reader.h"

namespace meshscope::test {

inline void exerciseRankFile(const std::filesystem::path& file) {
    RankReader r = RankReader::open(file);
    r.summary();
    r.meshes();
    r.optimizerSteps();
    auto ops = r.opsAfter(OpSeq{}, 200);
    for (const auto& op : ops) {
        r.string(op.name);
        r.stack(op.stack);
    }
    r.opsInTimeRange(0, kNoLimit, 200);
    r.opsInStepRange(0, 3, 200);
    r.collectivesInTimeRange(0, kNoLimit);
    r.deviceTimes();
    for (const auto& in : r.incidentsAfter(IncidentSeq{}, 50)) {
        r.tensor(in.plainTensor);
        r.string(in.evidence);
    }
    r.incidentsInStepRange(0, 100);
}

}  // namespace meshscope::test
