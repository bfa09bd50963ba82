#pragma once

// An op's Python arguments, copied so that operands can be replaced (a plain
// tensor by its promotion) without touching the caller's. Requires the GIL.

#include <Python.h>

#include "capture/agent/interop/torch_types.h"
#include "capture/agent/ops/op_context.h"

namespace meshscope::capture {

// Replaces value at position `index` (element `element`) of args/kwargs.
struct ArgEditor {
    PyRef args, kwargs;
    Py_ssize_t nargs = 0;

    ArgEditor(PyObject* a, PyObject* kw) {
        nargs = a ? PyTuple_GET_SIZE(a) : 0;
        args = PyRef::steal(PyTuple_New(nargs));
        for (Py_ssize_t i = 0; i < nargs; ++i)
            PyTuple_SET_ITEM(args.get(), i, Py_NewRef(PyTuple_GET_ITEM(a, i)));
        kwargs = PyRef::steal(kw && PyDict_Check(kw) ? PyDict_Copy(kw) : PyDict_New());
    }
    bool replace(const Operand& op, PyObject* value) {
        PyObject* container = nullptr;
        PyObject* key = nullptr;
        if (op.index < nargs) {
            container = PyTuple_GET_ITEM(args.get(), op.index);
        } else {
            Py_ssize_t pos = 0, k = 0;
            PyObject* v;
            while (PyDict_Next(kwargs.get(), &pos, &key, &v))
                if (k++ == op.index - nargs) break;
            container = key ? PyDict_GetItem(kwargs.get(), key) : nullptr;
        }
        if (op.element < 0) return set(op.index, key, Py_NewRef(value));
        PyRef list = PyRef::steal(PySequence_List(container));
        if (!list) return false;
        PyList_SetItem(list.get(), op.element, Py_NewRef(value));
        return set(op.index, key, list.release());
    }
    bool set(uint16_t index, PyObject* key, PyObject* owned) {
        if (index < nargs) {
            PyObject* old = PyTuple_GET_ITEM(args.get(), index);
            PyTuple_SET_ITEM(args.get(), index, owned);
            Py_DECREF(old);
            return true;
        }
        int rc = key ? PyDict_SetItem(kwargs.get(), key, owned) : -1;
        Py_DECREF(owned);
        return rc == 0;
    }
};

}  // namespace meshscope::capture
