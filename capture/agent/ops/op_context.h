#pragma once

// OpContext: one intercepted op, built once by whichever hook saw it
// (dispatch_hook.h) and handed to the stages that work on it: the op
// recorder (op_recorder.h), the incident resolver (incidents.h) and the
// failure recorder (failures.h). It holds the op's facts (OpInfo), its
// tensor operands scanned by one rule from either the boxed stack or the
// Python arguments, the op's kind (plain, DTensor, mixed), its first DTensor
// operand and that operand's mesh and placements (read once), and the
// outcome of the op's call. Internal to the agent.

#include <Python.h>

#include <ATen/core/IListRef.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "capture/agent/agent.h"

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

// The operands of an op's Python arguments (as a TorchDispatchMode gets
// them: tensors, and tensors inside list or tuple arguments; keyword
// arguments numbered after the positionals). Requires the GIL.
Operands scanPythonArgs(PyObject* args, PyObject* kwargs, PyTypeObject* dtensorType);
// The operands of one Python value (an op's result) at argument `index`.
void scanPythonValue(PyObject* value, uint16_t index, Operands& out, PyTypeObject* dtensorType);
// The operands of the top `count` values of a boxed stack (an op's arguments
// or returns), by the same rule. Needs no GIL: DTensor-ness is read from the
// tensor's Python object, whose type does not change while the tensor holds it.
Operands scanStack(const torch::jit::Stack& stack, size_t count, PyTypeObject* dtensorType);
// One tensor of an op's unboxed arguments or returns (element: its position
// in a list argument, else -1), by the same rule; an undefined one is none.
void addTensorOperand(Operands& out, const at::Tensor& t, uint16_t index, int16_t element,
                      PyTypeObject* dtensorType);

// The operands of one unboxed argument or result at `index` (a kernel's
// own, not a boxed stack), by scanStack's rule: tensors, optional tensors
// and the tensors of lists and tuples; anything else is none.
inline void scanUnboxed(Operands& out, const at::Tensor& t, uint16_t index, PyTypeObject* type) {
    addTensorOperand(out, t, index, -1, type);
}
inline void scanUnboxed(Operands& out, const std::optional<at::Tensor>& t, uint16_t index,
                        PyTypeObject* type) {
    if (t) addTensorOperand(out, *t, index, -1, type);
}
inline void scanUnboxed(Operands& out, at::TensorList list, uint16_t index, PyTypeObject* type) {
    for (size_t i = 0; i < list.size(); ++i)
        addTensorOperand(out, list[i], index, int16_t(i), type);
}
inline void scanUnboxed(Operands& out, const at::ITensorListRef& list, uint16_t index,
                        PyTypeObject* type) {
    int16_t i = 0;
    for (const at::Tensor& t : list)
        addTensorOperand(out, t, index, i++, type);
}
inline void scanUnboxed(Operands& out, const c10::List<std::optional<at::Tensor>>& list,
                        uint16_t index, PyTypeObject* type) {
    for (size_t i = 0; i < list.size(); ++i)
        if (std::optional<at::Tensor> t = list.get(i))
            addTensorOperand(out, *t, index, int16_t(i), type);
}
inline void scanUnboxed(Operands& out, const std::vector<at::Tensor>& list, uint16_t index,
                        PyTypeObject* type) {
    scanUnboxed(out, at::TensorList(list), index, type);
}
template <class... T>
void scanUnboxed(Operands& out, const std::tuple<T...>& values, uint16_t, PyTypeObject* type) {
    uint16_t i = 0;
    std::apply([&](const auto&... v) { (scanUnboxed(out, v, i++, type), ...); }, values);
}
template <class T>
void scanUnboxed(Operands&, const T&, uint16_t, PyTypeObject*) {}

// A plain operand DTensor's dispatch would reject (it replicates one-element
// tensors and wrapped numbers itself).
inline bool isPlainMixedCandidate(const at::Tensor& t) {
    return !t.unsafeGetTensorImpl()->is_wrapped_number() && t.numel() != 1;
}

