#pragma once

// OpHandler: the agent's handling of one op handed to it by either hook of
// dispatch_hook.h. Scans its tensor operands, records it, and for a mixed op
// classifies the plain operand, applies the policy and raises, or re-calls
// the op with promoted operands. Works on Python objects (the op's
// OpOverload, args, kwargs); the dispatcher hook builds it from its boxed
// stack to record DTensor ops and provenance without Python. Requires the GIL. Internal to the
// agent.

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capture/agent/agent.h"
#include "capture/agent/births.h"
#include "capture/agent/classifier.h"
#include "capture/agent/promotion.h"

namespace meshscope::capture {

// One tensor argument of an op (a direct argument or an element of a list).
struct Operand {
    PyObject* obj = nullptr;  // borrowed: alive as long as the op's args; may be
                              // null for a plain tensor Python never saw
    at::Tensor t;
    uint16_t index = 0;    // argument position; keyword arguments follow positionals
    int16_t element = -1;  // position inside a list argument
    bool dtensor = false;
    bool mixed = false;  // a plain tensor DTensor's dispatch would reject
    const at::Tensor& tensor() const { return t; }
};

// An op's tensor operands. Inline up to a typical op's count: scanning the
// operands of every op allocates nothing.
using Operands = c10::SmallVector<Operand, 6>;

// A plain operand DTensor's dispatch would reject (it replicates one-element
// tensors and wrapped numbers itself).
inline bool isPlainMixedCandidate(const at::Tensor& t) {
    return !t.unsafeGetTensorImpl()->is_wrapped_number() && t.numel() != 1;
}

// The device whose events time an op on the GPU: its first operand off the
// host; none for host ops.
inline std::optional<c10::Device> timedDevice(const Operands& operands) {
    for (const Operand& o : operands)
        if (o.t.defined() && !o.t.device().is_cpu() && !o.t.is_meta()) return o.t.device();
    return std::nullopt;
}

// The frame of an op the agent runs on this thread: its nesting depth (ops
// it calls record one level deeper), and what ties it to its record besides
// host times: the collectives a plugin sees while it runs, and its GPU
// duration (`inputs` on a device; none for an empty list). Open it right
// before the op runs; ran() when the op returned or raised (leaving the
// scope does it too), recorded() once the op has a seq.
class OpFrame {
  public:
    OpFrame(Agent& agent, const Operands& inputs)
        : m_agent(agent), m_gpu(agent.deviceTimes(), timedDevice(inputs)) {
        ++Agent::threadDepth();
    }
    ~OpFrame() { ran(); }
    OpFrame(const OpFrame&) = delete;
    OpFrame& operator=(const OpFrame&) = delete;
    void ran() {
        if (!m_running) return;
        m_running = false;
        m_gpu.end();
        --Agent::threadDepth();
    }
    void recorded(OpSeq seq) {
        m_current.recorded(m_agent.collectives(), seq);
        m_gpu.stop(seq);
    }
    // CurrentOp's tokens (collective_bridge.h), for a collective issued here.
    uint64_t token() const { return m_current.token(); }
    uint64_t enclosing() const { return m_current.enclosing(); }

  private:
    Agent& m_agent;
    CurrentOp m_current;
    DeviceTimer::Span m_gpu;
    bool m_running = true;
};

// Holds the pending Python exception (if any) aside while the agent calls
// Python itself, and restores it on scope exit (whatever the agent's own
// calls left pending is dropped). `normalized`: the exception is an
// instance, which value() then is.
class PendingError {
  public:
    explicit PendingError(bool normalized = false) {
        PyErr_Fetch(&m_type, &m_value, &m_trace);
        if (normalized && m_type) PyErr_NormalizeException(&m_type, &m_value, &m_trace);
    }
    ~PendingError() {
        PyErr_Clear();
        if (m_type) PyErr_Restore(m_type, m_value, m_trace);
    }
    bool active() const { return m_type != nullptr; }
    PyObject* value() const { return m_value; }  // borrowed
    PendingError(const PendingError&) = delete;
    PendingError& operator=(const PendingError&) = delete;

  private:
    PyObject *m_type = nullptr, *m_value = nullptr, *m_trace = nullptr;
};

struct ArgEditor;

// What the op did once an OpHandler ran it: its result, or the exception it
// raised. The error boundary answers with it when the agent's own trouble
// comes after the op ran, so an op never runs twice. Requires the GIL.
class OpOutcome {
  public:
    void ran(PyObject* result);  // right after the call returned
    bool happened() const { return m_ran; }
    // The op's result (a new reference), or nullptr with its exception set.
    PyObject* replay();

  private:
    bool m_ran = false;
    PyRef m_result, m_type, m_value, m_trace;
};

// Tests only: throws when MESHSCOPE_FAULT names `phase` ("before": before
// the op runs; "provenance", "record", "reconcile": after it ran).
void injectedFault(std::string_view phase);

class OpHandler {
  public:
    OpHandler(Agent& agent, PyObject* func, PyObject* args, PyObject* kwargs)
        : m_agent(agent),
          m_writer(agent.writer()),
          m_torch(agent.torch()),
          m_func(func),
          m_args(args),
          m_kwargs(kwargs) {}

    // The dispatcher hook's call: operands scanned from the boxed stack.
    OpHandler(Agent& agent, OpInfo& info, Operands inputs)
        : m_agent(agent),
          m_writer(agent.writer()),
          m_torch(agent.torch()),
          m_func(nullptr),
          m_args(nullptr),
          m_kwargs(nullptr),
          m_info(&info),
          m_inputs(std::move(inputs)) {}

