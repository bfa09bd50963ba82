#pragma once

// OpRecorder: the agent's tracker of ops and tensors. Turns an OpContext into
// records (the op with its operands, each tensor once or once per
// description) and keeps plain tensors' provenance: factory ops tag the
// tensors they create by phase, and other plain ops pass their inputs'
// provenance to their outputs. Used by both hooks, the incident resolver
// (incidents.h) and the failure recorder (failures.h). Requires the GIL.
// Internal to the agent.

#include <string>
#include <vector>

#include "capture/agent/ops/op_context.h"

namespace meshscope::capture {

class OpRecorder {
  public:
    explicit OpRecorder(OpContext& op) : m_op(op) {}

    // Phases whose factory ops tag the tensors they create (B, E, D).
    // Where new plain tensors get a birth record: everywhere but backward
    // (autograd's own tensors); outside forward, the optimizer and data
    // loading they are the user's code (origin H).
    // Whether a tensor made now has its birth recorded: everywhere but in
    // backward, where only the user's own Python code counts (a custom
    // autograd Function's backward, a backward hook: the innermost Python
    // frame is the user's), not the autograd engine's ops. Takes the GIL in
    // backward.
    static bool tagsCreations(Agent& agent);

    // The record of a DTensor op that ran under `frame`, from either hook
    // (outputs empty when it raised): counted, recorded and tied to the
    // frame; the op's own pending exception survives it, and the agent's
    // own trouble is reported, never raised.
    void recordRan(OpFrame& frame, int64_t start, int64_t end, const Operands& outputs);
    // The op's record (`info`: the overload that ran, which a reconciled op
    // may have changed), tied to `incident` when it is one. Throws on the
    // agent's own trouble.
    OpSeq recordOp(int64_t start, int64_t end, const Operands& outputs, IncidentSeq incident,
                   OpInfo& info);
    OpSeq recordOp(int64_t start, int64_t end, PyObject* result, IncidentSeq incident,
                   OpInfo& info) {
        return recordOp(start, end, m_op.scanResult(result), incident, info);
    }
    // Records of `ops` as operands of an op or incident in `role`.
    void addOperands(std::vector<OperandRecord>& out, const Operands& ops, OperandRole role);
    // The operand's TensorId: its own when the tensor table knows it (a
    // provenance) or `identity` asks for one (an incident's plain operand),
    // else the id shared by tensors of the same description.
    TensorId tensorId(const Operand& op, const DTensorFacts* facts, bool identity = false,
                      const std::string& label = {});

    // A plain op that ran: tags the tensors a factory created, or passes
    // provenance from the inputs to `outputs`.
    void afterPlainOp(const Operands& outputs);
    // Whether a plain op needs afterPlainOp at all.
    bool needsProvenance() const;

  private:
    bool tagsFactory() const;
    void tagOutputs(const Operands& outputs, const Provenance& provenance);
    void propagate(const Operands& outputs);
    TensorId describedId(const Operand& op, const DTensorFacts& facts);
    void recordTensor(const Operand& op, const DTensorFacts& facts, TensorId id,
                      const Provenance* provenance, const std::string& label = {});

    OpContext& m_op;
};

}  // namespace meshscope::capture
