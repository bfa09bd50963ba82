#include "capture/agent/hooks/hook_paths.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture/agent/collectives/c10d_calls.h"
#include "capture/agent/hooks/dispatch_hook.h"
#include "capture/agent/incidents/failures.h"
#include "capture/agent/incidents/incidents.h"
#include "capture/agent/ops/arg_editor.h"
#include "capture/agent/ops/op_handler.h"
#include "capture/agent/ops/op_recorder.h"
#include "core/analysis/fix_suggestion.h"

namespace meshscope::capture {

HookOp* addHookOp(Agent& agent, const c10::OperatorHandle& op) {
    GilHold gil;
    if (Agent::current() != &agent) return nullptr;
    try {
        return &agent.torch().addHookOp(op, agent.writer());
    } catch (const std::exception& e) {
        agent.ownError("dispatch", std::string("meshscope: dispatch hook error: ") + e.what());
        return nullptr;
    }
}

namespace {

// Pushes an op's Python result onto the boxed stack as its schema's returns.
void pushResult(const c10::FunctionSchema& schema, PyObject* result, torch::jit::Stack& stack) {
    const auto& returns = schema.returns();
    if (returns.size() == 1) {
        stack.push_back(torch::jit::toIValue(result, returns[0].type()));
        return;
    }
    for (size_t i = 0; i < returns.size(); ++i)
        stack.push_back(torch::jit::toIValue(PyTuple_GET_ITEM(result, i), returns[i].type()));
}

// The op's boxed arguments as Python (args, kwargs), as torch hands them to
// a TorchDispatchMode.
struct PythonArgs {
    PyRef args, kwargs;
};
PythonArgs pythonArgs(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> values) {
    PyRef positional = PyRef::steal(PyList_New(0));
    PyRef kwargs = PyRef::steal(PyDict_New());
    for (size_t i = 0; i < values.size(); ++i) {
        PyRef value = PyRef::steal(torch::jit::toPyObject(values[i]).release().ptr());
        const c10::Argument& arg = schema.arguments()[i];
        if (arg.kwarg_only())
            PyDict_SetItemString(kwargs.get(), arg.name().c_str(), value.get());
        else
            PyList_Append(positional.get(), value.get());
    }
    return PythonArgs{PyRef::steal(PyList_AsTuple(positional.get())), std::move(kwargs)};
}

// The Python exception behind a C++ exception from Python code (DTensor's
// dispatch is Python): pybind11's error_already_set or torch's
// python_error; null for a C++ error. Requires the GIL.
PyObject* pythonException(const std::exception& e) {
    if (const auto* p = dynamic_cast<const pybind11::error_already_set*>(&e))
        return p->value().ptr();
    if (const auto* p = dynamic_cast<const python_error*>(&e)) return p->value;
    return nullptr;
}

// Takes the work a c10d op returned from the stack (a Work, or one inside
// the tuple some ops return).
c10::intrusive_ptr<c10d::Work> workOnStack(const torch::jit::Stack& stack) {
    if (stack.empty()) return {};
    const c10::IValue& top = stack.back();
    if (top.isCustomClass()) return top.toCustomClass<c10d::Work>();
    if (top.isTuple())
        for (const c10::IValue& v : top.toTupleRef().elements())
            if (v.isCustomClass()) return v.toCustomClass<c10d::Work>();
    return {};
}

}  // namespace

// A mixed op: hand it to the Python-object path (classification, policy,
// promotion through DTensor.from_local) as torch would hand it to a
// TorchDispatchMode, and put its result back on the stack.
void mixedOp(Agent& agent, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    pybind11::gil_scoped_acquire gil;
    c10::impl::ExcludeDispatchKeyGuard guard(kHookKey);
    const c10::FunctionSchema& schema = op.schema();
    size_t nargs = schema.arguments().size();
    std::vector<c10::IValue> args(stack->end() - nargs, stack->end());  // to run it as is
    std::optional<PythonArgs> call;
    try {
        call = pythonArgs(schema, args);
    } catch (const std::exception& e) {
        agent.ownError("dispatch", std::string("meshscope: dispatch hook error: ") + e.what());
    }
    torch::jit::drop(*stack, nargs);
    bool runAsIs = !call;  // the agent's own trouble before the op ran
    PyRef result;
    if (call) {
        PyObject* func = torch::detail::getTorchApiFunction(op).ptr();
        result = PyRef::steal(
            OpHandler(agent, func, call->args.get(), call->kwargs.get()).handle(runAsIs));
    }
    if (runAsIs) {  // as without meshscope: DTensor's own mixed-tensor error
        PyErr_Clear();
        stack->insert(stack->end(), args.begin(), args.end());
        return op.callBoxed(stack);
    }
    if (!result) throw pybind11::error_already_set();
    pushResult(schema, result.get(), *stack);
}

// Retries an op that raised once when a promotion meshscope laid out as
// Shard() is among its operands: DTensor has no correct strategy for some
// ops with such operands (index_put in the backward of an index lookup whose
// indices were promoted). The same global tensors laid out as Replicate()
// are always valid, so every DTensor operand except an in-place destination
// is redistributed and the op runs again through DTensor's own dispatch.
// Leaves the outputs on `stack` and returns true on success; false (the
// first error stands) otherwise.
bool retryReplicated(Agent& agent, const c10::OperatorHandle& op, const Operands& inputs,
                     c10::ArrayRef<c10::IValue> args, torch::jit::Stack& stack, size_t base,
                     const std::exception& first) {
    pybind11::gil_scoped_acquire gil;
    if (Agent::current() != &agent) return false;
    c10::impl::ExcludeDispatchKeyGuard guard(kHookKey);
    bool promoted = false;
    for (const Operand& o : inputs)
        promoted = promoted || (o.dtensor && agent.promotions().isShardedPromotion(o.tensor()));
    if (!promoted) return false;
    const c10::FunctionSchema& schema = op.schema();
    PyRef result;
    std::string name;
    try {
        PythonArgs call = pythonArgs(schema, args);
        PyObject* func = torch::detail::getTorchApiFunction(op).ptr();
        OpContext retry(agent, func, call.args.get(), call.kwargs.get());
        name = retry.info().text;
        ArgEditor editor(call.args.get(), call.kwargs.get());
        if (replicateDTensorOperands(retry, editor))
            result = PyRef::steal(retry.call(func, editor.args.get(), editor.kwargs.get()));
    } catch (const std::exception& e) {  // the first error stands
        agent.ownError("dispatch", std::string("meshscope: retry: ") + e.what());
    }
    if (!result) {
        PyErr_Clear();
        return false;
    }
    // A failed boxed call leaves its arguments on the stack, or some of them.
    stack.resize(std::min(stack.size(), base));
    pushResult(schema, result.get(), stack);
    agent.warnOnce("retry", "meshscope: " + name +
                                " rejected an operand meshscope had promoted with Shard() (" +
                                std::string(first.what()).substr(0, 120) +
                                "); retried with its operands redistributed to Replicate()");
    return true;
}

// Records the error an op raised (its DTensor dispatch, or a c10d call:
// `collective`, the collective it was) as an incident and adds meshscope's
// note to the exception, unless a hook nearer the error recorded it already;
// KeyboardInterrupt and SystemExit are not failures. A collective error is
// the tracker's: the collective the op was, or the one this thread still
// waits in.
void recordOpFailure(Agent& agent, const c10::OperatorHandle& op, const Operands& inputs,
                     const std::exception& e, CollectiveTracker::Id collective,
                     c10::ArrayRef<c10::IValue> args) {
    GilHold gil;
    if (Agent::current() != &agent) return;
    PendingError saved;
    try {
        // under a Python dispatch mode the error reaches here as torch's
        // python_error before it is persisted: still Python's pending one
        PyObject* value = pythonException(e);
        if (!value) value = saved.normalizedValue();
        if (alreadyRecorded(value)) return;
        std::string error = value ? exceptionText(value) : std::string(e.what());
        std::optional<IncidentKind> kind = classifyFailure(error);
        if (!kind) {  // KeyboardInterrupt, SystemExit: the collective's end, not a failure
            agent.tracker().ended(collective, error);
            return;
        }
        std::string note;
        if (collective || kind == IncidentKind::CollectiveError) {
            if (!collective)
                if (auto latest = agent.tracker().latestOnThisThread()) collective = latest->seq;
            note = agent.tracker().failed(collective, error, op.schema().name());
        } else {
            HookOp* known = hookOp(agent, op);
            if (!known) return;
            OpContext failed(agent, known->info, inputs);
            note = recordFailureIncident(failed, *kind, error, argumentsText(op.schema(), args));
        }
        markRecorded(value, note);
    } catch (const std::exception& own) {
        agent.ownError("record", std::string("could not record a failure: ") + own.what());
    }
}

// A c10d collective the program called itself (dist.all_reduce, broadcast,
// barrier, send, ...; c10d_calls.h): followed by the tracker from issue to
// completion (its work says when) and recorded as an op with the user's call
// site. What NCCL runs under it adds its GPU time to that record through the
// plugin. A call that raises is recorded as failed and raises as without
// meshscope.
void c10dCollective(Agent& agent, const c10::OperatorHandle& op, HookOp& known,
                    c10::DispatchKeySet ks, torch::jit::Stack* stack, Operands inputs) {
    const c10::FunctionSchema& schema = op.schema();
    C10dFacts facts = c10dFacts(schema, torch::jit::last(*stack, schema.arguments().size()));
    RankWriter& writer = agent.writer();
    int64_t start = writer.nowNs();
    OpFrame frame(agent, Operands{});  // no GPU timing of its own: the plugin's
    CollectiveTracker::Id id;
    {
        GilHold gil;  // the user frame; released before the call, which may block
        PendingError pending;
        try {
            if (Agent::current() == &agent)
                id = agent.tracker().issue(
                    {std::string(facts.kind), facts.group, facts.bytes, start}, frame.enclosing());
        } catch (const std::exception& e) {
            agent.ownError("record", std::string("could not follow a collective: ") + e.what());
        }
    }
    try {
        redispatch(op, ks, stack);
    } catch (const std::exception& e) {
        frame.ran();
        recordOpFailure(agent, op, inputs, e, id);
        throw;
    }
    frame.ran();
    int64_t end = writer.nowNs();
    // no work: a synchronous NCCL collective, enqueued on the current stream
    c10::intrusive_ptr<c10d::Work> work = workOnStack(*stack);
    std::shared_ptr<c10::Event> streamDone =
        work || !id ? nullptr : CollectiveTracker::streamMark(facts.device);
    GilHold gil;
    if (Agent::current() != &agent) return;
    PendingError pending;
    OpSeq seq;
    try {
        OpContext call(agent, known.info, inputs);
        seq = OpRecorder(call).recordOp(start, end, Operands{}, IncidentSeq{}, call.info());
    } catch (const std::exception& e) {
        agent.ownError("record", std::string("could not record a c10d collective: ") + e.what());
    }
    try {  // followed on even when its op record failed: it returned
        // a gloo collective is waited for after this call, in Work.wait()
        agent.tracker().issued(id, std::move(work), facts.completesOnWait, at::Tensor(), seq,
                               frame.token(), std::move(streamDone));
    } catch (const std::exception& e) {
        agent.ownError("record", std::string("could not follow a collective: ") + e.what());
    }
}

// Inside a functional collective's call (WorkCapture): its `_c10d_functional`
// op runs with the hook's key still included, so the c10d call inside comes
// back here; that call's work and the op's result go to the tracker.
void captureFallback(WorkCapture& capture, const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack* stack) {
    const c10::FunctionSchema& schema = op.schema();
    if (isC10dOp(schema)) {
        bool onWait = completesOnWait(schema, torch::jit::last(*stack, schema.arguments().size()));
        redispatch(op, ks, stack);
        if (c10::intrusive_ptr<c10d::Work> work = workOnStack(*stack)) capture.work(work, onWait);
        return;
    }
    if (!schema.name().starts_with("_c10d_functional")) return redispatch(op, ks, stack);
    op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kHookKey), stack);
    const auto& returns = schema.returns();
    for (size_t i = 0; i < returns.size() && i < stack->size(); ++i) {
        const c10::IValue& v = (*stack)[stack->size() - returns.size() + i];
        if (v.isTensor()) return capture.result(v.toTensor());
        if (v.isTensorList() && !v.toTensorList().empty())
            return capture.result(v.toTensorList().get(0));
    }
}

}  // namespace meshscope::capture
