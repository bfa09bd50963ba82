#include "capture/agent/hooks/adapter_calls.h"

#include <torch/csrc/autograd/python_variable.h>

#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "capture/agent/agent.h"
#include "capture/agent/hooks/hook_phases.h"
#include "capture/agent/incidents/failures.h"
#include "capture/agent/ops/op_context.h"
#include "core/analysis/fix_suggestion.h"

namespace meshscope::capture {

Provenance atUserFrame(Agent& agent, OriginClass origin, std::string evidence, bool withLocation) {
    UserFrame frame = agent.frames().userFrame(agent.writer());
    Provenance p;
    p.origin = origin;
    p.evidence = std::move(evidence);
    if (withLocation) p.evidence += frame.where();
    p.createdAt = frame.stack;
    return p;
}

namespace {

constexpr int kMaxNesting = 8;  // containers inside containers, as far as inputs go

// `callee` is named in the evidence as called: "passed as input[0] to
// <callee>()"; the text is built only for a tensor that gets the tag.
void tagValue(Agent& agent, PyObject* value, std::string& path, std::string_view callee,
              int nesting) {
    if (THPVariable_Check(value)) {
        if (agent.torch().isDTensor(value)) return;
        const at::Tensor& tensor = THPVariable_Unpack(value);
        const Provenance* known = agent.tensors().provenance(tensor);
        // Made by the user's code and fed to the model: input data, born
        // where the user's code made it.
        if (known && known->origin != OriginClass::UserCode) return;
        Provenance p =
            atUserFrame(agent, OriginClass::InputData,
                        "passed as input" + path + " to " + std::string(callee) + "()", false);
        if (known) {
            p.evidence += "; " + known->evidence;
            p.createdAt = known->createdAt;
        }
        agent.tensors().setProvenance(tensor, std::move(p));
        return;
    }
    if (nesting >= kMaxNesting) return;
    size_t mark = path.size();
    if (PyDict_Check(value)) {
        // A snapshot: a key's __repr__ is Python code and may touch the dict.
        PyRef items = PyRef::steal(PyDict_Items(value));
        for (Py_ssize_t i = 0; items && i < PyList_GET_SIZE(items.get()); ++i) {
            PyObject* pair = PyList_GET_ITEM(items.get(), i);
            PyRef key = PyRef::steal(PyObject_Repr(PyTuple_GET_ITEM(pair, 0)));
            const char* text = key ? PyUnicode_AsUTF8(key.get()) : nullptr;
            PyErr_Clear();
            path += "[" + std::string(text ? text : "?") + "]";
            tagValue(agent, PyTuple_GET_ITEM(pair, 1), path, callee, nesting + 1);
            path.resize(mark);
        }
        PyErr_Clear();
    } else if (PyList_Check(value) || PyTuple_Check(value)) {
        PyRef items = PyRef::steal(PySequence_Tuple(value));
        for (Py_ssize_t i = 0; items && i < PyTuple_GET_SIZE(items.get()); ++i) {
            path += "[" + std::to_string(i) + "]";
            tagValue(agent, PyTuple_GET_ITEM(items.get(), i), path, callee, nesting + 1);
            path.resize(mark);
        }
        PyErr_Clear();
    }
}

// The agent's own trouble never reaches the training: counted, said once.
template <typename Body>
PyObject* guarded(const char* what, Body&& body) {
    Agent* agent = Agent::current();
    if (!agent) Py_RETURN_NONE;
    try {
        return body(*agent);
    } catch (const std::exception& e) {
        PyErr_Clear();
        agent->ownError(what, std::string("meshscope: ") + what + ": " + e.what());
        Py_RETURN_NONE;
    }
}

// Runs body(agent) after a wrapped original returned `out` (a new
// reference, returned as is): the agent's trouble is counted, never raised,
// and the caller's error state is left as it was.
template <typename Body>
PyObject* afterCall(PyObject* out, const char* what, Body&& body) {
    PendingError pending;
    PyRef none = PyRef::steal(guarded(what, [&](Agent& agent) -> PyObject* {
        body(agent);
        Py_RETURN_NONE;
    }));
    return out;
}

// A DTensor API call that raised (`name`: "DTensor.full_tensor"): the error
// recorded as an incident with the call's tensor arguments and meshscope's
// note added to the exception, unless a hook nearer the error recorded it
// already. A collective error is the tracker's: the collective this thread
// still waits in. The exception stays raised.
void recordCallFailure(const std::string& name, PyObject* const* args, Py_ssize_t nargs) {
    Agent* agent = Agent::current();
    if (!agent || !PyErr_Occurred()) return;
    PendingError pending(/*normalized=*/true);
    PyObject* value = pending.value();
    try {
        if (value && !alreadyRecorded(value)) {
            std::string error = exceptionText(value);
            std::optional<IncidentKind> classified = classifyFailure(error);
            // recorded here unless of no known kind or a collective's (the tracker's)
            const IncidentKind kind = classified.value_or(IncidentKind::CollectiveError);
            const bool recordHere = kind != IncidentKind::CollectiveError;
            if (classified == IncidentKind::CollectiveError) {
                std::optional<TrackedCollective> inner = agent->tracker().latestOnThisThread();
                markRecorded(value, agent->tracker().failed(inner ? inner->seq : CollectiveSeq{},
                                                            error, name));
            }
            Operands inputs;
            TorchTypes& types = agent->torch();
            int64_t ndim = -1;
            for (Py_ssize_t i = 0; i < nargs; ++i)
                if (THPVariable_Check(args[i])) {
                    scanPythonValue(args[i], uint16_t(i), inputs, types.dtensorType());
                    if (ndim < 0) ndim = THPVariable_Unpack(args[i]).dim();
                }
            // a Shard(dim) beyond the tensor's dims fails deep inside DTensor
            // with an IndexError that does not say so
            if (kind == IncidentKind::DTensorError && ndim >= 0)
                for (Py_ssize_t i = 0; i < nargs; ++i) {
                    if (THPVariable_Check(args[i])) continue;
                    PyRef repr = PyRef::steal(PyObject_Repr(args[i]));
                    const char* r = repr ? PyUnicode_AsUTF8(repr.get()) : nullptr;
                    PyErr_Clear();
                    for (std::string_view rest = r ? r : ""; !rest.empty();) {
                        size_t at = rest.find("Shard(dim=");
                        if (at == std::string_view::npos) break;
                        rest.remove_prefix(at + 10);
                        int64_t dim = std::atoll(std::string(rest.substr(0, 20)).c_str());
                        if (dim >= ndim || dim < -ndim)
                            error = "Shard(dim=" + std::to_string(dim) + ") names a dim a " +
                                    std::to_string(ndim) + "-d tensor does not have (" + error +
                                    ")";
                    }
                }
            if (recordHere) {
                OpInfo info;
                info.name = agent->writer().intern(name);
                info.text = name;
                OpContext failed(*agent, info, inputs);
                std::string note = recordFailureIncident(failed, kind, error);
                markRecorded(value, note);
            }
        }
    } catch (const std::exception& e) {
        agent->ownError("record",
                        std::string("meshscope: could not record a failure: ") + e.what());
    }
}

// Calls a DTensor-level `original` (`name`: "DTensor.full_tensor") and
// records what it raises as its failure.
PyObject* callRecordingFailure(const char* name, PyObject* original, PyObject* const* args,
                               Py_ssize_t nargs, PyObject* kwnames) {
    PyObject* out = PyObject_Vectorcall(original, args, size_t(nargs), kwnames);
    if (!out) recordCallFailure(name, args, nargs);
    return out;
}

bool phaseFromCode(PyObject* code, Phase& phase) {
    long value = PyLong_Check(code) ? PyLong_AsLong(code) : -1;
    if (value < long(Phase::Other) || value >= long(Phase::End)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "meshscope: not a phase code");
        return false;
    }
    phase = Phase(value);
    return true;
}

bool nameOf(PyObject* text, std::string& out) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8AndSize(text, &size) : nullptr;
    if (!utf8) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "meshscope: expected a str");
        return false;
    }
    out.assign(utf8, size_t(size));
    return true;
}