// What the agent does with an op: plain ops only feed provenance, DTensor
// ops are recorded, mixed ops are incidents.
enum class OpKind : uint8_t { Plain, DTensor, Mixed };

// The one rule both hooks apply: an op with a DTensor operand is a DTensor
// op, and a mixed one when a plain operand is one DTensor's dispatch would
// reject (marked `mixed`).
OpKind markMixed(Operands& operands);

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
    // Fetches the memory recorded() and the op's record will write (the
    // writer's queue, the collective bridge's slot for this op): call once
    // the op ran, some work before the record is submitted.
    void prefetchRecord();
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
    // The exception instance (normalized on first use), borrowed; null when
    // no error was pending.
    PyObject* normalizedValue() {
        if (m_type) PyErr_NormalizeException(&m_type, &m_value, &m_trace);
        return m_value;
    }
    PendingError(const PendingError&) = delete;
    PendingError& operator=(const PendingError&) = delete;

  private:
    PyObject *m_type = nullptr, *m_value = nullptr, *m_trace = nullptr;
};

// What the op did once the agent called it: its result, or the exception it
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

class OpContext {
  public:
    // The mode hook's op (and a mixed op the dispatcher hook hands over as
    // Python objects): `func` its OpOverload; operands scanned from the
    // Python arguments and the kind marked. Requires the GIL.
    OpContext(Agent& agent, PyObject* func, PyObject* args, PyObject* kwargs);
    // The dispatcher hook's op: operands scanned from its boxed stack (and
    // marked by markMixed when it is a DTensor op); no Python arguments.
    // It borrows the operands, which must outlive it (the caller's own, on
    // its stack: no vector moved an op).
    OpContext(Agent& agent, OpInfo& info, const Operands& inputs, OpKind kind = OpKind::Plain);
    OpContext(const OpContext&) = delete;
    OpContext& operator=(const OpContext&) = delete;

    Agent& agent() const { return m_agent; }
    RankWriter& writer() const { return m_writer; }
    TorchTypes& torch() const { return m_torch; }
    OpInfo& info() const { return *m_info; }
    OpKind kind() const { return m_kind; }
    const Operands& inputs() const { return *m_inputs; }
    // The Python call (null for the dispatcher hook's own ops).
    PyObject* func() const { return m_func; }
    PyObject* args() const { return m_args; }
    PyObject* kwargs() const { return m_kwargs; }

    // The first DTensor operand (null for a plain op) and its mesh and
    // placements, read once. Require the GIL.
    const Operand* reference();
    const DTensorFacts& referenceFacts();
    // The first operand marked mixed (null unless kind() is Mixed).
    const Operand* firstMixed() const;

    // Calls `callable` (the op or an overload of it) and keeps its outcome.
    PyObject* call(PyObject* callable, PyObject* args, PyObject* kwargs);
    // The op as the user called it.
    PyObject* callAsCalled() { return call(m_info->call.get(), m_args, m_kwargs); }
    OpOutcome& outcome() { return m_outcome; }
    // The tensor operands of a Python result.
    Operands scanResult(PyObject* result) const;

  private:
    Agent& m_agent;
    RankWriter& m_writer;
    TorchTypes& m_torch;
    OpInfo* m_info;
    PyObject* m_func = nullptr;
    PyObject* m_args = nullptr;
    PyObject* m_kwargs = nullptr;
    Operands m_ownInputs;                     // the Python hook's, scanned here
    const Operands* m_inputs = &m_ownInputs;  // these or the dispatcher hook's
    OpKind m_kind = OpKind::Plain;
    bool m_referenceFound = false;
    const Operand* m_reference = nullptr;
    DTensorFacts m_refFacts;
    OpOutcome m_outcome;  // of the latest call()
};

}  // namespace meshscope::capture
