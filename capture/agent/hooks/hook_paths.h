#pragma once

// What the dispatcher hook's translation units share (dispatch_hook.cpp: the
// hook's common way, its kernels and switches; hook_paths.cpp: the ways off
// it): the hook's key, the GIL hold, an operator's facts, the redispatch
// below the key, and the paths a mixed op, a retry, a failure, a c10d call
// and the calls inside a functional collective take.

#include <Python.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <exception>

#include "capture/agent/agent.h"
#include "capture/agent/collectives/collective_tracker.h"
#include "capture/agent/ops/op_context.h"
#include "core/util/hot_path.h"

namespace meshscope::capture {

class WorkCapture;

// The dispatcher's spare mode key. Nothing in torch registers a kernel for
// it; meshscope registers a boxed fallback and includes the key in the
// attaching thread's dispatch (autograd carries it into backward).
constexpr c10::DispatchKey kHookKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

// Holds the GIL where the hook reads Python (the op's Python binding released
// it): around a DTensor op, after a plain op that passes a provenance on.
// PyGILState directly: pybind11's guard looks its internals up on every
// acquisition, a cost paid per op.
class GilHold {
  public:
    GilHold() : m_state(PyGILState_Ensure()) {}
    ~GilHold() { PyGILState_Release(m_state); }
    GilHold(const GilHold&) = delete;
    GilHold& operator=(const GilHold&) = delete;

  private:
    PyGILState_STATE m_state;
};

// The hook's facts of `op` (TorchTypes::hookOp): read from torch's
// operator entry the first time, under the GIL; nullptr when the agent went
// meanwhile or could not read them (the op then runs unseen).
HookOp* addHookOp(Agent& agent, const c10::OperatorHandle& op);
MESHSCOPE_HOT inline HookOp* hookOp(Agent& agent, const c10::OperatorHandle& op) {
    if (HookOp* known = agent.torch().hookOp(op)) [[likely]]
        return known;
    return addHookOp(agent, op);
}

// Runs the op below the hook. The key is excluded meanwhile, so the ops
// DTensor's dispatch runs inside (local compute, redistributions) and the
// decompositions of composite ops never come back here.
MESHSCOPE_HOT inline void redispatch(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                     torch::jit::Stack* stack) {
    c10::impl::ExcludeDispatchKeyGuard guard(kHookKey);
    op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kHookKey), stack);
}

// A mixed op: hand it to the Python-object path (classification, policy,
// promotion through DTensor.from_local) as torch would hand it to a
// TorchDispatchMode, and put its result back on the stack.
void mixedOp(Agent& agent, const c10::OperatorHandle& op, torch::jit::Stack* stack);

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
                     const std::exception& first);

// Records the error an op raised (its DTensor dispatch, or a c10d call:
// `collective`, the collective it was) as an incident and adds meshscope's
// note to the exception, unless a hook nearer the error recorded it already;
// KeyboardInterrupt and SystemExit are not failures. A collective error is
// the tracker's: the collective the op was, or the one this thread still
// waits in.
void recordOpFailure(Agent& agent, const c10::OperatorHandle& op, const Operands& inputs,
                     const std::exception& e, CollectiveTracker::Id collective = {},
                     c10::ArrayRef<c10::IValue> args = {});

// A c10d collective the program called itself (dist.all_reduce, broadcast,
// barrier, send, ...; c10d_calls.h): followed by the tracker from issue to
// completion (its work says when) and recorded as an op with the user's call
// site. What NCCL runs under it adds its GPU time to that record through the
// plugin. A call that raises is recorded as failed and raises as without
// meshscope.
void c10dCollective(Agent& agent, const c10::OperatorHandle& op, HookOp& known,
                    c10::DispatchKeySet ks, torch::jit::Stack* stack, Operands inputs);

// Inside a functional collective's call (WorkCapture): its `_c10d_functional`
// op runs with the hook's key still included, so the c10d call inside comes
// back here; that call's work and the op's result go to the tracker.
void captureFallback(WorkCapture& capture, const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack* stack);

}  // namespace meshscope::capture
