#include "ui/inspector/op_detail.h"

namespace meshscope::ui {

std::optional<OpDetail> describeOp(const RankReader& rank, OpSeq seq) {
    if (!seq.valid()) return std::nullopt;
    auto rows = rank.opsAfter(OpSeq{seq.value() - 1}, 1);
    if (rows.empty() || rows[0].seq != seq) return std::nullopt;
    const OpRecord& op = rows[0];
    OpDetail d;
    d.rank = rank.info().rank;
    d.seq = op.seq;
    d.name = rank.string(op.name);
    d.startNs = op.startNs;
    d.endNs = op.endNs;
    d.thread = op.thread;
    if (auto it = rank.info().meta.find(threadMetaKey(op.thread)); it != rank.info().meta.end())
        d.threadName = it->second;
    d.step = op.step;
    d.phase = op.phase;
    d.depth = op.depth;
    d.reconciles = op.incident;
    d.stack = resolveStack(rank, op.stack);
    for (const OperandRecord& o : op.operands) {
        std::optional<TensorRecord> t;
        d.operands.push_back(describeOperand(rank, o, &t));
        if (t && t->isDTensor && t->mesh && !d.mesh) d.mesh = findMesh(rank, t->mesh);
    }
    return d;
}

}  // namespace meshscope::ui
