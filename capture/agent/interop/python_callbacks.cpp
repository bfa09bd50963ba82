#include "capture/agent/interop/python_callbacks.h"

#include <string>

#include "capture/agent/hooks/adapter_calls.h"

namespace meshscope::capture {
namespace {

// Owned references, kept for the process (the functions live as long as
// their modules, which Python never unloads).
std::array<PyObject*, size_t(Callback::End)> g_callbacks{};

PyObject* provide(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc != 2 || !PyUnicode_Check(argv[0]) || !PyCallable_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "provide(name: str, function)");
        return nullptr;
    }
    const char* name = PyUnicode_AsUTF8(argv[0]);
    if (!name) return nullptr;
    for (size_t i = 0; i < kCallbackNames.size(); ++i)
        if (kCallbackNames[i] == name) {
            Py_XSETREF(g_callbacks[i], Py_NewRef(argv[1]));
            Py_RETURN_NONE;
        }
    std::string known;
    for (std::string_view n : kCallbackNames)
        known += (known.empty() ? "" : ", ") + std::string(n);
    PyErr_Format(PyExc_ValueError, "meshscope: no callback named '%s' (known: %s)", name,
                 known.c_str());
    return nullptr;
}

PyMethodDef g_methods[] = {
    {"provide", fastcall<&provide>(), METH_FASTCALL,
     "provide(name, function): hands the agent a function its C++ calls back "
     "(thread_stacks, traced_user_stack, real_tensor, traced_local)"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyObject* callback(Callback which) {
    return size_t(which) < g_callbacks.size() ? g_callbacks[size_t(which)] : nullptr;
}

PyMethodDef* callbackMethods() {
    return g_methods;
}

}  // namespace meshscope::capture
