#include "capture/agent/op_handler.h"

#include <ATen/DTensorState.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <string>
#include <vector>

#include "capture/agent/fingerprint.h"
#include "capture/agent/tracing.h"
#include "core/analysis/fix_suggestion.h"
#include "core/util/content_hash.h"

namespace meshscope::capture {
namespace {

PyObject* g_strictError = nullptr;  // strong reference

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

std::string describeTensor(const at::Tensor& t) {
    return dtypeName(t.scalar_type()) + shapeText(t.sizes().data(), t.sizes().size()) + " on " +
           t.device().str();
}

// Adds a PEP 678 note to the exception being raised. `inMessage`: append it
// to the message instead, for exceptions something else re-raises without
// their notes (Dynamo wraps errors raised while it traces).
void addNote(const std::string& note, bool inMessage = false) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyErr_NormalizeException(&type, &value, &trace);
    if (value && inMessage) {
        PyRef text = PyRef::steal(PyObject_Str(value));
        const char* utf8 = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
        PyRef replaced = PyRef::steal(
            utf8 ? PyObject_CallFunction(type, "s", (std::string(utf8) + "\n" + note).c_str())
                 : nullptr);
        if (replaced && PyExceptionInstance_Check(replaced.get())) {
            PyException_SetCause(replaced.get(), Py_NewRef(value));
            Py_DECREF(value);
            value = replaced.release();
            Py_DECREF(type);
            type = Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(value)));
            PyErr_Restore(type, value, trace);
            return;
        }
        PyErr_Clear();
    }
    if (value) {
        PyRef text = PyRef::steal(PyUnicode_FromString(note.c_str()));
        PyRef done = PyRef::steal(PyObject_CallMethod(value, "add_note", "O", text.get()));
        if (!done) PyErr_Clear();
    }
    PyErr_Restore(type, value, trace);
}

std::string pendingErrorText() {
    PendingError pending(/*normalized=*/true);
    std::string text;
    if (pending.value()) {
        PyRef str = PyRef::steal(PyObject_Str(pending.value()));
        const char* utf8 = str ? PyUnicode_AsUTF8(str.get()) : nullptr;
        if (utf8) text = utf8;
    }
    return text;
}

bool isForeach(const std::string& name) {
    return name.starts_with("aten::_foreach_");
}

// The dispatch mode below meshscope's (meshscope's is popped while its
// handler runs), or null. Keras' KerasDTensorPromotionMode is one.
PyRef modeBelow() {
    static PyObject* current = [] {
        PyRef mod = PyRef::steal(PyImport_ImportModule("torch.utils._python_dispatch"));
        PyObject* fn =
            mod ? PyObject_GetAttrString(mod.get(), "_get_current_dispatch_mode") : nullptr;
        PyErr_Clear();
        return fn;
    }();
    if (!current) return {};
    PyRef mode = PyRef::steal(PyObject_CallNoArgs(current));
    if (!mode || mode.get() == Py_None) {
        PyErr_Clear();
        return {};
    }
    return mode;
}

}  // namespace

// Replaces value at position `index` (element `element`) of args/kwargs.
struct ArgEditor {
    PyRef args, kwargs;
    Py_ssize_t nargs = 0;

