#include "capture/agent/ops/op_context.h"

#include <torch/csrc/autograd/python_variable.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/model/settings.h"
#include "core/util/hot_path.h"

namespace meshscope::capture {
namespace {

// The one operand rule of both scans. A DTensor is a Python tensor subclass:
// its tensor carries the Python key, and its object is of DTensor's type.
MESHSCOPE_HOT void addOperand(Operands& out, const at::Tensor& t, PyObject* obj, uint16_t index,
                              int16_t element, PyTypeObject* dtensorType) {
    if (!t.defined()) return;
    bool dtensor = obj && dtensorType && t.key_set().has(c10::DispatchKey::Python) &&
                   PyObject_TypeCheck(obj, dtensorType);
    out.push_back({obj, t, index, element, dtensor, false});
}

}  // namespace

MESHSCOPE_HOT void addTensorOperand(Operands& out, const at::Tensor& t, uint16_t index,
                                    int16_t element, PyTypeObject* dtensorType) {
    PyObject* obj = t.defined() ? t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj() : nullptr;
    addOperand(out, t, obj, index, element, dtensorType);
}

namespace {

MESHSCOPE_HOT void scanIValue(const c10::IValue& v, uint16_t index, Operands& out,
                              PyTypeObject* dtensorType) {
    auto add = [&](const at::Tensor& t, int16_t element) {
        addTensorOperand(out, t, index, element, dtensorType);
    };
    if (v.isTensor()) {
        add(v.toTensor(), -1);
    } else if (v.isTensorList()) {
        c10::List<at::Tensor> list = v.toTensorList();
        for (size_t i = 0; i < list.size(); ++i)
            add(list.get(i), int16_t(i));
    } else if (v.isList()) {
        c10::ArrayRef<c10::IValue> items = v.toListRef();
        for (size_t i = 0; i < items.size(); ++i)
            if (items[i].isTensor()) add(items[i].toTensor(), int16_t(i));
    }
}

// `args` of an op called with none (torch passes an empty tuple or nothing).
PyObject* emptyArgs() {
    static PyObject* empty = PyTuple_New(0);
    return empty;
}

}  // namespace

MESHSCOPE_HOT void OpFrame::prefetchRecord() {
    m_agent.writer().prefetchNextOp();
    if (uint64_t token = m_current.token()) m_agent.collectives().prefetchSlot(token);
}

void scanPythonValue(PyObject* value, uint16_t index, Operands& out, PyTypeObject* dtensorType) {
    if (THPVariable_Check(value)) {
        addOperand(out, THPVariable_Unpack(value), value, index, -1, dtensorType);
        return;
    }
    if (!PyList_Check(value) && !PyTuple_Check(value)) return;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = PySequence_Fast_GET_ITEM(value, i);
        if (THPVariable_Check(item))
            addOperand(out, THPVariable_Unpack(item), item, index, int16_t(i), dtensorType);
    }
}

Operands scanPythonArgs(PyObject* args, PyObject* kwargs, PyTypeObject* dtensorType) {
    Operands out;
    Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
    for (Py_ssize_t i = 0; i < n; ++i)
        scanPythonValue(PyTuple_GET_ITEM(args, i), uint16_t(i), out, dtensorType);
    if (kwargs && PyDict_Check(kwargs)) {
        Py_ssize_t pos = 0, k = 0;
        PyObject *key, *value;
        while (PyDict_Next(kwargs, &pos, &key, &value))
            scanPythonValue(value, uint16_t(n + k++), out, dtensorType);
    }
    return out;
}

MESHSCOPE_HOT Operands scanStack(const torch::jit::Stack& stack, size_t count,
                                 PyTypeObject* dtensorType) {
    Operands out;
    out.reserve(count);
    size_t first = stack.size() - count;
    for (size_t i = 0; i < count; ++i)
        scanIValue(stack[first + i], uint16_t(i), out, dtensorType);
    return out;
}

MESHSCOPE_HOT OpKind markMixed(Operands& operands) {
    bool dtensor = false;
    for (const Operand& o : operands)
        dtensor = dtensor || o.dtensor;
    if (!dtensor) return OpKind::Plain;
    bool mixed = false;
    for (Operand& o : operands)
        if (!o.dtensor && isPlainMixedCandidate(o.tensor())) mixed = o.mixed = true;
    return mixed ? OpKind::Mixed : OpKind::DTensor;
}

void OpOutcome::ran(PyObject* result) {
    m_ran = true;
    m_result = PyRef::borrow(result);
    m_type = PyRef();
    m_value = PyRef();
    m_trace = PyRef();
    if (result) return;
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    m_type = PyRef::borrow(type);
    m_value = PyRef::borrow(value);
    m_trace = PyRef::borrow(trace);
    PyErr_Restore(type, value, trace);
}

PyObject* OpOutcome::replay() {
    PyErr_Clear();
    if (m_result) return PyRef::borrow(m_result.get()).release();
    if (m_type) {
        PyErr_Restore(PyRef::borrow(m_type.get()).release(), PyRef::borrow(m_value.get()).release(),
                      PyRef::borrow(m_trace.get()).release());
    } else {
        PyErr_SetString(PyExc_RuntimeError, "the op returned no result and set no error");
    }
    return nullptr;
}

MESHSCOPE_HOT void injectedFault(std::string_view phase) {
    static const std::string wanted = [] {
        const char* v = std::getenv(setting("fault").env.data());
        return std::string(v ? v : "");
    }();
    if (!wanted.empty() && wanted == phase)
        throw std::runtime_error("injected fault (" + wanted + ")");
}

OpContext::OpContext(Agent& agent, PyObject* func, PyObject* args, PyObject* kwargs)
    : m_agent(agent),
      m_writer(agent.writer()),
      m_torch(agent.torch()),
      m_info(&m_torch.opInfo(func, m_writer)),
      m_func(func),
      m_args(args),
      m_kwargs(kwargs),
      m_ownInputs(scanPythonArgs(args, kwargs, m_torch.dtensorType())),
      m_kind(markMixed(m_ownInputs)) {}

MESHSCOPE_HOT OpContext::OpContext(Agent& agent, OpInfo& info, const Operands& inputs, OpKind kind)
    : m_agent(agent),
      m_writer(agent.writer()),
      m_torch(agent.torch()),
      m_info(&info),
      m_inputs(&inputs),
      m_kind(kind) {}

MESHSCOPE_HOT const Operand* OpContext::reference() {
    if (m_referenceFound) return m_reference;
    m_referenceFound = true;
    for (const Operand& op : *m_inputs)
        if (op.dtensor) {
            m_reference = &op;
            m_refFacts = m_torch.dtensorFacts(op.obj, m_writer);
            break;
        }
    return m_reference;
}

MESHSCOPE_HOT const DTensorFacts& OpContext::referenceFacts() {
    reference();
    return m_refFacts;
}

const Operand* OpContext::firstMixed() const {
    for (const Operand& op : *m_inputs)
        if (op.mixed) return &op;
    return nullptr;
}

PyObject* OpContext::call(PyObject* callable, PyObject* args, PyObject* kwargs) {
    PyObject* result = PyObject_Call(callable, args ? args : emptyArgs(), kwargs);
    m_outcome.ran(result);
    return result;
}

Operands OpContext::scanResult(PyObject* result) const {
    Operands outs;
    if (result) scanPythonValue(result, 0, outs, m_torch.dtensorType());
    return outs;
}

}  // namespace meshscope::capture
