#include "capture/agent/classifier.h"

#include <tuple>

#include "capture/agent/torch_types.h"

namespace meshscope::capture {
namespace {

PyObject* g_parameterLookup = nullptr;  // strong reference

// (origin, evidence) from the adapters' lookup, or origin Unknown.
std::pair<OriginClass, std::string> lookupOwner(PyObject* obj) {
    if (!g_parameterLookup) return {OriginClass::Unknown, {}};
    PyRef result = PyRef::steal(PyObject_CallOneArg(g_parameterLookup, obj));
    if (!result || !PyTuple_Check(result.get()) || PyTuple_GET_SIZE(result.get()) != 2) {
        PyErr_Clear();
        return {OriginClass::Unknown, {}};
    }
    const char* origin = PyUnicode_AsUTF8(PyTuple_GET_ITEM(result.get(), 0));
    const char* evidence = origin ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(result.get(), 1)) : nullptr;
    if (!origin || !evidence) {
        PyErr_Clear();
        return {OriginClass::Unknown, {}};
    }
    auto cls = originFromChar(origin[0]);
    return {cls.value_or(OriginClass::Unknown), evidence};
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
    auto [ownerClass, owner] =
        in.plainObj ? lookupOwner(in.plainObj) : std::pair{OriginClass::Unknown, std::string()};
    // A view of one (`self.sinks.reshape(...)`, `cache[:, a:b]`): the same
    // class as its base.
    if (ownerClass == OriginClass::Unknown && in.plain && in.plain->is_view() && in.plainObj) {
        PyRef base = PyRef::steal(PyObject_GetAttrString(in.plainObj, "_base"));
        PyErr_Clear();
        if (base && base.get() != Py_None) {
            std::tie(ownerClass, owner) = lookupOwner(base.get());
            if (ownerClass != OriginClass::Unknown) owner = "a view of " + owner;
        }
    }
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
    if (!in.attachedAt.empty())
        out.evidence = "no birth recorded: made before meshscope.attach() at " +
                       std::string(in.attachedAt) +
                       " (attach before the model and data are built, or run the script under "
                       "`meshscope record`, which attaches as the interpreter starts, to see "
                       "where it was made), or by code that dispatches no op (torch.frombuffer, "
                       "a C++ extension)" +
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
