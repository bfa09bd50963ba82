#pragma once

// The C++ ends of the Python adapters' per-call work (capture/python/
// meshscope/_adapters.py): the root module call, optimizer steps and the
// functional collectives. Raw fastcall functions, one call each where the
// adapter used to make several pybind11 calls and walk its arguments in
// Python: these run every step, and the interpreter's work between the
// training's own calls is what a wrapper costs.

#include <Python.h>

#include <string>

#include "core/store/records.h"

namespace meshscope::capture {

class Agent;

// A raw C function as a PyMethodDef's entry (fastcall signatures).
template <auto F>
PyCFunction fastcall() {
    return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(F));
}
struct Provenance;

// A provenance created at the current user frame (optionally naming it in
// the evidence).
Provenance atUserFrame(Agent& agent, OriginClass origin, std::string evidence, bool withLocation);

// enter_forward, leave_phase, enter_phase, tag_inputs, stripping,
// failure_guard (documented in adapter_calls.cpp), terminated by a null
// entry.
PyMethodDef* adapterMethods();

}  // namespace meshscope::capture
