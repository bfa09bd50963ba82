#include "capture/agent/incidents/promotion.h"

#include <torch/csrc/autograd/python_variable.h>

namespace meshscope::capture {
namespace {

std::string pythonError() {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    std::string text = "unknown error";
    if (value) {
        PyRef str = PyRef::steal(PyObject_Str(value));
        const char* utf8 = str ? PyUnicode_AsUTF8(str.get()) : nullptr;
        if (utf8) text = utf8;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
    PyErr_Clear();
    return text;
}

}  // namespace

Promotion promoteToDTensor(TorchTypes& types, PyObject* plain, Action action,
                           const PromotionTarget& target) {
    Promotion out;
    int ndim = std::max(1, target.meshNdim);
    PyRef placements = PyRef::steal(PyList_New(ndim));
    out.placements = "[";
    for (int i = 0; i < ndim; ++i) {
        PyObject* p = nullptr;
        if (action == Action::ShardedFromLocal && i == target.batchMeshDim) {
            p = PyObject_CallFunction(types.shardType(), "i", target.shardDim);
            out.placements += (i ? ", " : "") + ("Shard(" + std::to_string(target.shardDim) + ")");
        } else {
            p = Py_NewRef(types.replicate());
            out.placements += i ? ", Replicate()" : "Replicate()";
        }
        if (!p) {
            out.error = pythonError();
            return out;
        }
        PyList_SET_ITEM(placements.get(), i, p);
    }
    out.placements += "]";
    PyRef args = PyRef::steal(PyTuple_Pack(3, plain, target.mesh, placements.get()));
    PyRef kwargs = PyRef::steal(Py_BuildValue("{s:O}", "run_check", Py_False));
    out.value = PyRef::steal(PyObject_Call(types.fromLocal(), args.get(), kwargs.get()));
    if (!out.value) out.error = "DTensor.from_local failed: " + pythonError();
    return out;
}

Promotion scalarize(PyObject* plain, bool asList) {
    Promotion out;
    out.value = PyRef::steal(PyObject_CallMethod(plain, asList ? "tolist" : "item", nullptr));
    out.placements = asList ? "Python scalar list" : "Python scalar";
    if (!out.value) out.error = "cannot turn the tensor into Python scalars: " + pythonError();
    return out;
}

PyObject* PromotionCache::find(const at::Tensor& plain) {
    auto it = m_entries.find(plain.unsafeGetTensorImpl());
    if (it == m_entries.end()) return nullptr;
    if (it->second.weak.expired()) {
        m_entries.erase(it);
        return nullptr;
    }
    return it->second.promoted.get();
}

void PromotionCache::insert(const at::Tensor& plain, PyObject* promoted, bool sharded) {
    std::erase_if(m_entries, [](const auto& kv) { return kv.second.weak.expired(); });
    m_entries.insert_or_assign(
        plain.unsafeGetTensorImpl(),
        Entry{c10::weak_intrusive_ptr<c10::TensorImpl>(plain.getIntrusivePtr()),
              PyRef::borrow(promoted)});
    if (!sharded || !THPVariable_Check(promoted)) return;
    std::erase_if(m_sharded, [](const auto& kv) { return kv.second.expired(); });
    const at::Tensor& dtensor = THPVariable_Unpack(promoted);
    m_sharded.insert_or_assign(dtensor.unsafeGetTensorImpl(),
                               c10::weak_intrusive_ptr<c10::TensorImpl>(dtensor.getIntrusivePtr()));
    m_anySharded.store(true, std::memory_order_relaxed);
}

bool PromotionCache::isShardedPromotion(const at::Tensor& dtensor) const {
    auto it = m_sharded.find(dtensor.unsafeGetTensorImpl());
    return it != m_sharded.end() && !it->second.expired();
}

PyRef redistributeReplicated(TorchTypes& types, PyObject* dtensor, PyObject* mesh, int meshNdim) {
    PyRef placements = PyRef::steal(PyList_New(std::max(1, meshNdim)));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(placements.get()); ++i)
        PyList_SET_ITEM(placements.get(), i, Py_NewRef(types.replicate()));
    return PyRef::steal(PyObject_CallMethod(dtensor, "redistribute", "OO", mesh, placements.get()));
}

PyRef scalarOverload(PyObject* overload, bool asList) {
    PyRef packet = PyRef::steal(PyObject_GetAttrString(overload, "overloadpacket"));
    PyRef name = PyRef::steal(PyObject_GetAttrString(overload, "_overloadname"));
    const char* current = name ? PyUnicode_AsUTF8(name.get()) : nullptr;
    if (!packet || !current) {
        PyErr_Clear();
        return {};
    }
    std::string wanted;
    std::string text = current;
    if (text == "Tensor" || text == "List")
        wanted = asList ? "ScalarList" : "Scalar";
    else if (text == "Tensor_Tensor")
        wanted = "Tensor_Scalar";
    else
        return {};
    PyRef result = PyRef::steal(PyObject_GetAttrString(packet.get(), wanted.c_str()));
    if (!result) PyErr_Clear();
    return result;
}

}  // namespace meshscope::capture
