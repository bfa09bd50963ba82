#include "capture/agent/interop/tracing.h"

#include <torch/csrc/autograd/python_variable.h>

#include "capture/agent/interop/python_callbacks.h"
#include "core/store/rank_writer.h"

namespace meshscope::capture {

std::optional<TracedFrames> tracedFrames(RankWriter& writer) {
    PyObject* userStack = callback(Callback::TracedUserStack);
    PyRef stack = PyRef::steal(userStack ? PyObject_CallNoArgs(userStack) : nullptr);
    if (!stack || !PyList_Check(stack.get())) {
        PyErr_Clear();
        return std::nullopt;
    }
    TracedFrames out;
    for (Py_ssize_t i = PyList_GET_SIZE(stack.get()) - 1; i >= 0; --i) {
        const char* file = nullptr;
        const char* function = nullptr;
        int line = 0;
        if (PyArg_ParseTuple(PyList_GET_ITEM(stack.get(), i), "sis", &file, &line, &function)) {
            if (out.frames.empty()) out.innermostFile = file;
            out.frames.push_back(Frame{writer.intern(file), line, writer.intern(function)});
        }
        PyErr_Clear();
    }
    return out;
}

PyRef realTensorOf(PyObject* fake) {
    PyObject* realTensor = callback(Callback::RealTensor);
    PyRef real = PyRef::steal(realTensor ? PyObject_CallOneArg(realTensor, fake) : nullptr);
    PyErr_Clear();
    return real && THPVariable_Check(real.get()) ? std::move(real) : PyRef{};
}

std::string tracedLocalHolding(PyObject* fake) {
    PyObject* heldAs = callback(Callback::TracedLocal);
    PyRef name = PyRef::steal(heldAs ? PyObject_CallOneArg(heldAs, fake) : nullptr);
    const char* text = name && PyUnicode_Check(name.get()) ? PyUnicode_AsUTF8(name.get()) : nullptr;
    PyErr_Clear();
    return text ? text : "";
}

}  // namespace meshscope::capture
