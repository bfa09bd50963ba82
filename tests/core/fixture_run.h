#pragma once

// Small hand-made runs for analysis and report tests: one rank file per call,
// written through the same RankWriter the capture agent uses.

#include <array>
#include <filesystem>
#include <optional>
#include <vector>

#include "core/store/run_directory.h"

namespace meshscope::test {

struct FixtureIncident {
    const char* op;
    OriginClass origin;
    const char* file;
    int line;
    int64_t step;
    Action action;
    Outcome outcome;
    std::optional<uint64_t> fingerprint;
    const char* evidence = "evidence";
    const char* label = "batch";
    const char* function = "fwd";
};

// One rank file with a 1-D mesh over `world` ranks, `ops` ops named after
// their index mod 3, and the given incidents (each with a plain operand and
// a sharded DTensor operand).
inline void writeRank(const std::filesystem::path& dir, int world, int rank, int ops,
                      const std::vector<FixtureIncident>& incidents) {
    Manifest initial;
    initial.runId = "analysis-run";
    initial.worldSize = world;
    auto w = createRankWriter(dir, initial, rank);
    MeshRecord mesh{w->newMeshId(), "cpu", {world}, {"model"}, {}};
    for (int r = 0; r < world; ++r)
        mesh.ranks.push_back(r);
    w->submit(Record{mesh});
    const std::array<const char*, 3> names = {"aten::mm", "aten::add.Tensor", "aten::relu"};
    for (int i = 0; i < ops; ++i) {
        OpRecord op;
        op.startNs = i * 1000;
        op.endNs = i * 1000 + 500;
        op.name = w->intern(names[size_t(i % 3)]);
        op.step = i / 30;
        w->submit(std::move(op));
    }
    for (const FixtureIncident& f : incidents) {
        TensorRecord plain{w->newTensorId(),
                           w->intern("torch.float32"),
                           w->intern("[8, 4]"),
                           w->intern("[8, 4]"),
                           w->intern("cpu"),
                           MeshId{},
                           StringId{},
                           w->intern(f.label),
                           StackId{},
                           32,
                           false};
        TensorRecord weight{w->newTensorId(),
                            w->intern("torch.float32"),
                            w->intern("[4, 4]"),
                            w->intern("[2, 4]"),
                            w->intern("cpu"),
                            mesh.id,
                            w->intern("[Shard(0)]"),
                            w->intern("fc.weight"),
                            StackId{},
                            8,
                            true};
        w->submit(Record{plain});
        w->submit(Record{weight});
        IncidentRecord r;
        r.step = f.step;
        r.op = w->intern(f.op);
        r.operandIndex = 0;
        r.plainTensor = plain.id;
        r.origin = f.origin;
        r.evidence = w->intern(f.evidence);
        r.action = f.action;
        r.outcome = f.outcome;
        r.fingerprint = f.fingerprint;
        r.stack =
            w->internStack(std::array{Frame{w->intern(f.file), f.line, w->intern(f.function)}});
        r.operands = {
            {0, OperandRole::Input, OperandKind::Tensor, plain.id, 0, StringId{}},
            {1, OperandRole::Input, OperandKind::Tensor, weight.id, 0, w->intern("[Shard(0)]")}};
        w->submit(std::move(r));
    }
    w->close();
}

}  // namespace meshscope::test
