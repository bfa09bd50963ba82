#include "capture/agent/hooks/collective_calls.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <string>

#include "capture/agent/agent.h"
#include "capture/agent/hooks/adapter_calls.h"
#include "capture/agent/hooks/dispatch_hook.h"
#include "capture/agent/hooks/hook_phases.h"
#include "capture/agent/incidents/failures.h"
#include "capture/agent/ops/op_context.h"
#include "core/analysis/fix_suggestion.h"

namespace meshscope::capture {
namespace {

using Id = CollectiveTracker::Id;

// The bytes of the tensor (or list of tensors) a collective sends.
int64_t bytesOf(PyObject* tensors) {
    int64_t bytes = 0;
    auto add = [&](PyObject* obj) {
        if (!THPVariable_Check(obj)) return;
        const at::Tensor& t = THPVariable_Unpack(obj);
        bytes += t.numel() * int64_t(t.element_size());
    };
    if (PyList_Check(tensors) || PyTuple_Check(tensors)) {
        PyRef items = PyRef::steal(PySequence_Tuple(tensors));
        for (Py_ssize_t i = 0; items && i < PyTuple_GET_SIZE(items.get()); ++i)
            add(PyTuple_GET_ITEM(items.get(), i));
        PyErr_Clear();
    } else {
        add(tensors);
    }
    return bytes;
}

// The tensor whose wait_tensor waits for a functional collective's result:
// an AsyncCollectiveTensor's `elem`, the tensor itself, or the first of a
// list. Undefined when there is none.
at::Tensor resultOf(PyObject* out) {
    if (PyList_Check(out) || PyTuple_Check(out)) {
        if (PySequence_Size(out) < 1) {
            PyErr_Clear();
            return {};
        }
        PyRef first = PyRef::steal(PySequence_GetItem(out, 0));
        PyErr_Clear();
        return first ? resultOf(first.get()) : at::Tensor();
    }
    if (!THPVariable_Check(out)) return {};
    PyRef elem = PyRef::steal(PyObject_GetAttrString(out, "elem"));
    PyErr_Clear();
    return elem && THPVariable_Check(elem.get()) ? THPVariable_Unpack(elem.get())
                                                 : THPVariable_Unpack(out);
}

// A collective's issue or wait raised `exception`: the tracker records the
// failure (the collective `id`, or `what` when it is not followed) and
// meshscope's note goes on the exception, unless a hook nearer the error
// recorded it. KeyboardInterrupt and SystemExit end the collective without
// an incident. Requires the GIL.
void noteFailure(Agent& agent, Id id, PyObject* exception, std::string_view what) {
    try {
        if (!exception || alreadyRecorded(exception)) return;
        std::string error = exceptionText(exception);
        if (classifyFailure(error))
            markRecorded(exception, agent.tracker().failed(id, error, what));
        else
            agent.tracker().ended(id, error);
    } catch (const std::exception& e) {
        agent.ownError("record", std::string("meshscope: could not record a failure: ") + e.what());
    }
}

// The same for the exception being raised; it stays raised.
void recordFailure(Agent& agent, Id id, std::string_view what) {
    if (!PyErr_Occurred()) return;
    PendingError pending(/*normalized=*/true);
    noteFailure(agent, id, pending.value(), what);
}

// The replacement of a functional collective: `self` is (original, kind,
// position of `group` after the tensor, labeler). Issues the collective to
// the tracker, calls the original with the arguments as given, and hands
// over its work and result (WorkCapture does it from inside the call, before
// anything can wait for it).
PyObject* collectiveCall(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
    HookPhases::Adapter timing(AdapterCall::Collective);
    PyObject* original = PyTuple_GET_ITEM(self, 0);
    Agent* agent = Agent::current();
    PyObject* group = Py_None;
    Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(self, 2)) + 1;
    if (at < nargs) group = args[at];
    for (Py_ssize_t k = 0; kwnames && k < PyTuple_GET_SIZE(kwnames); ++k)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), "group") == 0)
            group = args[nargs + k];
    CurrentOp current;  // the NCCL calls under it, for the plugin
    Id id;
    if (agent) {
        PendingError pending;
        try {
            Py_ssize_t size = 0;  // a str (checked when the wrapper was made), UTF-8 cached
            const char* kind = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(self, 1), &size);
            CollectiveIssue issue;
            issue.kind = kind ? std::string(kind, size_t(size)) : "collective";
            issue.bytes = nargs >= 1 ? bytesOf(args[0]) : 0;
            agent->torch().groupLabel(group, PyTuple_GET_ITEM(self, 3), agent->writer(),
                                      &issue.group);
            id = agent->tracker().issue(std::move(issue), current.enclosing());
        } catch (const std::exception& e) {
            agent->ownError("collective",
                            std::string("meshscope: could not follow a collective: ") + e.what());
        }
    }
    PyObject* out;
    bool handedOver;
    {
        WorkCapture capture(agent, id, current.token());
        timing.pause();
        out = PyObject_Vectorcall(original, args, size_t(nargs), kwnames);
        timing.resume();
        handedOver = capture.handedOver();
    }
    if (!id || Agent::current() != agent) return out;
    if (!out) {
        recordFailure(*agent, id, "collective");
    } else if (!handedOver) {
        PendingError pending;
        try {
            agent->tracker().issued(id, {}, false, resultOf(out), OpSeq{}, current.token());
        } catch (const std::exception& e) {
            agent->ownError("collective",
                            std::string("meshscope: could not follow a collective: ") + e.what());
        }
    }
    return out;
}

PyMethodDef g_collectiveDef = {
    "collective", fastcall<&collectiveCall>(), METH_FASTCALL | METH_KEYWORDS,
    "a functional collective as meshscope wraps it: the original's result, the collective "
    "followed to its completion"};