    // The error boundary around run(): the agent's own trouble before the
    // op ran sets `runAsIs` (the caller runs the op as without meshscope);
    // after it ran, the op's own outcome is returned. Either way counted and
    // reported once (Agent::ownError); never raised into the training.
    PyObject* handle(bool& runAsIs);
    PyObject* run();
    // Dispatcher hook: records a DTensor op that has run (outputs empty when
    // it raised).
    OpSeq recordDTensorOp(int64_t start, int64_t end, const Operands& outputs);
    // The record of a DTensor op that ran under `frame`, from either hook
    // (outputs empty when it raised): counted, recorded and tied to the
    // frame; the op's own pending exception survives it, and the agent's
    // own trouble is reported, never raised.
    void recordRan(OpFrame& frame, int64_t start, int64_t end, const Operands& outputs);
    // An error DTensor's dispatch or a DTensor API call raised for this op
    // (no strategy, a placement/shape/mesh error): recorded as an incident of
    // `kind` with the op's operands, call site and stack, and flushed.
    // Returns the note for the exception. (A collective's failure is the
    // CollectiveTracker's.)
    std::string recordFailure(IncidentKind kind, const std::string& error);
    // Dispatcher hook: tags or propagates provenance after a plain op ran.
    void afterPlainOp(const Operands& outputs);
    // Phases whose factory ops tag the tensors they create (B, E, D).
    // Where new plain tensors get a birth record: everywhere but backward
    // (autograd's own tensors); outside forward, the optimizer and data
    // loading they are the user's code (origin H).
    static bool tagsCreations(Phase phase) { return phase != Phase::Backward; }

  private:
    PyObject* call(PyObject* callable, PyObject* args, PyObject* kwargs);
    PyObject* plainOp();
    PyObject* dtensorOp();
    PyObject* incident();
    void tagOutputs(const Operands& outputs, const Provenance& provenance);
    void propagate(const Operands& outputs);
    bool tagsFactory() const;
    Operands scanResult(PyObject* result) const;
    // The operand's TensorId: its own when the tensor table knows it (a
    // provenance) or `identity` asks for one (an incident's plain operand),
    // else the id shared by tensors of the same description.
    TensorId tensorId(const Operand& op, const DTensorFacts* facts, bool identity = false,
                      const std::string& label = {});
    TensorId describedId(const Operand& op, const DTensorFacts& facts);
    void recordTensor(const Operand& op, const DTensorFacts& facts, TensorId id,
                      const Provenance* provenance, const std::string& label = {});
    void addOperands(std::vector<OperandRecord>& out, const Operands& ops, OperandRole role);
    OpSeq recordOp(int64_t start, int64_t end, PyObject* result, IncidentSeq incident,
                   OpInfo& info);
    OpSeq recordOp(int64_t start, int64_t end, const Operands& outputs, IncidentSeq incident,
                   OpInfo& info);
    void findReference();
    std::string incidentText(const IncidentRecord& inc, const Operand& plain,
                             const Classification& c, const UserFrame& frame) const;
    PyObject* raiseIncident(IncidentRecord& inc, const Operand& plain, const Classification& cls,
                            const UserFrame& frame, const PolicyDecision& decision);
    PyObject* observeWithModeBelow(IncidentRecord& inc, const Operand& plain,
                                   const Classification& cls, const UserFrame& frame,
                                   const PolicyDecision& decision, PyObject* below);
    struct Plan {
        const Operand* operand;
        Action action;
        bool asList;  // scalarize to a list of Python scalars
    };
    std::vector<Plan> plan(const Operand& first, const PolicyDecision& decision,
                           const UserFrame& frame, std::string& rule);
    PyObject* reconcile(IncidentRecord& inc, const Operand& first, const UserFrame& frame,
                        PolicyDecision decision, bool byTorch);
    Promotion promote(const Plan& p, const PromotionTarget& target);
    PyObject* substitutePromoted();
    PyObject* retryReplicated(ArgEditor& editor, OpInfo& callInfo,
                              const std::vector<std::pair<const Operand*, PyRef>>& sharded,
                              const PromotionTarget& target, std::string& rule);
    Classification classifyOperand(const Operand& op);
    // While torch.compile traces: the user frames Dynamo is tracing and the
    // real tensor behind the fake plain operand.
    bool traceFacts(const Operand& plain);
    uint64_t fingerprint(const Operand& op) const;
    bool isScalarList(const Operand& op) const;
    PolicyDecision decide(const Operand& op, const Classification& cls,
                          const UserFrame& frame) const;

    Agent& m_agent;
    RankWriter& m_writer;
    TorchTypes& m_torch;
    PyObject* m_func;
    PyObject* m_args;
    PyObject* m_kwargs;
    OpInfo* m_info = nullptr;
    Operands m_inputs;
    const Operand* m_reference = nullptr;  // first DTensor operand
    DTensorFacts m_refFacts;
    std::string m_policyRule;
    std::string m_plainName;  // the user's name for an incident's plain operand
    bool m_traced = false;
    std::vector<Frame> m_tracedFrames;  // innermost first
    std::string m_tracedFile;           // of the innermost
    PyObject* m_fake = nullptr;         // the traced plain operand (borrowed)
    PyRef m_real;                       // the real tensor behind it
    OpOutcome m_outcome;                // of the latest call()
};

// The exception type strict mode raises (meshscope.MixedTensorError).
void setStrictErrorType(PyObject* type);  // borrowed; nullptr: RuntimeError

}  // namespace meshscope::capture