// enter_forward(module, args) -> previous phase code, or None: the outermost
// module call outside backward and optimizer steps starts a forward phase
// labelled "<Module>.forward" and tags its plain tensor arguments as input
// data. None (nothing changed) inside backward or an optimizer step.
PyObject* enterForward(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc != 2) {
        PyErr_SetString(PyExc_TypeError, "enter_forward(module, args)");
        return nullptr;
    }
    HookPhases::Adapter timing(AdapterCall::Forward);
    return guarded("forward", [&](Agent& agent) -> PyObject* {
        Phase phase = agent.phase();
        if (phase == Phase::Backward || phase == Phase::Optimizer) Py_RETURN_NONE;
        std::string_view type = Py_TYPE(argv[0])->tp_name;  // a heap type's is its __name__
        std::string label = std::string(type.substr(type.rfind('.') + 1)) + ".forward";
        std::string path;
        tagValue(agent, argv[1], path, label, 0);
        return PyLong_FromLong(long(Agent::setThreadPhase(Phase::Forward, std::move(label))));
    });
}

// enter_phase(code, label) -> previous phase code: the calling thread's
// phase while an adapter's span runs (an optimizer step, a DataLoader batch).
PyObject* enterPhase(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    Phase phase;
    std::string label;
    if (argc != 2 || !phaseFromCode(argv[0], phase) || !nameOf(argv[1], label)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "enter_phase(code, label)");
        return nullptr;
    }
    return PyLong_FromLong(long(Agent::setThreadPhase(phase, std::move(label))));
}

