#include "capture/agent/classifier.h"

#include <torch/csrc/autograd/python_variable.h>

#include "capture/agent/torch_types.h"

namespace meshscope::capture {
namespace {

PyObject* g_parameterLookup = nullptr;  // strong reference

struct Owner {
    OriginClass origin = OriginClass::Unknown;
    std::string evidence;
    PyRef born;  // the tensor whose birth is this one's (a gradient's parameter), or null
};

// What the adapters' lookup says `obj` is: (origin, evidence[, tensor whose
// birth site it shares]), or origin Unknown.
Owner lookupOwner(PyObject* obj) {
    Owner out;
    if (!g_parameterLookup) return out;
    PyRef result = PyRef::steal(PyObject_CallOneArg(g_parameterLookup, obj));
    Py_ssize_t size = result && PyTuple_Check(result.get()) ? PyTuple_GET_SIZE(result.get()) : 0;
    const char* origin = size >= 2 ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(result.get(), 0)) : nullptr;
    const char* evidence = origin ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(result.get(), 1)) : nullptr;
    if (!origin || !evidence) {
        PyErr_Clear();
        return out;
    }
    out.origin = originFromChar(origin[0]).value_or(OriginClass::Unknown);
    out.evidence = evidence;
    if (size >= 3 && THPVariable_Check(PyTuple_GET_ITEM(result.get(), 2)))
        out.born = PyRef::borrow(PyTuple_GET_ITEM(result.get(), 2));
    return out;
}

}  // namespace

void setParameterLookup(PyObject* callable) {
    Py_XINCREF(callable);
    Py_XDECREF(g_parameterLookup);
    g_parameterLookup = callable;
}

Classification classify(const ClassifyInput& in) {
    Classification out;
    if (in.provenance) out.createdAt = in.provenance->createdAt;

    // A: a module's own parameter or buffer, still a plain tensor; E: an
    // optimizer's state or hyperparameter.
    Owner found = in.plainObj ? lookupOwner(in.plainObj) : Owner{};
    // A view of one (`self.sinks.reshape(...)`, `cache[:, a:b]`): the same
    // class as its base.
    if (found.origin == OriginClass::Unknown && in.plain && in.plain->is_view() && in.plainObj) {
        PyRef base = PyRef::steal(PyObject_GetAttrString(in.plainObj, "_base"));
        PyErr_Clear();
        if (base && base.get() != Py_None) {
            found = lookupOwner(base.get());
            if (found.origin != OriginClass::Unknown)
                found.evidence = "a view of " + found.evidence;
        }
    }
    // a parameter's gradient is born where its parameter was
    if (found.born && in.tensors) {
        const Provenance* born = in.tensors->provenance(THPVariable_Unpack(found.born.get()));
        out.createdAt = born ? born->createdAt : StackId{};
        out.bornAsOwner = true;
    }
    OriginClass ownerClass = found.origin;
    const std::string& owner = found.evidence;
    if (ownerClass == OriginClass::OptimizerState) {
        out.origin = ownerClass;
        out.evidence = owner;
        return out;
    }
    if (ownerClass == OriginClass::UnshardedParam ||
        (in.plainObj && isNnInstance(in.plainObj, "Parameter"))) {
        out.origin = OriginClass::UnshardedParam;
        // the adapters' text says which plan left it out (describe_tensor)
        out.evidence = owner.empty() ? "an nn.Parameter not in the sharding plan (its module was "
                                       "not seen in forward)"
                                     : owner;
        return out;
    }
    // F: weights being loaded or synced.
    if (in.insideLoadStateDict || in.copyIntoDTensor) {
        out.origin = OriginClass::WeightLoading;
        out.evidence = in.insideLoadStateDict
                           ? "inside load_state_dict"
                           : "plain tensor copied into a DTensor by " + std::string(in.opName);
        if (in.provenance) out.evidence += "; the tensor was " + in.provenance->evidence;
        return out;
    }
    // B-E, H: recorded when the tensor was made (or derived from one that
    // was); made by the user's code and used in an optimizer step: E.
    bool userMade = in.provenance && in.provenance->origin == OriginClass::UserCode;
    if (in.provenance && in.provenance->origin != OriginClass::Unknown &&
        !(userMade && in.phase == Phase::Optimizer)) {
        out.origin = in.provenance->origin;
        out.evidence = in.provenance->derived ? "derived from a tensor " + in.provenance->evidence
                                              : in.provenance->evidence;
        if (in.provenance->derived && !in.lastStep.empty())
            out.evidence += "; last step " + std::string(in.lastStep);
        return out;
    }
    if (in.phase == Phase::Optimizer) {
        out.origin = OriginClass::OptimizerState;
        out.evidence = "used inside " +
                       (in.phaseLabel.empty() ? std::string("an optimizer step")
                                              : std::string(in.phaseLabel)) +
                       (userMade ? "; " + in.provenance->evidence
                                 : std::string("; created before meshscope saw it"));
        return out;
    }
    out.origin = OriginClass::Unknown;
    std::string phase = " (phase " + std::string(toString(in.phase)) + ")";
    if (!in.attachedAt.empty() && !in.madeBeforeAttach)
        out.evidence = "no birth recorded: made after meshscope.attach() at " +
                       std::string(in.attachedAt) +
                       " by code whose ops meshscope does not see: another thread than the one "
                       "that attached (meshscope follows that one and autograd), or no op at all "
                       "(torch.frombuffer, a DLPack import, a C++ extension)" +
                       phase;
    else if (!in.attachedAt.empty())
        out.evidence = "no birth recorded: made before meshscope.attach() at " +
                       std::string(in.attachedAt) +
                       " (attach before the model and data are built, or run the script under "
                       "`meshscope record`, which attaches as the interpreter starts, to see "
                       "where it was made)" +
                       phase;
    else
        out.evidence =
            "no birth recorded: made by code that dispatches no op meshscope sees "
            "(torch.frombuffer, a DLPack import, a C++ extension) or while the "
            "interpreter started, before meshscope attached" +
            phase;
    return out;
}

}  // namespace meshscope::capture
