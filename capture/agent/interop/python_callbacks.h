#pragma once

// What the Python package provides the agent's C++: the functions C++ calls
// back (the Python stacks of all threads, what Dynamo is tracing), handed
// over by name when the package is imported (meshscope._capture.provide),
// instead of C++ looking up private functions of private modules. Requires
// the GIL.

#include <Python.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace meshscope::capture {

enum class Callback : uint8_t {
    ThreadStacks,     // () -> str: every thread's stack, as py-spy dump prints them
    TracedUserStack,  // () -> [(file, line, function)] | None: the frames Dynamo traces
    RealTensor,       // (fake) -> Tensor | None: the real tensor behind a fake one
    TracedLocal,      // (fake) -> str: the traced code's local that holds it
    End,
};
inline constexpr std::array<std::string_view, size_t(Callback::End)> kCallbackNames = {
    "thread_stacks", "traced_user_stack", "real_tensor", "traced_local"};

// The function provided for `which` (borrowed), or null when the package has
// not provided it (then the caller does without).
PyObject* callback(Callback which);

// provide(name, fn): the package hands a callback over (kCallbackNames).
PyMethodDef* callbackMethods();

}  // namespace meshscope::capture
