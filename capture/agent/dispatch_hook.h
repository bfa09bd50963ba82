#pragma once

// The agent's hook into torch's dispatch, in two forms:
//
// - The dispatcher hook (default): a boxed C++ fallback on the dispatcher's
//   spare mode key (TESTING_ONLY_GenericMode, which nothing in torch
//   registers), included in the attaching thread's dispatch; autograd carries
//   it into backward. It runs above autograd and above every Python mode and
//   subclass, so it sees each op as the user called it, before DTensor's
//   mixed-tensor check fires. A DTensor op is timed and recorded in C++,
//   taking the GIL only to read placements; a plain op costs a scan of its
//   arguments. A mixed op is handed, as Python objects, to the same handler
//   the mode uses (OpHandler, op_handler.h). The key is excluded while the
//   op runs below, so DTensor's inner ops (local compute, collectives) and
//   composite ops' decompositions never come back here. Promotions happen
//   above autograd, so backward receives the promoted DTensors themselves.
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

#include <string>

namespace meshscope::capture {

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

}  // namespace meshscope::capture
