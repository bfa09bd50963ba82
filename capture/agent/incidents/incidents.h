#pragma once

// IncidentResolver: the agent's handling of a mixed op (a plain tensor
// meeting a DTensor). Classifies the plain operand (classifier.h), decides
// by the policy, and either raises (DTensor's own error with meshscope's
// note, or strict mode's error) or promotes the plain operands
// (promotion.h, promotion_plan.h), calls the op with them and records the
// incident and the op (op_recorder.h). Also runs a backward op on the
// promotions of the plain tensors autograd saved in forward. Requires the
// GIL. Internal to the agent.

#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "capture/agent/incidents/classifier.h"
#include "capture/agent/incidents/promotion.h"
#include "capture/agent/interop/frames.h"
#include "capture/agent/ops/op_recorder.h"

namespace meshscope::capture {

struct ArgEditor;

class IncidentResolver {
  public:
    explicit IncidentResolver(OpContext& op) : m_op(op), m_recorder(op) {}

    // The incident of a mixed op (its kind is Mixed): its result, or nullptr
    // with the exception set that the training is meant to see.
    PyObject* resolve();
    // In backward, a plain op's inputs that the agent promoted in forward
    // run as those promotions. Returns nullptr with no error set when no
    // input was promoted.
    PyObject* substitutePromoted();

  private:
    struct Plan {
        const Operand* operand;
        Action action;
        bool asList;  // scalarize to a list of Python scalars
    };
    std::string namesForFix(const FrameCache::Holding& held);
    std::string incidentText(const IncidentRecord& inc, const Operand& plain,
                             const Classification& c, const UserFrame& frame);
    PyObject* raiseIncident(IncidentRecord& inc, const Operand& plain, const Classification& cls,
                            const UserFrame& frame, const PolicyDecision& decision);
    PyObject* observeWithModeBelow(IncidentRecord& inc, const Operand& plain,
                                   const Classification& cls, const UserFrame& frame,
                                   const PolicyDecision& decision, PyObject* below);
    std::vector<Plan> plan(const Operand& first, const PolicyDecision& decision,
                           const UserFrame& frame, std::string& rule);
    PyObject* reconcile(IncidentRecord& inc, const Operand& first, const UserFrame& frame,
                        PolicyDecision decision, bool byTorch);
    Promotion promote(const Plan& p, const PromotionTarget& target);
    PyObject* retryReplicated(ArgEditor& editor, OpInfo& callInfo,
                              const std::vector<std::pair<const Operand*, PyRef>>& sharded,
                              const PromotionTarget& target, std::string& rule);
    Classification classifyOperand(const Operand& op);
    // While torch.compile traces: the user frames Dynamo is tracing and the
    // real tensor behind the fake plain operand.
    bool traceFacts(const Operand& plain);
    uint64_t fingerprint(const Operand& op) const;
    bool isScalarList(const Operand& op) const;
    PolicyDecision decide(const Operand& op, const Classification& cls, const UserFrame& frame);

    OpContext& m_op;
    OpRecorder m_recorder;
    std::string m_policyRule;
    std::string m_plainName;  // the user's name for an incident's plain operand
    bool m_traced = false;
    std::vector<Frame> m_tracedFrames;  // innermost first
    std::string m_tracedFile;           // of the innermost
    PyObject* m_fake = nullptr;         // the traced plain operand (borrowed)
    PyRef m_real;                       // the real tensor behind it
};

// DTensor has no correct strategy for some ops with an operand meshscope
// promoted as Shard() (index_put in the backward of an index lookup whose
// indices were promoted); the same global tensors laid out as Replicate()
// are always valid. Replaces, in `editor`, each DTensor operand of `op` but
// an in-place op's destination by its redistribution to Replicate() on its
// own mesh, for one retry. False (a Python error may be set) when one could
// not be.
bool replicateDTensorOperands(OpContext& op, ArgEditor& editor);

// The exception type strict mode raises (meshscope.MixedTensorError).
void setStrictErrorType(PyObject* type);  // borrowed; nullptr: RuntimeError

}  // namespace meshscope::capture