    ArgEditor(PyObject* a, PyObject* kw) {
        nargs = a ? PyTuple_GET_SIZE(a) : 0;
        args = PyRef::steal(PyTuple_New(nargs));
        for (Py_ssize_t i = 0; i < nargs; ++i)
            PyTuple_SET_ITEM(args.get(), i, Py_NewRef(PyTuple_GET_ITEM(a, i)));
        kwargs = PyRef::steal(kw && PyDict_Check(kw) ? PyDict_Copy(kw) : PyDict_New());
    }
    bool replace(const Operand& op, PyObject* value) {
        PyObject* container = nullptr;
        PyObject* key = nullptr;
        if (op.index < nargs) {
            container = PyTuple_GET_ITEM(args.get(), op.index);
        } else {
            Py_ssize_t pos = 0, k = 0;
            PyObject* v;
            while (PyDict_Next(kwargs.get(), &pos, &key, &v))
                if (k++ == op.index - nargs) break;
            container = key ? PyDict_GetItem(kwargs.get(), key) : nullptr;
        }
        if (op.element < 0) return set(op.index, key, Py_NewRef(value));
        PyRef list = PyRef::steal(PySequence_List(container));
        if (!list) return false;
        PyList_SetItem(list.get(), op.element, Py_NewRef(value));
        return set(op.index, key, list.release());
    }
    bool set(uint16_t index, PyObject* key, PyObject* owned) {
        if (index < nargs) {
            PyObject* old = PyTuple_GET_ITEM(args.get(), index);
            PyTuple_SET_ITEM(args.get(), index, owned);
            Py_DECREF(old);
            return true;
        }
        int rc = key ? PyDict_SetItem(kwargs.get(), key, owned) : -1;
        Py_DECREF(owned);
        return rc == 0;
    }
};

