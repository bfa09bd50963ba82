// A training stand-in for the live-follow test: writes a run of RANKS rank
// files and keeps appending ops, incidents and optimizer steps until it is
// killed, as a torchrun worker under `meshscope record` would.
//   ui_live_writer RUN_DIR [RANKS]   prints "ready" once the first rows are committed

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/store/run_directory.h"

using namespace meshscope;

namespace {

void writeIteration(RankWriter& w, MeshId mesh, int64_t it) {
    int64_t t = w.nowNs();
    for (int i = 0; i < 40; ++i) {
        OpRecord op;
        op.startNs = t + i * 1000;
        op.endNs = op.startNs + 700;
        op.name = w.intern(i % 2 ? "aten::mm" : "aten::add.Tensor");
        op.phase = Phase::Forward;
        op.step = it / 10;
        w.submit(std::move(op));
    }
    if (it % 5 == 0) {
        TensorRecord plain{w.newTensorId(),
                           w.intern("torch.float32"),
                           w.intern("[8, 4]"),
                           w.intern("[8, 4]"),
                           w.intern("cpu"),
                           MeshId{},
                           StringId{},
                           w.intern("batch"),
                           StackId{},
                           32,
                           false};
        TensorRecord weight{w.newTensorId(),
                            w.intern("torch.float32"),
                            w.intern("[8, 4]"),
                            w.intern("[4, 4]"),
                            w.intern("cpu"),
                            mesh,
                            w.intern("[Shard(0)]"),
                            w.intern("fc.weight"),
                            StackId{},
                            16,
                            true};
        w.submit(Record{plain});
        w.submit(Record{weight});
        IncidentRecord inc;
        inc.timeNs = t + 500;
        inc.step = it / 10;
        inc.op = w.intern("aten::sub.Tensor");
        inc.operandIndex = 0;
        inc.plainTensor = plain.id;
        inc.origin = OriginClass::InputData;
        inc.evidence = w.intern("created by DataLoader batch #" + std::to_string(it));
        inc.action = Action::ShardedFromLocal;
        inc.outcome = Outcome::Reconciled;
        inc.promotedPlacements = w.intern("[Shard(0)]");
        inc.stack = w.internStack(std::array{Frame{w.intern("train.py"), 73, w.intern("step")}});
        inc.operands = {
            {0, OperandRole::Input, OperandKind::Tensor, plain.id, 0, StringId{}},
            {1, OperandRole::Input, OperandKind::Tensor, weight.id, 0, w.intern("[Shard(0)]")}};
        w.submit(std::move(inc));
    }
    if (it % 10 == 9)
        w.submit(Record{
            OptimizerStepRecord{it / 10, w.intern("torch.optim.Adam"), t + 40000, t + 45000, 4}});
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: ui_live_writer RUN_DIR [RANKS]\n");
        return 2;
    }
    int ranks = argc > 2 ? std::atoi(argv[2]) : 2;
    Manifest initial;
    initial.runId = "live-writer";
    initial.worldSize = ranks;
    std::vector<std::unique_ptr<RankWriter>> writers;
    std::vector<MeshId> meshes;
    for (int r = 0; r < ranks; ++r) {
        writers.push_back(createRankWriter(argv[1], initial, r));
        MeshRecord mesh{writers.back()->newMeshId(), "cpu", {ranks}, {"model"}, {}};
        for (int k = 0; k < ranks; ++k)
            mesh.ranks.push_back(k);
        writers.back()->submit(Record{mesh});
        meshes.push_back(mesh.id);
    }
    for (int64_t it = 0;; ++it) {
        for (int r = 0; r < ranks; ++r) {
            writeIteration(*writers[size_t(r)], meshes[size_t(r)], it);
            writers[size_t(r)]->flushNow();
        }
        if (it == 0) {
            std::printf("ready\n");
            std::fflush(stdout);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
}
