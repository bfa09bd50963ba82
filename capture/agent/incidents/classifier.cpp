#include "capture/agent/incidents/classifier.h"

#include <torch/csrc/autograd/python_variable.h>

#include "capture/agent/interop/torch_types.h"

namespace meshscope::capture {
namespace {

PyObject* g_parameterLookup = nullptr;  // strong reference

// What `lookup` says `obj` is, and the tensor whose birth site it shares
// (a gradient's parameter), if any.
OwnerFacts lookupOwner(PyObject* lookup, PyObject* obj, PyRef& born) {
    OwnerFacts out;
    if (!lookup) return out;
    PyRef result = PyRef::steal(PyObject_CallOneArg(lookup, obj));
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
        born = PyRef::borrow(PyTuple_GET_ITEM(result.get(), 2));
    return out;
}

}  // namespace

void setParameterLookup(PyObject* callable) {
    Py_XINCREF(callable);
    Py_XDECREF(g_parameterLookup);
    g_parameterLookup = callable;
}

PyObject* parameterLookup() {
    return g_parameterLookup;
}

Classification classify(ClassifyInput in) {
    OriginFacts& facts = in.facts;
    PyRef born;
    if (in.plainObj) facts.owner = lookupOwner(in.ownerLookup, in.plainObj, born);
    // A view of one (`self.sinks.reshape(...)`, `cache[:, a:b]`): the same
    // class as its base.
    if (facts.owner.origin == OriginClass::Unknown && in.plain && in.plain->is_view() &&
        in.plainObj) {
        PyRef base = PyRef::steal(PyObject_GetAttrString(in.plainObj, "_base"));
        PyErr_Clear();
        if (base && base.get() != Py_None) {
            facts.owner = lookupOwner(in.ownerLookup, base.get(), born);
            if (facts.owner.origin != OriginClass::Unknown)
                facts.owner.evidence = "a view of " + facts.owner.evidence;
        }
    }
    if (born && in.tensors) {  // a parameter's gradient is born where its parameter was
        const Provenance* p = in.tensors->provenance(THPVariable_Unpack(born.get()));
        facts.owner.bornElsewhere = true;
        facts.owner.bornAt = p ? p->createdAt : StackId{};
    }
    facts.isParameter = in.plainObj && isNnInstance(in.plainObj, "Parameter");
    return classifyFacts(facts);
}

}  // namespace meshscope::capture