// collective(original, kind, group_at, labeler) -> the function that
// replaces a functional collective; `group_at` is the position of its
// `group` argument after the tensor, `labeler(group)` names a group (once
// per group: the labels are cached).
PyObject* collectiveWrapper(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc != 4 || !PyCallable_Check(argv[0]) || !PyUnicode_Check(argv[1]) ||
        !PyLong_Check(argv[2]) || !PyCallable_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "collective(original, kind: str, group_at: int, labeler)");
        return nullptr;
    }
    PyRef state = PyRef::steal(PyTuple_Pack(4, argv[0], argv[1], argv[2], argv[3]));
    if (!state) return nullptr;
    return PyCFunction_New(&g_collectiveDef, state.get());
}

// The replacement of funcol.wait_tensor (`self`: the original): what an
// AsyncCollectiveTensor's first use, its wait() and DTensor's synchronous
// redistributions call. The collective whose result it waits for is waiting
// meanwhile (the watchdog names this thread's line), and complete or failed
// once the call returned or raised.
PyObject* waitTensorCall(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
    HookPhases::Adapter timing(AdapterCall::WaitTensor);
    Agent* agent = Agent::current();
    Id id;
    if (agent && nargs >= 1 && THPVariable_Check(args[0])) try {
            id = agent->tracker().waitingForTensor(THPVariable_Unpack(args[0]));
        } catch (const std::exception& e) {
            agent->ownError("collective", std::string("meshscope: wait_tensor: ") + e.what());
        }
    timing.pause();
    PyObject* out = PyObject_Vectorcall(self, args, size_t(nargs), kwnames);
    timing.resume();
    if (!agent || Agent::current() != agent) return out;
    if (!out) {
        recordFailure(*agent, id, "wait_tensor");
    } else if (id) {
        try {
            agent->tracker().waited(id);
        } catch (const std::exception& e) {
            agent->ownError("collective", std::string("meshscope: wait_tensor: ") + e.what());
        }
    }
    return out;
}

PyMethodDef g_waitTensorDef = {
    "wait_tensor", fastcall<&waitTensorCall>(), METH_FASTCALL | METH_KEYWORDS,
    "funcol.wait_tensor as meshscope wraps it: the original's result; the collective it waits "
    "for followed to its completion"};

// wait_tensor(original) -> the replacement of funcol.wait_tensor.
PyObject* waitTensorWrapper(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc != 1 || !PyCallable_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "wait_tensor(original)");
        return nullptr;
    }
    return PyCFunction_New(&g_waitTensorDef, argv[0]);
}

// The c10d Work a Python object holds, or null.
c10d::Work* workOf(PyObject* work) {
    try {
        return pybind11::cast<c10d::Work*>(pybind11::handle(work));
    } catch (const pybind11::cast_error&) {
        return nullptr;
    }
}

// A Python int for an id (0: none), and back.
PyObject* idObject(Id id) {
    return PyLong_FromLongLong(id.value());
}
Id idFrom(PyObject* obj) {
    long long value = PyLong_Check(obj) ? PyLong_AsLongLong(obj) : 0;
    PyErr_Clear();
    return Id{value > 0 ? value : 0};
}

// work_waiting(work) -> token: Work.wait() starts on this thread.
PyObject* workWaiting(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    HookPhases::Adapter timing(AdapterCall::WorkWait);
    Agent* agent = Agent::current();
    if (!agent || argc != 1) return idObject(Id{});
    try {
        return idObject(agent->tracker().waitingForWork(workOf(argv[0])));
    } catch (const std::exception& e) {
        agent->ownError("collective", std::string("meshscope: Work.wait: ") + e.what());
        return idObject(Id{});
    }
}

// work_waited(token): Work.wait() returned.
PyObject* workWaited(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    HookPhases::Adapter timing(AdapterCall::WorkWait, /*counts=*/false);
    Agent* agent = Agent::current();
    if (agent && argc == 1) try {
            agent->tracker().waited(idFrom(argv[0]));
        } catch (const std::exception& e) {
            agent->ownError("collective", std::string("meshscope: Work.wait: ") + e.what());
        }
    Py_RETURN_NONE;
}

// work_failed(token, exception): Work.wait() raised (where gloo's
// "Connection closed by peer" surfaces): the collective the work stands for
// failed; the note goes on `exception`, which the caller raises.
PyObject* workFailed(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    Agent* agent = Agent::current();
    if (!agent || argc != 2) Py_RETURN_NONE;
    PendingError pending;
    noteFailure(*agent, idFrom(argv[0]), argv[1], "Work.wait");
    Py_RETURN_NONE;
}

PyMethodDef g_methods[] = {
    {"collective", fastcall<&collectiveWrapper>(), METH_FASTCALL,
     "collective(original, kind, group_at, labeler) -> the replacement of a functional "
     "collective: calls the original and follows the collective to its completion"},
    {"wait_tensor", fastcall<&waitTensorWrapper>(), METH_FASTCALL,
     "wait_tensor(original) -> the replacement of funcol.wait_tensor"},
    {"work_waiting", fastcall<&workWaiting>(), METH_FASTCALL,
     "work_waiting(work) -> token: Work.wait() starts"},
    {"work_waited", fastcall<&workWaited>(), METH_FASTCALL,
     "work_waited(token): Work.wait() returned"},
    {"work_failed", fastcall<&workFailed>(), METH_FASTCALL,
     "work_failed(token, exception): Work.wait() raised; records the failure and notes it on "
     "the exception"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyMethodDef* collectiveMethods() {
    return g_methods;
}

}  // namespace meshscope::capture
