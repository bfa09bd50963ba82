#pragma once

// The agent's hook into torch's dispatch, in two forms:
//
// - The dispatcher hook (default): a boxed C++ fallback on the dispatcher's
//   spare mode key (TESTING_ONLY_GenericMode, which nothing in torch
//   registers), included in the attaching thread's dispatch; autograd carries
//   it into backward. It runs above autograd and above every Python mode and
//   subclass, so it sees each op as the user called it, before DTensor's
//   mixed-tensor check fires. The ops a step calls most (unboxed_ops.h)
//   have unboxed kernels of the hook's own on that key, which do the same
//   work without making IValues of their arguments. A DTensor op is timed
//   and recorded in C++, taking the GIL only to read placements; a plain op
//   costs a scan of its arguments. A mixed op is handed, as Python objects,
//   to the same handler the mode uses (OpHandler, op_handler.h). The key is
//   excluded while the op runs below, so DTensor's inner ops (local compute,
//   collectives) and composite ops' decompositions never come back here.
//   Promotions happen above autograd, so backward receives the promoted
//   DTensors themselves. dispatch_hook.cpp holds the hook's common way, its
//   kernels and switches; hook_paths.cpp the ways off it (a mixed op, a
//   retry, a failure, a c10d call, the calls inside a functional collective).
// - The TorchDispatchMode (fallback where the key is taken; MESHSCOPE_HOOK=mode):
//   its __torch_dispatch__ is this file's C++ function, so per-op work costs
//   no Python frame, but torch's mode machinery costs a Python round trip per
//   op. It runs below autograd: backward receives the plain tensors autograd
//   saved, which the promotion cache maps to forward's promotions.
//
// For an incident either form classifies the plain operand, applies the
// policy and either lets PyTorch raise (with a note), raises an enriched
// error, or re-calls the op with promoted operands.

#include <Python.h>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <string>

#include "capture/agent/collectives/collective_tracker.h"

namespace meshscope::capture {

class Agent;

// Signature of a METH_FASTCALL function: (func, types, args=(), kwargs=None).
PyObject* torchDispatch(PyObject* self, PyObject* const* argv, Py_ssize_t argc);

// The dispatcher hook (the default): a boxed C++ fallback on a dispatch key
// above autograd, so an op costs no Python round trip unless it is mixed.
// Registers the fallback once per process; false (reason in `why`) when the
// key is already claimed, and attach() falls back to the TorchDispatchMode.
bool installDispatcherHook(std::string& why);
// Includes (or excludes) the hook's key in the calling thread's dispatch.
void enableDispatcherHook(bool on);
bool dispatcherHookEnabled();
// Whether an op dispatched on this thread now reaches the hook (enabled, and
// not inside an op the hook already runs).
bool dispatcherHookSeesOps();

// While alive on this thread, a functional collective meshscope follows
// (`id`) hands its work and result to the CollectiveTracker as soon as its
// `_c10d_functional` op returned: the hook sees that op and the c10d call
// inside it although they run inside DTensor's dispatch, where the hook is
// otherwise excluded (nothing is recorded as an op). Does nothing where the
// hook is not included on this thread (other threads, the mode).
class WorkCapture {
  public:
    WorkCapture(Agent* agent, CollectiveTracker::Id id, uint64_t own);
    ~WorkCapture();
    WorkCapture(const WorkCapture&) = delete;
    WorkCapture& operator=(const WorkCapture&) = delete;
    // The tracker got the work and result (else the caller hands over what
    // it has once the call returned).
    bool handedOver() const { return m_handedOver; }

    // The dispatcher hook's part (while this capture is active on its thread).
    void work(c10::intrusive_ptr<c10d::Work> work, bool completesOnWait) {
        m_work = std::move(work);
        m_completesOnWait = completesOnWait;
    }
    void result(const at::Tensor& result);

  private:
    Agent* m_agent = nullptr;
    CollectiveTracker::Id m_id;
    uint64_t m_own = 0;
    c10::intrusive_ptr<c10d::Work> m_work;
    bool m_completesOnWait = false;
    bool m_handedOver = false;
    bool m_active = false, m_wasExcluded = false;
    WorkCapture* m_previous = nullptr;
};

}  // namespace meshscope::capture
