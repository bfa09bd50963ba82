#pragma once

// The agent's __torch_dispatch__: a TorchDispatchMode whose handler is this
// C++ function, so per-op work costs no Python frame. Runs before DTensor's
// C++ dispatch (modes run before subclasses), sees the plain operand before
// DTensor's mixed-tensor check fires, records the op, and for an incident
// classifies it, applies the policy and either lets PyTorch raise (with a
// note), raises an enriched error, or re-calls the op with promoted operands.
// The mode is popped while its handler runs, so DTensor's own inner ops
// (local compute, collectives) never come back here.

#include <Python.h>

namespace meshscope::capture {

// Signature of a METH_FASTCALL function: (func, types, args=(), kwargs=None).
PyObject* torchDispatch(PyObject* self, PyObject* const* argv, Py_ssize_t argc);

// The exception type strict mode raises (meshscope.MixedTensorError).
void setStrictErrorType(PyObject* type);  // borrowed; nullptr: RuntimeError

}  // namespace meshscope::capture
