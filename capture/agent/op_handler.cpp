#include "capture/agent/op_handler.h"

#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "capture/agent/arg_editor.h"
#include "capture/agent/fingerprint.h"
#include "capture/agent/tracing.h"
#include "core/model/settings.h"

namespace meshscope::capture {
namespace {

// `args` of an op called with none (torch passes an empty tuple or nothing).
PyObject* emptyArgs() {
    static PyObject* empty = PyTuple_New(0);
    return empty;
}

void scanValue(PyObject* value, uint16_t index, Operands& out, const TorchTypes& types) {
    if (THPVariable_Check(value)) {
        out.push_back({value, THPVariable_Unpack(value), index, -1, types.isDTensor(value), false});
        return;
    }
    if (!PyList_Check(value) && !PyTuple_Check(value)) return;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = PySequence_Fast_GET_ITEM(value, i);
        if (THPVariable_Check(item))
            out.push_back(
                {item, THPVariable_Unpack(item), index, int16_t(i), types.isDTensor(item), false});
    }
}

Operands scanArgs(PyObject* args, PyObject* kwargs, const TorchTypes& types) {
    Operands out;
    Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
    for (Py_ssize_t i = 0; i < n; ++i)
        scanValue(PyTuple_GET_ITEM(args, i), uint16_t(i), out, types);
    if (kwargs && PyDict_Check(kwargs)) {
        Py_ssize_t pos = 0, k = 0;
        PyObject *key, *value;
        while (PyDict_Next(kwargs, &pos, &key, &value))
            scanValue(value, uint16_t(n + k++), out, types);
    }
    return out;
}

}  // namespace

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

void injectedFault(std::string_view phase) {
    static const std::string wanted = [] {
        const char* v = std::getenv(setting("fault").env.data());
        return std::string(v ? v : "");
    }();
    if (!wanted.empty() && wanted == phase)
        throw std::runtime_error("injected fault (" + wanted + ")");
}

PyObject* OpHandler::call(PyObject* callable, PyObject* args, PyObject* kwargs) {
    PyObject* result = PyObject_Call(callable, args ? args : emptyArgs(), kwargs);
    m_outcome.ran(result);
    return result;
}

PyObject* OpHandler::handle(bool& runAsIs) {
    runAsIs = false;
    try {
        return run();
    } catch (const std::exception& e) {
        m_agent.ownError("dispatch", std::string("meshscope: dispatch hook error: ") + e.what());
        if (m_outcome.happened()) return m_outcome.replay();  // never twice
        PyErr_Clear();
        runAsIs = true;
        return nullptr;
    }
}

bool OpHandler::traceFacts(const Operand& plain) {
    if (!plain.obj || !plain.tensor().key_set().has(c10::DispatchKey::Python)) return false;
    std::optional<TracedFrames> traced = tracedFrames(m_writer);
    if (!traced) return false;
    m_traced = true;
    m_tracedFrames = std::move(traced->frames);
    m_tracedFile = std::move(traced->innermostFile);
    m_fake = plain.obj;
    m_real = realTensorOf(plain.obj);
    return true;
}

uint64_t OpHandler::fingerprint(const Operand& op) const {
    if (m_real && op.obj == m_fake) return fingerprintTensor(THPVariable_Unpack(m_real.get()));
    return fingerprintTensor(op.tensor());
}

PyObject* OpHandler::run() {
    injectedFault("before");
    m_info = &m_torch.opInfo(m_func, m_writer);
    m_inputs = scanArgs(m_args, m_kwargs, m_torch);
    findReference();
    if (!m_reference) return plainOp();
    bool mixed = false;
    for (Operand& op : m_inputs)
        if (!op.dtensor && isPlainMixedCandidate(op.tensor())) mixed = op.mixed = true;
    return mixed ? incident() : dtensorOp();
}

void OpHandler::findReference() {
    for (const Operand& op : m_inputs)
        if (op.dtensor) {
            m_reference = &op;
            m_refFacts = m_torch.dtensorFacts(op.obj, m_writer);
            return;
        }
}

OpSeq OpHandler::recordDTensorOp(int64_t start, int64_t end, const Operands& outputs) {
    findReference();
    return recordOp(start, end, outputs, IncidentSeq{}, *m_info);
}

Operands OpHandler::scanResult(PyObject* result) const {
    Operands outs;
    if (result) scanValue(result, 0, outs, m_torch);
    return outs;
}

bool OpHandler::tagsFactory() const {
    return m_info->isFactory && tagsCreations(m_agent.phase());
}