// leave_phase(code): back to the phase enter_* returned.
PyObject* leavePhase(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    Phase phase;
    if (argc != 1 || !phaseFromCode(argv[0], phase)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "leave_phase(code)");
        return nullptr;
    }
    Agent::setThreadPhase(phase);
    Py_RETURN_NONE;
}

// tag_inputs(values, callee): tags the plain tensors passed to callee()
// (a torch.compile'd function) as input data, unless their origin is known.
PyObject* tagInputsCall(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    std::string callee;
    if (argc != 2 || !nameOf(argv[1], callee)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "tag_inputs(values, callee)");
        return nullptr;
    }
    return guarded("input provenance", [&](Agent& agent) -> PyObject* {
        std::string path;
        tagValue(agent, argv[0], path, callee, 0);
        Py_RETURN_NONE;
    });
}

// The output of DTensor.to_local() (kind 0) or full_tensor() (kind 1),
// called every forward by tensor-parallel layers: tagged as stripped local
// data (C). The record is kept per user stack and layout: a repeated call
// formats nothing.
void tagStripped(Agent& agent, PyObject* out, PyObject* dtensor, int kind) {
    if (!THPVariable_Check(out) || agent.torch().isDTensor(out)) return;
    RankWriter& writer = agent.writer();
    DTensorFacts facts = agent.torch().dtensorFacts(dtensor, writer);
    TensorTable& tensors = agent.tensors();
    TensorTable::PlaceKey key{agent.frames().userStack(writer), facts.placements, kind};
    TensorTable::ProvenancePtr p = tensors.byPlace(key);
    if (!p) {
        std::string evidence = std::string("output of ") + (kind ? "full_tensor" : "to_local") +
                               "() of a DTensor " + std::string(facts.placementsText);
        p = tensors.intern(
            atUserFrame(agent, OriginClass::StrippedDTensor, std::move(evidence), true));
        tensors.rememberPlace(key, p);
    }
    tensors.setProvenance(THPVariable_Unpack(out), p);
    // After an async redistribution the output is an AsyncCollectiveTensor:
    // ops on it keep its tag, but .wait() hands out the plain tensor inside.
    if (PyRef waited = agent.torch().waitedTensor(out); waited && THPVariable_Check(waited.get()))
        tensors.setProvenance(THPVariable_Unpack(waited.get()), std::move(p));
    if (kind == 0 && isPartial(facts)) {  // each rank's unreduced share, as a plain tensor
        OpInfo info;
        info.name = writer.intern("DTensor.to_local");
        info.text = "DTensor.to_local";
        Operands inputs;
        scanPythonValue(dtensor, 0, inputs, agent.torch().dtensorType());
        OpContext call(agent, info, inputs);
        recordPartialRead(call, facts, "to_local()", std::nullopt);
    }
}