PyObject* OpHandler::call(PyObject* callable, PyObject* args, PyObject* kwargs) {
    return PyObject_Call(callable, args ? args : emptyArgs(), kwargs);
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

PyObject* OpHandler::dtensorOp() {
    int64_t start = m_writer.nowNs();
    OpFrame frame(m_agent, m_inputs);
    PyObject* result = call(m_info->call.get(), m_args, m_kwargs);
    frame.ran();
    int64_t end = m_writer.nowNs();
    m_agent.counters().ops.fetch_add(1, std::memory_order_relaxed);
    PendingError pending;  // the op's own exception survives our bookkeeping
    try {
        frame.recorded(recordOp(start, end, result, IncidentSeq{}, *m_info));
    } catch (const std::exception& e) {
        m_agent.ownError("record", std::string("could not record an op: ") + e.what());
    }
    return result;
}

std::string OpHandler::incidentText(const IncidentRecord& inc, const Operand& plain,
                                    const Classification& c, const UserFrame& frame) const {
    std::string text =
        "operand " + std::to_string(plain.index) +
        (plain.element >= 0 ? "[" + std::to_string(plain.element) + "]" : "") + " of " +
        m_info->text + " is a plain torch.Tensor (" + describeTensor(plain.tensor()) +
        ") meeting DTensor operand " + std::to_string(m_reference->index) + " " +
        std::string(m_refFacts.placementsText) + " on " + m_torch.meshText(m_refFacts.mesh) + "\n";
    text += "  origin " + std::string(1, char(c.origin)) + " (" +
            std::string(describeOrigin(c.origin)) + "): " + c.evidence + "\n";
    if (!m_plainName.empty()) text += "  the plain tensor is `" + m_plainName + "` there\n";
    if (!frame.file.empty())
        text += "  op called at " + frame.file + ":" + std::to_string(frame.line) + "\n";
    FixSuggestion fix =
        fixForIncident(c.origin, c.evidence, m_plainName, m_torch.hasBatchDim(m_refFacts.mesh));
    text += "  fix: " + fix.summary + (fix.code.empty() ? "" : ", e.g. " + fix.code) + "\n";
    text += "  policy: " + std::string(toString(inc.action)) + " (" + m_policyRule + ")";
    return text;
}

Classification OpHandler::classifyOperand(const Operand& op) {
    bool real = m_real && op.obj == m_fake;  // a fake tensor Dynamo traces
    const at::Tensor& t = real ? THPVariable_Unpack(m_real.get()) : op.tensor();
    ClassifyInput ci;
    ci.plainObj = real ? m_real.get() : op.obj;
    ci.plain = &t;
    ci.provenance = m_agent.tensors().provenance(t);
    std::string lastStep;
    if (const Provenance* last = m_agent.tensors().lastStep(t);
        last && ci.provenance && last->createdAt != ci.provenance->createdAt)
        lastStep = last->evidence + m_agent.frames().whereOf(last->createdAt);
    ci.lastStep = lastStep;
    ci.attachedAt = m_agent.config().attachedAt;
    ci.madeBeforeAttach = m_agent.tensors().preexisting(t);
    ci.tensors = &m_agent.tensors();
    ci.opName = m_info->text;
    ci.copyIntoDTensor = m_info->isCopy && m_inputs.front().dtensor;
    ci.insideLoadStateDict = Agent::insideLoadStateDict();
    ci.phase = m_agent.phase();
    ci.phaseLabel = Agent::threadPhaseLabel();
    Classification c = classify(ci);
    if (c.bornAsOwner)  // the record of the plain tensor carries that birth
        m_agent.tensors().setProvenance(t, Provenance{c.origin, c.evidence, c.createdAt});
    if (!m_traced || op.obj != m_fake) return c;
    if (c.origin == OriginClass::Unknown && real) {
        c.origin = OriginClass::InputData;
        c.evidence = "passed as input into the torch.compile'd code (a graph input)";
    }
    c.evidence += "; found while torch.compile traced it";
    return c;
}

// A tensor of per-tensor scalars in a foreach op (`_foreach_addcdiv_.Tensor`).
bool OpHandler::isScalarList(const Operand& op) const {
    return isForeach(m_info->text) && op.element < 0 && op.index > 0 && op.tensor().dim() == 1;
}

PolicyDecision OpHandler::decide(const Operand& op, const Classification& cls,
                                 const UserFrame& frame) const {
    return m_agent.config().policy.decide(
        IncidentFacts{m_info->text, cls.origin, frame.file, frame.module, op.tensor().numel(),
                      isScalarList(op), m_torch.hasBatchDim(m_refFacts.mesh)});
}

PyObject* OpHandler::incident() {
    m_agent.counters().incidents.fetch_add(1, std::memory_order_relaxed);
    const Operand* plain = nullptr;
    for (const Operand& op : m_inputs)
        if (op.mixed) {
            plain = &op;
            break;
        }
    UserFrame frame;
    if (traceFacts(*plain) && !m_tracedFrames.empty()) {
        const Frame& f = m_tracedFrames.front();
        frame.file = m_tracedFile;
        frame.line = f.line;
        frame.stack = m_writer.internStack(std::span<const Frame>(&f, 1));
    } else {
        frame = m_agent.frames().userFrame(m_writer, true);
    }
    Classification cls = classifyOperand(*plain);
    PyObject* plainObj = m_real && plain->obj == m_fake ? m_real.get() : plain->obj;
    m_plainName = m_agent.frames().heldAs(plainObj, m_writer);
    if (m_plainName.empty() && m_traced && plain->obj == m_fake) {  // a local of traced code
        m_plainName = tracedLocalHolding(m_fake);
    }
    if (m_plainName.empty() && plainObj && plain->tensor().is_view()) {  // k_out[:, a:b] = k
        PyRef base = PyRef::steal(PyObject_GetAttrString(plainObj, "_base"));
        PyErr_Clear();
        if (base && base.get() != Py_None)
            m_plainName = m_agent.frames().heldAs(base.get(), m_writer);
    }
    bool byTorch = at::get_dtensor_allow_implicit_replication();
    PolicyDecision decision =
        byTorch ? PolicyDecision{Action::Replicated, 0,
                                 "torch implicit_replication(): DTensor replicates the plain "
                                 "tensor itself"}
                : decide(*plain, cls, frame);
    m_policyRule = decision.rule;

    IncidentRecord inc;
    inc.timeNs = m_writer.nowNs();
    inc.step = m_agent.step();
    inc.thread = Agent::threadIndex();
    inc.op = m_info->name;
    inc.operandIndex = plain->index;
    inc.plainTensor = tensorId(*plain, nullptr, /*identity=*/true, m_plainName);
    inc.origin = cls.origin;
    inc.evidence = m_writer.intern(cls.evidence);
    inc.action = decision.action;
    inc.stack = m_traced && !m_tracedFrames.empty()
                    ? m_writer.internStack(std::span<const Frame>(
                          m_tracedFrames.data(), std::min<size_t>(m_tracedFrames.size(), 12)))
                    : m_agent.frames().shortStack(m_writer);
    addOperands(inc.operands, m_inputs, OperandRole::Input);

    if (decision.action == Action::Observed || decision.action == Action::StrictError)
        return raiseIncident(inc, *plain, cls, frame, decision);
    return reconcile(inc, *plain, frame, decision, byTorch);
}

// Observe with another dispatch mode below meshscope: that mode may reconcile
// the op itself, so run it first and record what happened.
PyObject* OpHandler::observeWithModeBelow(IncidentRecord& inc, const Operand& plain,
                                          const Classification& cls, const UserFrame& frame,
                                          const PolicyDecision& decision, PyObject* below) {
    std::string name = Py_TYPE(below)->tp_name;
    PyObject* result = call(m_info->call.get(), m_args, m_kwargs);
    IncidentSeq seq;
    std::string text;
    {
        PendingError pending;  // the op's exception, kept while we record
        inc.fingerprint = fingerprint(plain);
        if (result) {
            bool replicates = name.find("Promotion") != std::string::npos;
            inc.action = replicates ? Action::Replicated : Action::Observed;
            inc.outcome = Outcome::Reconciled;
            inc.promotedPlacements = m_writer.intern(replicates ? "[Replicate()]" : "by " + name);
            std::string did = !replicates ? "let the op run"
                              : name == "KerasDTensorPromotionMode"
                                  ? "replicated it: Keras' torch backend promotes a plain tensor "
                                    "that meets a DTensor with DTensor.from_local(t, mesh, "
                                    "[Replicate()] * mesh.ndim), trusting every rank to hold the "
                                    "same values (the fingerprint checks that)"
                                  : "replicated it";
            inc.policyRule =
                m_writer.intern(decision.rule + "; " + name + " (below meshscope) " + did);
        } else {
            inc.outcome = Outcome::Raised;
            inc.policyRule = m_writer.intern(decision.rule);
        }
        text = result ? "" : incidentText(inc, plain, cls, frame);
        seq = m_writer.submit(std::move(inc));
        recordOp(m_writer.nowNs(), m_writer.nowNs(), result, seq, *m_info);
        if (!result) m_writer.flushNow();
    }
    if (result) return result;
    addNote("meshscope: " + text + "\n  recorded as incident #" + std::to_string(seq.value()) +
                " in " + m_writer.path().string(),
            m_traced);
    return nullptr;
}

PyObject* OpHandler::raiseIncident(IncidentRecord& inc, const Operand& plain,
                                   const Classification& cls, const UserFrame& frame,
                                   const PolicyDecision& decision) {
    if (decision.action == Action::Observed)
        if (PyRef below = modeBelow())
            return observeWithModeBelow(inc, plain, cls, frame, decision, below.get());
    inc.policyRule = m_writer.intern(decision.rule);
    inc.outcome = Outcome::Raised;
    std::string text = incidentText(inc, plain, cls, frame);
    bool strict = decision.action == Action::StrictError;
    if (strict) inc.error = m_writer.intern(text);
    IncidentSeq seq = m_writer.submit(std::move(inc));
    m_writer.flushNow();  // on disk before the exception propagates
    std::string where = "  recorded as incident #" + std::to_string(seq.value()) + " in " +
                        m_writer.path().string();
    if (strict) {
        std::string message =
            "meshscope strict: mixed torch.Tensor and DTensor: " + text + "\n" + where;
        PyErr_SetString(g_strictError ? g_strictError : PyExc_RuntimeError, message.c_str());
        return nullptr;
    }
    PyObject* result = call(m_info->call.get(), m_args, m_kwargs);
    if (!result) {
        addNote("meshscope: " + text + "\n" + where, m_traced);
        return nullptr;
    }
    // DTensor accepted what we predicted it would reject.
    m_agent.warnOnce("predict", "meshscope: " + m_info->text +
                                    " accepted a plain tensor meshscope expected it to reject; "
                                    "the incident is recorded as raised");
    return result;
}

// DTensor has no sharding strategy for some ops with a Shard(batch) operand
// (index_put in the backward of an index lookup whose indices were promoted
// below autograd). The same global tensor laid out as Replicate() is always
// valid, so retry once with the promoted operands redistributed.
PyObject* OpHandler::retryReplicated(ArgEditor& editor, OpInfo& callInfo,
                                     const std::vector<std::pair<const Operand*, PyRef>>& sharded,
                                     const PromotionTarget& target, std::string& rule) {
    std::string first = pendingErrorText();
    PyErr_Clear();
    auto redistribute = [&](const Operand& operand, PyObject* value) {
        PyRef replicated = redistributeReplicated(m_torch, value, target.mesh, target.meshNdim);
        return replicated && editor.replace(operand, replicated.get());
    };
    bool ok = true;
    for (const auto& [operand, value] : sharded)
        ok = ok && redistribute(*operand, value.get());
    // The op's own DTensor operands too, except the destination of an in-place op.
    for (const Operand& op : m_inputs)
        if (ok && op.dtensor && !(m_info->isInPlace && op.index == 0))
            ok = redistribute(op, op.obj);
    if (!ok) {
        PyErr_Clear();
        PyErr_SetString(PyExc_RuntimeError, first.c_str());
        return nullptr;
    }
    rule += "; DTensor rejected the Shard() layout (" + first.substr(0, 160) +
            "), redistributed the same global tensor to Replicate()";
    return call(callInfo.call.get(), editor.args.get(), editor.kwargs.get());
}

// The operand's replacement: the DTensor it was promoted to before (same
// global tensor in forward and backward), or a new promotion.
Promotion OpHandler::promote(const Plan& p, const PromotionTarget& target) {
    if (p.action == Action::Scalarized) return scalarize(p.operand->obj, p.asList);
    const at::Tensor& plain = p.operand->tensor();
    if (PyObject* cached = m_agent.promotions().find(plain)) {
        Promotion reused;
        reused.value = PyRef::borrow(cached);
        reused.placements = std::string(m_torch.dtensorFacts(cached, m_writer).placementsText);
        return reused;
    }
    Promotion made = promoteToDTensor(m_torch, p.operand->obj, p.action, target);
    if (made.value)
        m_agent.promotions().insert(plain, made.value.get(), p.action == Action::ShardedFromLocal);
    return made;
}

// What happens to each plain operand: the incident's decision for the first,
// each one's own policy decision for the others (a foreach op can mix optimizer
// state with a tensor of scalars), never "observe" for only some of them.
std::vector<OpHandler::Plan> OpHandler::plan(const Operand& first, const PolicyDecision& decision,
                                             const UserFrame& frame, std::string& rule) {
    std::vector<Plan> plans;
    for (const Operand& op : m_inputs) {
        if (!op.mixed) continue;
        Action want = decision.action;
        if (&op != &first) {
            PolicyDecision own = decide(op, classifyOperand(op), frame);
            if (own.action != Action::Observed && own.action != Action::StrictError) {
                want = own.action;
                if (want != decision.action)
                    rule += "; operand " + std::to_string(op.index) + ": " + own.rule;
            }
        }
        bool scalarLike = isScalarList(op) || op.tensor().numel() == 1;
        if (want == Action::Scalarized && !scalarLike) want = Action::Replicated;
        plans.push_back({&op, want, isScalarList(op)});
    }
    return plans;
}

PyObject* OpHandler::reconcile(IncidentRecord& inc, const Operand& first, const UserFrame& frame,
                               PolicyDecision decision, bool byTorch) {
    std::string rule = decision.rule;
    std::vector<Plan> plans = plan(first, decision, frame, rule);
    OpInfo* callInfo = m_info;
    for (Plan& p : plans) {
        if (p.action != Action::Scalarized) continue;
        PyRef overload = scalarOverload(m_func, p.asList);
        if (overload && callInfo == m_info) {
            callInfo = &m_torch.opInfo(overload.get(), m_writer);
        } else {
            p.action = Action::Replicated;
            rule += "; no Python-scalar overload of " + m_info->text + ", replicated instead";
        }
    }
    inc.action = byTorch ? Action::Replicated : plans.front().action;
    inc.policyRule = m_writer.intern(rule);

    PromotionTarget target{m_refFacts.meshObj, m_refFacts.meshNdim,
                           m_torch.batchMeshDim(m_refFacts.mesh), decision.shardDim};
    ArgEditor editor(m_args, m_kwargs);
    ContentHash combined;
    std::string placements, error;
    std::vector<std::pair<const Operand*, PyRef>> sharded;  // for the Replicate() retry
    for (const Plan& p : plans) {
        uint64_t fp = fingerprint(*p.operand);
        combined.update(&fp, sizeof fp);
        if (!inc.fingerprint) inc.fingerprint = fp;
        if (byTorch) {
            placements = "[Replicate()]";
            continue;
        }
        Promotion promoted = promote(p, target);
        if (!promoted.value || !editor.replace(*p.operand, promoted.value.get())) {
            error =
                promoted.error.empty() ? "could not rebuild the op's arguments" : promoted.error;
            PyErr_Clear();
            break;
        }
        if (p.operand == &first) placements = promoted.placements;
        if (p.action == Action::ShardedFromLocal)
            sharded.emplace_back(p.operand, PyRef::borrow(promoted.value.get()));
    }
    if (plans.size() > 1) inc.fingerprint = combined.digest();
    inc.promotedPlacements = m_writer.intern(placements);

    int64_t start = m_writer.nowNs();
    PyObject* result = nullptr;
    OpFrame opFrame(m_agent, m_inputs);  // the promoted op's redistributions are its collectives
    if (!error.empty()) {                // let PyTorch raise its own error for the original op
        result = call(m_info->call.get(), m_args, m_kwargs);
    } else if (byTorch) {
        result = call(m_info->call.get(), m_args, m_kwargs);
    } else {
        result = call(callInfo->call.get(), editor.args.get(), editor.kwargs.get());
        if (!result && !sharded.empty())
            result = retryReplicated(editor, *callInfo, sharded, target, rule);
    }
    opFrame.ran();
    inc.policyRule = m_writer.intern(rule);
    int64_t end = m_writer.nowNs();
    if (!result && error.empty()) error = pendingErrorText();
    inc.outcome = result && error.empty() ? Outcome::Reconciled : Outcome::Failed;
    if (!error.empty()) inc.error = m_writer.intern(error);
    Action action = inc.action;
    IncidentSeq seq;
    bool raised;
    {
        PendingError pending;  // the op's exception, kept while we record
        raised = pending.active();
        seq = m_writer.submit(std::move(inc));
        opFrame.recorded(recordOp(start, end, result, seq, *callInfo));
        if (!result || !error.empty()) m_writer.flushNow();
    }
    if (result && error.empty()) {
        m_agent.counters().reconciled.fetch_add(1, std::memory_order_relaxed);
        return result;
    }
    if (!raised) return result;  // reconciliation failed, yet the original op ran
    addNote("meshscope: could not reconcile " + m_info->text + " by " +
            std::string(toString(action)) + " (" + error + "); recorded as incident #" +
            std::to_string(seq.value()) + " in " + m_writer.path().string());
    return nullptr;
}

void setStrictErrorType(PyObject* type) {
    Py_XINCREF(type);
    Py_XDECREF(g_strictError);
    g_strictError = type;
}

}  // namespace meshscope::capture
