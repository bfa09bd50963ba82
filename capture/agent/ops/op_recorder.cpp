#include "capture/agent/ops/op_recorder.h"

#include <torch/csrc/autograd/python_variable.h>

#include <string>
#include <vector>

#include "capture/agent/hooks/hook_phases.h"
#include "capture/agent/incidents/births.h"
#include "core/util/hot_path.h"

namespace meshscope::capture {

bool OpRecorder::tagsFactory() const {
    return m_op.info().isFactory && tagsCreations(m_op.agent());
}

bool OpRecorder::needsProvenance() const {
    return tagsFactory() || m_op.agent().tensors().hasProvenance();
}

MESHSCOPE_HOT bool OpRecorder::tagsCreations(Agent& agent) {
    if (agent.phase() != Phase::Backward) return true;
    PyGILState_STATE gil = PyGILState_Ensure();
    bool user = agent.frames().innermostIsUser(agent.writer());
    PyGILState_Release(gil);
    return user;
}

MESHSCOPE_HOT void OpRecorder::afterPlainOp(const Operands& outputs) {
    injectedFault("provenance");
    Agent& agent = m_op.agent();
    agent.counters().provenanceOps.fetch_add(1, std::memory_order_relaxed);
    const OpInfo& info = m_op.info();
    if (tagsFactory()) {
        // torch.tensor(data), torch.as_tensor(array) and torch.from_numpy()
        // lift their new tensor with aten::lift_fresh
        static const std::string lifted = "torch.tensor/as_tensor/from_numpy (aten::lift_fresh)";
        tagOutputs(outputs,
                   birthProvenance(agent, info.text == "aten::lift_fresh" ? lifted : info.text,
                                   outputs.empty() ? nullptr : &outputs.front().tensor()));
    } else if (agent.tensors().hasProvenance()) {
        propagate(outputs);
    }
}

void OpRecorder::tagOutputs(const Operands& outs, const Provenance& provenance) {
    for (const Operand& op : outs)
        if (!op.dtensor) m_op.agent().tensors().setProvenance(op.tensor(), provenance);
}

MESHSCOPE_HOT void OpRecorder::propagate(const Operands& outs) {
    Agent& agent = m_op.agent();
    TensorTable& tensors = agent.tensors();
    TensorTable::ProvenancePtr derived;
    for (const Operand& op : m_op.inputs())
        if ((derived = tensors.derivedProvenance(op.tensor()))) break;
    if (!derived) return;
    // A chain's last step: this op at its user frame (one record per frame
    // and op, shared like provenances).
    TensorTable::ProvenancePtr step;
    for (const Operand& op : outs)
        if (!op.dtensor && !tensors.provenance(op.tensor()))
            if (TensorTable::Entry* entry = tensors.setProvenance(op.tensor(), derived)) {
                if (!step) {  // kept by frame and op: a step run every iteration formats nothing
                    TensorTable::PlaceKey key{agent.frames().userStack(m_op.writer()),
                                              m_op.info().name, TensorTable::kLastStepPlace};
                    if (!(step = tensors.byPlace(key))) {
                        Provenance last;
                        last.evidence = m_op.info().text;
                        last.createdAt = key.stack;
                        step = tensors.intern(std::move(last));
                        tensors.rememberPlace(key, step);
                    }
                }
                entry->lastStep = step;
            }
}

MESHSCOPE_HOT TensorId OpRecorder::tensorId(const Operand& op, const DTensorFacts* facts,
                                            bool identity, const std::string& label) {
    const at::Tensor& t = op.tensor();
    TensorTable::Entry* entry = m_op.agent().tensors().find(t);
    if (entry && entry->recorded) return entry->id;
    DTensorFacts own =
        op.dtensor && !facts ? m_op.torch().dtensorFacts(op.obj, m_op.writer()) : DTensorFacts{};
    const DTensorFacts& f = facts ? *facts : own;
    if (!entry && !identity) return describedId(op, f);
    bool isNew = false;
    if (!entry) entry = &m_op.agent().tensors().get(t, isNew);
    entry->recorded = true;
    recordTensor(op, f, entry->id, entry->provenance.get(), label);
    return entry->id;
}

MESHSCOPE_HOT TensorId OpRecorder::describedId(const Operand& op, const DTensorFacts& facts) {
    const at::Tensor& t = op.tensor();
    // A DTensor's description is its spec's: remembered with the spec entry
    // (no hashing of the shape per operand).
    if (op.dtensor && facts.described.matches(t)) return facts.described.id;
    TensorDescriptions::Key key{t.scalar_type(), t.device(),       op.dtensor,
                                facts.mesh,      facts.placements, t.sizes()};
    TensorDescriptions& descriptions = m_op.agent().descriptions();
    TensorId id = descriptions.find(key);
    if (!id) {
        id = m_op.writer().newTensorId();
        recordTensor(op, facts, id, nullptr);
        descriptions.add(key, id);
    }
    if (op.dtensor)
        m_op.torch().rememberDescription(facts, {id, t.scalar_type(), t.device(), t.numel()});
    return id;
}

void OpRecorder::recordTensor(const Operand& op, const DTensorFacts& facts, TensorId id,
                              const Provenance* provenance, const std::string& label) {
    RankWriter& writer = m_op.writer();
    TorchTypes& torch = m_op.torch();
    const at::Tensor& t = op.tensor();
    TensorRecord rec;
    rec.id = id;
    rec.dtype = torch.dtypeId(t.scalar_type(), writer);
    rec.globalShape = writer.intern(shapeText(t.sizes().data(), t.sizes().size()));
    rec.device = torch.deviceId(t.device(), writer);
    rec.numel = t.numel();
    rec.isDTensor = op.dtensor;
    if (provenance) rec.createdAt = provenance->createdAt;
    if (!label.empty()) rec.label = writer.intern(label);
    rec.localShape = rec.globalShape;
    if (op.dtensor) {
        rec.mesh = facts.mesh;
        rec.placements = facts.placements;
        if (facts.placementsText.find("Shard") != std::string::npos) {  // else local == global
            PyRef local = torch.localTensor(op.obj);
            if (local && THPVariable_Check(local.get())) {
                const at::Tensor& l = THPVariable_Unpack(local.get());
                rec.localShape = writer.intern(shapeText(l.sizes().data(), l.sizes().size()));
            }
        }
    }
    writer.submit(Record{std::move(rec)});
}

MESHSCOPE_HOT void OpRecorder::addOperands(std::vector<OperandRecord>& out, const Operands& ops,
                                           OperandRole role) {
    const Operand* reference = m_op.reference();
    for (const Operand& op : ops) {
        OperandRecord r;
        r.index = op.index;
        r.role = role;
        r.kind = OperandKind::Tensor;
        if (op.dtensor) {
            DTensorFacts facts = &op == reference
                                     ? m_op.referenceFacts()
                                     : m_op.torch().dtensorFacts(op.obj, m_op.writer());
            r.tensor = tensorId(op, &facts);
            r.placements = facts.placements;
        } else {
            r.tensor = tensorId(op, nullptr);
        }
        out.push_back(r);
    }
}

MESHSCOPE_HOT OpSeq OpRecorder::recordOp(int64_t start, int64_t end, const Operands& outputs,
                                         IncidentSeq incident, OpInfo& info) {
    injectedFault("record");
    HookPhases::lap(HookPhase::Outputs);
    Agent& agent = m_op.agent();
    OpRecord rec;
    rec.startNs = start;
    rec.endNs = end;
    rec.thread = Agent::threadIndex();
    rec.name = info.name;
    rec.phase = agent.phase();
    rec.step = agent.step();
    rec.stack = agent.frames().userStack(m_op.writer());
    HookPhases::lap(HookPhase::Stack);
    rec.depth = Agent::threadDepth();
    rec.incident = incident;
    rec.operands = RankWriter::operandList();  // a written record's, reused
    rec.operands.reserve(m_op.inputs().size() + outputs.size());
    addOperands(rec.operands, m_op.inputs(), OperandRole::Input);
    addOperands(rec.operands, outputs, OperandRole::Output);
    HookPhases::lap(HookPhase::Operands);
    OpSeq seq = m_op.writer().submit(std::move(rec));
    HookPhases::lap(HookPhase::Submit);
    return seq;
}

MESHSCOPE_HOT void OpRecorder::recordRan(OpFrame& frame, int64_t start, int64_t end,
                                         const Operands& outputs) {
    Agent& agent = m_op.agent();
    agent.counters().ops.fetch_add(1, std::memory_order_relaxed);
    PendingError pending;  // the op's own exception survives our bookkeeping
    try {
        frame.recorded(recordOp(start, end, outputs, IncidentSeq{}, m_op.info()));
    } catch (const std::exception& e) {
        agent.ownError("record", std::string("could not record an op: ") + e.what());
    }
}

}  // namespace meshscope::capture