// The replacement of DTensor.to_local / full_tensor: `self` is (original,
// kind); the instance method binding puts the DTensor first in `args`. Calls
// the original with the arguments as given and tags what it returned. No
// Python frame of its own: the call costs what the original does, plus the
// tag.
PyObject* strippedCall(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    HookPhases::Adapter timing(AdapterCall::ToLocal);
    PyObject* original = PyTuple_GET_ITEM(self, 0);
    int kind = PyTuple_GET_ITEM(self, 1) == Py_True ? 1 : 0;
    timing.pause();
    PyObject* out = callRecordingFailure(kind ? "DTensor.full_tensor" : "DTensor.to_local",
                                         original, args, nargs, kwnames);
    timing.resume();
    if (!out || nargs < 1) return out;
    return afterCall(out, "to_local() provenance",
                     [&](Agent& agent) { tagStripped(agent, out, args[0], kind); });
}

PyMethodDef g_strippedDef = {
    "stripped", fastcall<&strippedCall>(), METH_FASTCALL | METH_KEYWORDS,
    "DTensor.to_local()/full_tensor() as meshscope wraps them: the original's result, its "
    "provenance recorded (origin C)"};

// stripping(original, full_tensor: bool) -> the method that replaces
// DTensor.to_local (False) or DTensor.full_tensor (True).
PyObject* strippingCall(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc != 2 || !PyCallable_Check(argv[0]) || !PyBool_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "stripping(original, full_tensor: bool)");
        return nullptr;
    }
    PyRef state = PyRef::steal(PyTuple_Pack(2, argv[0], argv[1]));
    if (!state) return nullptr;
    PyRef function = PyRef::steal(PyCFunction_New(&g_strippedDef, state.get()));
    if (!function) return nullptr;
    return PyInstanceMethod_New(function.get());
}

// The replacement of a DTensor API call that can fail without dispatching
// an op (DTensor.redistribute, distribute_tensor, DTensor.from_local):
// `self` is (original, name). A failure is recorded with the call's tensor
// arguments and raised as before.
PyObject* guardedCall(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    HookPhases::Adapter timing(AdapterCall::Guarded);
    const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(self, 1));
    timing.pause();
    PyObject* out = callRecordingFailure(name ? name : "DTensor call", PyTuple_GET_ITEM(self, 0),
                                         args, nargs, kwnames);
    timing.resume();
    return out;
}

PyMethodDef g_guardedDef = {
    "guarded", fastcall<&guardedCall>(), METH_FASTCALL | METH_KEYWORDS,
    "a DTensor API call as meshscope wraps it: the original's result; a failure recorded as "
    "an incident"};

// failure_guard(original, name, method: bool) -> the replacement of a
// DTensor API call (an instance method when `method`).
PyObject* failureGuard(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc != 3 || !PyCallable_Check(argv[0]) || !PyUnicode_Check(argv[1]) ||
        !PyBool_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "failure_guard(original, name: str, method: bool)");
        return nullptr;
    }
    PyRef state = PyRef::steal(PyTuple_Pack(2, argv[0], argv[1]));
    if (!state) return nullptr;
    PyRef function = PyRef::steal(PyCFunction_New(&g_guardedDef, state.get()));
    if (!function || argv[2] != Py_True) return function.release();
    return PyInstanceMethod_New(function.get());
}

PyMethodDef g_methods[] = {
    {"enter_forward", fastcall<&enterForward>(), METH_FASTCALL,
     "enter_forward(module, args) -> previous phase code, or None inside backward/optimizer: "
     "the root module call starts a forward phase and tags its plain tensor arguments"},
    {"enter_phase", fastcall<&enterPhase>(), METH_FASTCALL,
     "enter_phase(code, label) -> previous phase code"},
    {"leave_phase", fastcall<&leavePhase>(), METH_FASTCALL,
     "leave_phase(code): restores the phase enter_forward/enter_phase returned"},
    {"tag_inputs", fastcall<&tagInputsCall>(), METH_FASTCALL,
     "tag_inputs(values, callee): tags the untagged plain tensors in values as input data (D)"},
    {"stripping", fastcall<&strippingCall>(), METH_FASTCALL,
     "stripping(original, full_tensor: bool) -> the replacement method of DTensor.to_local "
     "(False) or full_tensor (True): calls the original and tags its result (origin C)"},
    {"failure_guard", fastcall<&failureGuard>(), METH_FASTCALL,
     "failure_guard(original, name, method) -> the replacement of a DTensor API call: calls "
     "the original and records a failure as an incident"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyMethodDef* adapterMethods() {
    return g_methods;
}

}  // namespace meshscope::capture