void OpHandler::afterPlainOp(const Operands& outputs) {
    injectedFault("provenance");
    if (tagsFactory()) {
        // torch.tensor(data), torch.as_tensor(array) and torch.from_numpy()
        // lift their new tensor with aten::lift_fresh
        static const std::string lifted = "torch.tensor/as_tensor/from_numpy (aten::lift_fresh)";
        tagOutputs(outputs, birthProvenance(
                                m_agent, m_info->text == "aten::lift_fresh" ? lifted : m_info->text,
                                outputs.empty() ? nullptr : &outputs.front().tensor()));
    } else if (m_agent.tensors().hasProvenance()) {
        propagate(outputs);
    }
}

// An op on plain tensors only: not recorded at DTensor level, but provenance
// flows from inputs to outputs and new tensors get tagged by phase.
PyObject* OpHandler::plainOp() {
    if (m_agent.promotions().size() && m_agent.phase() == Phase::Backward)
        if (PyObject* result = substitutePromoted()) return result;
    if (PyErr_Occurred()) return nullptr;
    PyObject* result = call(m_info->call.get(), m_args, m_kwargs);
    if (!result) return nullptr;
    if (tagsFactory() || m_agent.tensors().hasProvenance()) afterPlainOp(scanResult(result));
    return result;
}

// In backward, a plain tensor autograd saved in forward that the agent had
// promoted runs as that promotion. Returns nullptr (no error set) when no
// input was promoted.
PyObject* OpHandler::substitutePromoted() {
    ArgEditor editor(m_args, m_kwargs);
    bool any = false;
    for (const Operand& op : m_inputs)
        if (PyObject* promoted = m_agent.promotions().find(op.tensor()))
            any = editor.replace(op, promoted) || any;
    if (!any) return nullptr;
    int64_t start = m_writer.nowNs();
    PyObject* result = call(m_info->call.get(), editor.args.get(), editor.kwargs.get());
    int64_t end = m_writer.nowNs();
    PendingError pending;  // the op's own exception survives its record
    recordOp(start, end, result, IncidentSeq{}, *m_info);
    return result;
}

void OpHandler::tagOutputs(const Operands& outs, const Provenance& provenance) {
    for (const Operand& op : outs)
        if (!op.dtensor) m_agent.tensors().setProvenance(op.tensor(), provenance);
}

void OpHandler::propagate(const Operands& outs) {
    TensorTable& tensors = m_agent.tensors();
    TensorTable::ProvenancePtr derived;
    for (const Operand& op : m_inputs)
        if ((derived = tensors.derivedProvenance(op.tensor()))) break;
    if (!derived) return;
    // A chain's last step: this op at its user frame (one record per frame
    // and op, shared like provenances).
    TensorTable::ProvenancePtr step;
    for (const Operand& op : outs)
        if (!op.dtensor && !tensors.provenance(op.tensor()))
            if (TensorTable::Entry* entry = tensors.setProvenance(op.tensor(), derived)) {
                if (!step) {  // kept by frame and op: a step run every iteration formats nothing
                    TensorTable::PlaceKey key{m_agent.frames().userStack(m_writer), m_info->name,
                                              TensorTable::kLastStepPlace};
                    if (!(step = tensors.byPlace(key))) {
                        Provenance last;
                        last.evidence = m_info->text;
                        last.createdAt = key.stack;
                        step = tensors.intern(std::move(last));
                        tensors.rememberPlace(key, step);
                    }
                }
                entry->lastStep = step;
            }
}

TensorId OpHandler::tensorId(const Operand& op, const DTensorFacts* facts, bool identity,
                             const std::string& label) {
    const at::Tensor& t = op.tensor();
    TensorTable::Entry* entry = m_agent.tensors().find(t);
    if (entry && entry->recorded) return entry->id;
    DTensorFacts own =
        op.dtensor && !facts ? m_torch.dtensorFacts(op.obj, m_writer) : DTensorFacts{};
    const DTensorFacts& f = facts ? *facts : own;
    if (!entry && !identity) return describedId(op, f);
    bool isNew = false;
    if (!entry) entry = &m_agent.tensors().get(t, isNew);
    entry->recorded = true;
    recordTensor(op, f, entry->id, entry->provenance.get(), label);
    return entry->id;
}

