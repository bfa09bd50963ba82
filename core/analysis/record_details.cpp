// How a recorded incident, operand, stack and mesh read once their strings
// are resolved: the inspector's, the reports' and load_run()'s view of a
// record (declared in run_analysis.h).

#include <fmt/format.h>

#include "core/analysis/run_analysis.h"

namespace meshscope {

std::string formatLocation(const SourceFrame& frame) {
    return frame.file.empty() ? "<unknown>" : fmt::format("{}:{}", frame.file, frame.line);
}

std::string_view toString(Verdict verdict) {
    switch (verdict) {
        case Verdict::NotChecked:
            return "not checked";
        case Verdict::Verified:
            return "verified";
        case Verdict::Invalid:
            return "INVALID";
        case Verdict::Unverified:
            return "unverified";
    }
    return "?";
}

namespace {

void describeTensor(const RankReader& rank, const TensorRecord& t, OperandDetail& od) {
    od.dtype = rank.string(t.dtype);
    od.shape = rank.string(t.globalShape);
    od.localShape = rank.string(t.localShape);
    od.device = rank.string(t.device);
    od.label = rank.string(t.label);
    od.numel = t.numel;
}

}  // namespace

std::vector<SourceFrame> resolveStack(const RankReader& rank, StackId stack) {
    std::vector<SourceFrame> frames;
    if (stack)
        for (const Frame& f : rank.stack(stack))
            frames.push_back({rank.string(f.file), f.line, rank.string(f.function)});
    return frames;
}

OperandDetail describeOperand(const RankReader& rank, const OperandRecord& o,
                              std::optional<TensorRecord>* tensorOut) {
    OperandDetail od;
    od.index = o.index;
    od.output = o.role == OperandRole::Output;
    od.scalar = o.kind == OperandKind::Scalar;
    od.scalarValue = o.scalar;
    od.placements = rank.string(o.placements);
    if (o.kind != OperandKind::Tensor || !o.tensor) return od;
    std::optional<TensorRecord> t = rank.tensor(o.tensor);
    if (t) {
        describeTensor(rank, *t, od);
        if (od.placements.empty()) od.placements = rank.string(t->placements);
        od.plain = !t->isDTensor && !od.output;
    }
    if (tensorOut) *tensorOut = t;
    return od;
}

IncidentDetail describeIncident(const RankReader& rank, const IncidentRecord& inc) {
    IncidentDetail d;
    d.rank = rank.info().rank;
    d.seq = inc.seq;
    d.step = inc.step;
    d.timeNs = inc.timeNs;
    d.kind = inc.kind;
    d.detail = rank.string(inc.detail);
    if (isCollectiveKind(inc.kind)) d.collectiveIndex = inc.operandIndex;
    d.op = rank.string(inc.op);
    d.origin = inc.origin;
    d.evidence = rank.string(inc.evidence);
    d.policyRule = rank.string(inc.policyRule);
    d.error = rank.string(inc.error);
    d.promotedPlacements = rank.string(inc.promotedPlacements);
    d.action = inc.action;
    d.outcome = inc.outcome;
    d.fingerprint = inc.fingerprint;
    d.operandIndex = inc.operandIndex;
    d.stack = resolveStack(rank, inc.stack);
    std::optional<MeshId> mesh;
    bool plainSeen = false;
    for (const OperandRecord& o : inc.operands) {
        std::optional<TensorRecord> t;
        OperandDetail od = describeOperand(rank, o, &t);
        if (t && t->isDTensor && !mesh && t->mesh) mesh = t->mesh;
        if (inc.plainTensor && o.tensor != inc.plainTensor) od.plain = false;  // another one
        if (t && o.tensor == inc.plainTensor) {
            od.plain = true;
            plainSeen = true;
            std::vector<SourceFrame> created = resolveStack(rank, t->createdAt);
            if (!created.empty()) {
                d.createdAt = formatLocation(created[0]);
                d.createdIn = created[0].function;
            }
        }
        d.operands.push_back(std::move(od));
    }
    // an element of a list argument (torch.cat's) shares its operand row
    // with the list's first element
    if (!plainSeen && inc.plainTensor) {
        if (auto t = rank.tensor(inc.plainTensor)) {
            OperandDetail od;
            od.index = inc.operandIndex;
            od.plain = true;
            describeTensor(rank, *t, od);
            std::vector<SourceFrame> created = resolveStack(rank, t->createdAt);
            if (!created.empty()) {
                d.createdAt = formatLocation(created[0]);
                d.createdIn = created[0].function;
            }
            d.operands.push_back(std::move(od));
        }
    }
    if (mesh) d.mesh = findMesh(rank, *mesh);
    return d;
}

std::optional<MeshRecord> findMesh(const RankReader& rank, MeshId id) {
    for (const MeshRecord& m : rank.meshes())
        if (m.id == id) return m;
    return std::nullopt;
}

}  // namespace meshscope