TensorId OpHandler::describedId(const Operand& op, const DTensorFacts& facts) {
    const at::Tensor& t = op.tensor();
    // A DTensor's description is its spec's: remembered with the spec entry
    // (no hashing of the shape per operand).
    if (op.dtensor && facts.described.matches(t)) return facts.described.id;
    TensorDescriptions::Key key{t.scalar_type(), t.device(),       op.dtensor,
                                facts.mesh,      facts.placements, t.sizes()};
    TensorDescriptions& descriptions = m_agent.descriptions();
    TensorId id = descriptions.find(key);
    if (!id) {
        id = m_writer.newTensorId();
        recordTensor(op, facts, id, nullptr);
        descriptions.add(key, id);
    }
    if (op.dtensor)
        m_torch.rememberDescription(facts, {id, t.scalar_type(), t.device(), t.numel()});
    return id;
}

void OpHandler::recordTensor(const Operand& op, const DTensorFacts& facts, TensorId id,
                             const Provenance* provenance, const std::string& label) {
    const at::Tensor& t = op.tensor();
    TensorRecord rec;
    rec.id = id;
    rec.dtype = m_torch.dtypeId(t.scalar_type(), m_writer);
    rec.globalShape = m_writer.intern(shapeText(t.sizes().data(), t.sizes().size()));
    rec.device = m_torch.deviceId(t.device(), m_writer);
    rec.numel = t.numel();
    rec.isDTensor = op.dtensor;
    if (provenance) rec.createdAt = provenance->createdAt;
    if (!label.empty()) rec.label = m_writer.intern(label);
    rec.localShape = rec.globalShape;
    if (op.dtensor) {
        rec.mesh = facts.mesh;
        rec.placements = facts.placements;
        if (facts.placementsText.find("Shard") != std::string::npos) {  // else local == global
            PyRef local = m_torch.localTensor(op.obj);
            if (local && THPVariable_Check(local.get())) {
                const at::Tensor& l = THPVariable_Unpack(local.get());
                rec.localShape = m_writer.intern(shapeText(l.sizes().data(), l.sizes().size()));
            }
        }
    }
    m_writer.submit(Record{std::move(rec)});
}

void OpHandler::addOperands(std::vector<OperandRecord>& out, const Operands& ops,
                            OperandRole role) {
    for (const Operand& op : ops) {
        OperandRecord r;
        r.index = op.index;
        r.role = role;
        r.kind = OperandKind::Tensor;
        if (op.dtensor) {
            DTensorFacts facts =
                &op == m_reference ? m_refFacts : m_torch.dtensorFacts(op.obj, m_writer);
            r.tensor = tensorId(op, &facts);
            r.placements = facts.placements;
        } else {
            r.tensor = tensorId(op, nullptr);
        }
        out.push_back(r);
    }
}

OpSeq OpHandler::recordOp(int64_t start, int64_t end, PyObject* result, IncidentSeq incident,
                          OpInfo& info) {
    return recordOp(start, end, scanResult(result), incident, info);
}

OpSeq OpHandler::recordOp(int64_t start, int64_t end, const Operands& outputs, IncidentSeq incident,
                          OpInfo& info) {
    injectedFault("record");
    OpRecord rec;
    rec.startNs = start;
    rec.endNs = end;
    rec.thread = Agent::threadIndex();
    rec.name = info.name;
    rec.phase = m_agent.phase();
    rec.step = m_agent.step();
    rec.stack = m_agent.frames().userStack(m_writer);
    rec.depth = Agent::threadDepth();
    rec.incident = incident;
    rec.operands = RankWriter::operandList();  // a written record's, reused
    rec.operands.reserve(m_inputs.size() + outputs.size());
    addOperands(rec.operands, m_inputs, OperandRole::Input);
    addOperands(rec.operands, outputs, OperandRole::Output);
    return m_writer.submit(std::move(rec));
}

void OpHandler::recordRan(OpFrame& frame, int64_t start, int64_t end, const Operands& outputs) {
    m_agent.counters().ops.fetch_add(1, std::memory_order_relaxed);
    PendingError pending;  // the op's own exception survives our bookkeeping
    try {
        if (!m_reference) findReference();
        frame.recorded(recordOp(start, end, outputs, IncidentSeq{}, *m_info));
    } catch (const std::exception& e) {
        m_agent.ownError("record", std::string("could not record an op: ") + e.what());
    }
}

PyObject* OpHandler::dtensorOp() {
    int64_t start = m_writer.nowNs();
    OpFrame frame(m_agent, m_inputs);
    PyObject* result = call(m_info->call.get(), m_args, m_kwargs);
    frame.ran();
    int64_t end = m_writer.nowNs();
    recordRan(frame, start, end, scanResult(result));  // none when it raised
    return result;
}

}  // namespace meshscope::capture
