#include "capture/agent/dispatch_hook.h"

#include <ATen/DTensorState.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>

#include <memory>

#include <string>
#include <vector>

#include "capture/agent/agent.h"
#include "capture/agent/classifier.h"
#include "capture/agent/reconciler.h"
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

// One tensor argument of an op (a direct argument or an element of a list).
struct Operand {
    PyObject* obj = nullptr;  // borrowed: alive as long as the op's args; may be
                              // null for a plain tensor Python never saw
    at::Tensor t;
    uint16_t index = 0;    // argument position; keyword arguments follow positionals
    int16_t element = -1;  // position inside a list argument
    bool dtensor = false;
    bool mixed = false;  // a plain tensor DTensor's dispatch would reject
    const at::Tensor& tensor() const { return t; }
};

void scanValue(PyObject* value, uint16_t index, std::vector<Operand>& out, const PyTorch& py) {
    if (THPVariable_Check(value)) {
        out.push_back({value, THPVariable_Unpack(value), index, -1, py.isDTensor(value), false});
        return;
    }
    if (!PyList_Check(value) && !PyTuple_Check(value)) return;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = PySequence_Fast_GET_ITEM(value, i);
        if (THPVariable_Check(item))
            out.push_back(
                {item, THPVariable_Unpack(item), index, int16_t(i), py.isDTensor(item), false});
    }
}

std::vector<Operand> scanArgs(PyObject* args, PyObject* kwargs, const PyTorch& py) {
    std::vector<Operand> out;
    Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
    for (Py_ssize_t i = 0; i < n; ++i)
        scanValue(PyTuple_GET_ITEM(args, i), uint16_t(i), out, py);
    if (kwargs && PyDict_Check(kwargs)) {
        Py_ssize_t pos = 0, k = 0;
        PyObject *key, *value;
        while (PyDict_Next(kwargs, &pos, &key, &value))
            scanValue(value, uint16_t(n + k++), out, py);
    }
    return out;
}

bool isPlainMixedCandidate(const at::Tensor& t) {
    // DTensor replicates one-element tensors and wrapped numbers itself.
    return !t.unsafeGetTensorImpl()->is_wrapped_number() && t.numel() != 1;
}

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

// Holds the pending Python exception (if any) aside while the agent calls
// Python itself, and restores it on scope exit.
class PendingError {
  public:
    PendingError() { PyErr_Fetch(&m_type, &m_value, &m_trace); }
    ~PendingError() {
        PyErr_Clear();
        if (m_type) PyErr_Restore(m_type, m_value, m_trace);
    }
    bool active() const { return m_type != nullptr; }
    PendingError(const PendingError&) = delete;
    PendingError& operator=(const PendingError&) = delete;

  private:
    PyObject *m_type = nullptr, *m_value = nullptr, *m_trace = nullptr;
};

class OpCall {
  public:
    OpCall(Agent& agent, PyObject* func, PyObject* args, PyObject* kwargs)
        : m_agent(agent),
          m_writer(agent.writer()),
          m_py(agent.py()),
          m_func(func),
          m_args(args),
          m_kwargs(kwargs) {}

    // The dispatcher hook's call: operands scanned from the boxed stack.
    OpCall(Agent& agent, OpInfo& info, std::vector<Operand> inputs)
        : m_agent(agent),
          m_writer(agent.writer()),
          m_py(agent.py()),
          m_func(nullptr),
          m_args(nullptr),
          m_kwargs(nullptr),
          m_info(&info),
          m_inputs(std::move(inputs)) {}

    PyObject* run();
    // Dispatcher hook: records a DTensor op that has run (outputs empty when
    // it raised).
    void recordDTensorOp(int64_t start, int64_t end, const std::vector<Operand>& outputs);
    // Dispatcher hook: tags or propagates provenance after a plain op ran.
    void afterPlainOp(const std::vector<Operand>& outputs);

  private:
    PyObject* call(PyObject* callable, PyObject* args, PyObject* kwargs) {
        return PyObject_Call(callable, args ? args : emptyArgs(), kwargs);
    }
    PyObject* plainOp();
    PyObject* dtensorOp();
    PyObject* incident();
    void tagOutputs(const std::vector<Operand>& outputs, const Provenance& provenance);
    void propagate(const std::vector<Operand>& outputs);
    bool tagsFactory() const;
    std::vector<Operand> scanResult(PyObject* result) const;
    TensorId tensorId(const Operand& op, const DTensorFacts* facts);
    void addOperands(std::vector<OperandRecord>& out, const std::vector<Operand>& ops,
                     OperandRole role);
    OpSeq recordOp(int64_t start, int64_t end, PyObject* result, IncidentSeq incident,
                   OpInfo& info);
    OpSeq recordOp(int64_t start, int64_t end, const std::vector<Operand>& outputs,
                   IncidentSeq incident, OpInfo& info);
    void findReference();
    std::string incidentText(const IncidentRecord& inc, const Operand& plain,
                             const Classification& c, const UserFrame& frame) const;
    PyObject* raiseIncident(IncidentRecord& inc, const Operand& plain, const Classification& cls,
                            const UserFrame& frame, const PolicyDecision& decision);
    PyObject* observeWithModeBelow(IncidentRecord& inc, const Operand& plain,
                                   const Classification& cls, const UserFrame& frame,
                                   const PolicyDecision& decision, PyObject* below);
    struct Plan {
        const Operand* operand;
        Action action;
        bool asList;  // scalarize to a list of Python scalars
    };
    std::vector<Plan> plan(const Operand& first, const PolicyDecision& decision,
                           const UserFrame& frame, std::string& rule);
    PyObject* reconcile(IncidentRecord& inc, const Operand& first, const UserFrame& frame,
                        PolicyDecision decision, bool byTorch);
    Promotion promote(const Plan& p, const PromotionTarget& target);
    PyObject* substitutePromoted();
    PyObject* retryReplicated(ArgEditor& editor, OpInfo& callInfo,
                              const std::vector<std::pair<const Operand*, PyRef>>& sharded,
                              const PromotionTarget& target, std::string& rule);
    Classification classifyOperand(const Operand& op);
    // While torch.compile traces: the user frames Dynamo is tracing and the
    // real tensor behind the fake plain operand.
    bool traceFacts(const Operand& plain);
    uint64_t fingerprint(const Operand& op) const;
    bool isScalarList(const Operand& op) const;
    PolicyDecision decide(const Operand& op, const Classification& cls,
                          const UserFrame& frame) const;

    Agent& m_agent;
    RankWriter& m_writer;
    PyTorch& m_py;
    PyObject* m_func;
    PyObject* m_args;
    PyObject* m_kwargs;
    OpInfo* m_info = nullptr;
    std::vector<Operand> m_inputs;
    const Operand* m_reference = nullptr;  // first DTensor operand
    DTensorFacts m_refFacts;
    std::string m_policyRule;
    bool m_traced = false;
    std::vector<Frame> m_tracedFrames;  // innermost first
    std::string m_tracedFile;           // of the innermost
    PyObject* m_fake = nullptr;         // the traced plain operand (borrowed)
    PyRef m_real;                       // the real tensor behind it
};

PyObject* tracingHelper(const char* name) {
    PyRef mod = PyRef::steal(PyImport_ImportModule("meshscope._tracing"));
    PyObject* fn = mod ? PyObject_GetAttrString(mod.get(), name) : nullptr;
    if (!fn) PyErr_Clear();
    return fn;  // kept for the process
}

bool OpCall::traceFacts(const Operand& plain) {
    if (!plain.obj || !plain.tensor().key_set().has(c10::DispatchKey::Python)) return false;
    static PyObject* userStack = tracingHelper("user_stack");
    static PyObject* realTensor = tracingHelper("real_tensor");
    PyRef stack = PyRef::steal(userStack ? PyObject_CallNoArgs(userStack) : nullptr);
    if (!stack || !PyList_Check(stack.get())) {
        PyErr_Clear();
        return false;
    }
    m_traced = true;
    for (Py_ssize_t i = PyList_GET_SIZE(stack.get()) - 1; i >= 0; --i) {
        const char* file = nullptr;
        const char* function = nullptr;
        int line = 0;
        if (PyArg_ParseTuple(PyList_GET_ITEM(stack.get(), i), "sis", &file, &line, &function)) {
            if (m_tracedFrames.empty()) m_tracedFile = file;
            m_tracedFrames.push_back(Frame{m_writer.intern(file), line, m_writer.intern(function)});
        }
        PyErr_Clear();
    }
    m_fake = plain.obj;
    m_real = PyRef::steal(realTensor ? PyObject_CallOneArg(realTensor, plain.obj) : nullptr);
    if (!m_real || !THPVariable_Check(m_real.get())) m_real = PyRef{};
    PyErr_Clear();
    return true;
}

uint64_t OpCall::fingerprint(const Operand& op) const {
    if (m_real && op.obj == m_fake) return fingerprintTensor(THPVariable_Unpack(m_real.get()));
    return fingerprintTensor(op.tensor());
}

PyObject* OpCall::run() {
    m_info = &m_py.opInfo(m_func, m_writer);
    m_inputs = scanArgs(m_args, m_kwargs, m_py);
    findReference();
    if (!m_reference) return plainOp();
    bool mixed = false;
    for (Operand& op : m_inputs)
        if (!op.dtensor && isPlainMixedCandidate(op.tensor())) mixed = op.mixed = true;
    return mixed ? incident() : dtensorOp();
}

void OpCall::findReference() {
    for (const Operand& op : m_inputs)
        if (op.dtensor) {
            m_reference = &op;
            m_refFacts = m_py.dtensorFacts(op.obj, m_writer);
            return;
        }
}

void OpCall::recordDTensorOp(int64_t start, int64_t end, const std::vector<Operand>& outputs) {
    findReference();
    recordOp(start, end, outputs, IncidentSeq{}, *m_info);
}

std::vector<Operand> OpCall::scanResult(PyObject* result) const {
    std::vector<Operand> outs;
    if (result) scanValue(result, 0, outs, m_py);
    return outs;
}

bool OpCall::tagsFactory() const {
    Phase phase = m_agent.phase();
    return m_info->isFactory &&
           (phase == Phase::Forward || phase == Phase::Optimizer || phase == Phase::Data);
}

void OpCall::afterPlainOp(const std::vector<Operand>& outputs) {
    if (tagsFactory()) {
        UserFrame frame = m_agent.frames().userFrame(m_writer);
        const std::string& label = Agent::threadPhaseLabel();
        Phase phase = m_agent.phase();
        Provenance p;
        p.createdAt = frame.stack;
        std::string where =
            frame.file.empty() ? "" : " at " + frame.file + ":" + std::to_string(frame.line);
        if (phase == Phase::Forward) {
            p.origin = OriginClass::CreatedInForward;
            p.evidence = "created by " + m_info->text + " inside " +
                         (label.empty() ? std::string("forward") : label) + where;
        } else if (phase == Phase::Optimizer) {
            p.origin = OriginClass::OptimizerState;
            p.evidence = "created by " + m_info->text + " in " +
                         (label.empty() ? std::string("an optimizer step") : label) + where;
        } else {
            p.origin = OriginClass::InputData;
            p.evidence = "created by " + m_info->text + " while loading data" +
                         (label.empty() ? "" : " (" + label + ")") + where;
        }
        tagOutputs(outputs, p);
    } else if (m_agent.tensors().hasProvenance()) {
        propagate(outputs);
    }
}

// An op on plain tensors only: not recorded at DTensor level, but provenance
// flows from inputs to outputs and new tensors get tagged by phase.
PyObject* OpCall::plainOp() {
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
PyObject* OpCall::substitutePromoted() {
    ArgEditor editor(m_args, m_kwargs);
    bool any = false;
    for (const Operand& op : m_inputs)
        if (PyObject* promoted = m_agent.promotions().find(op.tensor()))
            any = editor.replace(op, promoted) || any;
    if (!any) return nullptr;
    int64_t start = m_writer.nowNs();
    PyObject* result = call(m_info->call.get(), editor.args.get(), editor.kwargs.get());
    int64_t end = m_writer.nowNs();
    PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
    PyErr_Fetch(&type, &value, &trace);
    recordOp(start, end, result, IncidentSeq{}, *m_info);
    PyErr_Restore(type, value, trace);
    return result;
}

void OpCall::tagOutputs(const std::vector<Operand>& outs, const Provenance& provenance) {
    for (const Operand& op : outs)
        if (!op.dtensor) m_agent.tensors().setProvenance(op.tensor(), provenance);
}

void OpCall::propagate(const std::vector<Operand>& outs) {
    const Provenance* source = nullptr;
    for (const Operand& op : m_inputs)
        if ((source = m_agent.tensors().provenance(op.tensor()))) break;
    if (!source) return;
    Provenance derived = *source;
    derived.derived = true;
    for (const Operand& op : outs)
        if (!op.dtensor && !m_agent.tensors().provenance(op.tensor()))
            m_agent.tensors().setProvenance(op.tensor(), derived);
}

TensorId OpCall::tensorId(const Operand& op, const DTensorFacts* facts) {
    const at::Tensor& t = op.tensor();
    bool isNew = false;
    TensorTable::Entry& entry = m_agent.tensors().get(t, isNew);
    if (entry.recorded) return entry.id;
    entry.recorded = true;
    TensorRecord rec;
    rec.id = entry.id;
    rec.dtype = m_py.dtypeId(t.scalar_type(), m_writer);
    rec.globalShape = m_writer.intern(shapeText(t.sizes().data(), t.sizes().size()));
    rec.device = m_py.deviceId(t.device(), m_writer);
    rec.numel = t.numel();
    rec.isDTensor = op.dtensor;
    if (entry.provenance) rec.createdAt = entry.provenance->createdAt;
    rec.localShape = rec.globalShape;
    if (op.dtensor) {
        DTensorFacts own = facts ? DTensorFacts{} : m_py.dtensorFacts(op.obj, m_writer);
        const DTensorFacts& f = facts ? *facts : own;
        rec.mesh = f.mesh;
        rec.placements = f.placements;
        if (f.placementsText.find("Shard") != std::string::npos) {  // else local == global
            PyRef local = PyRef::steal(PyObject_GetAttr(op.obj, m_py.localTensorName()));
            if (local && THPVariable_Check(local.get())) {
                const at::Tensor& l = THPVariable_Unpack(local.get());
                rec.localShape = m_writer.intern(shapeText(l.sizes().data(), l.sizes().size()));
            }
            PyErr_Clear();
        }
    }
    m_writer.submit(Record{std::move(rec)});
    return entry.id;
}

void OpCall::addOperands(std::vector<OperandRecord>& out, const std::vector<Operand>& ops,
                         OperandRole role) {
    for (const Operand& op : ops) {
        OperandRecord r;
        r.index = op.index;
        r.role = role;
        r.kind = OperandKind::Tensor;
        if (op.dtensor) {
            DTensorFacts facts =
                &op == m_reference ? m_refFacts : m_py.dtensorFacts(op.obj, m_writer);
            r.tensor = tensorId(op, &facts);
            r.placements = facts.placements;
        } else {
            r.tensor = tensorId(op, nullptr);
        }
        out.push_back(r);
    }
}

OpSeq OpCall::recordOp(int64_t start, int64_t end, PyObject* result, IncidentSeq incident,
                       OpInfo& info) {
    return recordOp(start, end, scanResult(result), incident, info);
}

OpSeq OpCall::recordOp(int64_t start, int64_t end, const std::vector<Operand>& outputs,
                       IncidentSeq incident, OpInfo& info) {
    OpRecord rec;
    rec.startNs = start;
    rec.endNs = end;
    rec.thread = Agent::threadIndex();
    rec.name = info.name;
    rec.phase = m_agent.phase();
    rec.step = m_agent.step();
    rec.stack = m_agent.frames().userFrame(m_writer).stack;
    rec.depth = Agent::threadDepth();
    rec.incident = incident;
    addOperands(rec.operands, m_inputs, OperandRole::Input);
    addOperands(rec.operands, outputs, OperandRole::Output);
    return m_writer.submit(std::move(rec));
}

PyObject* OpCall::dtensorOp() {
    int64_t start = m_writer.nowNs();
    ++Agent::threadDepth();
    PyObject* result = call(m_info->call.get(), m_args, m_kwargs);
    --Agent::threadDepth();
    int64_t end = m_writer.nowNs();
    m_agent.counters().ops.fetch_add(1, std::memory_order_relaxed);
    PendingError pending;  // the op's own exception survives our bookkeeping
    try {
        recordOp(start, end, result, IncidentSeq{}, *m_info);
    } catch (const std::exception& e) {
        m_agent.counters().agentErrors.fetch_add(1);
        m_agent.warnOnce("record", std::string("could not record an op: ") + e.what());
    }
    return result;
}

std::string pendingErrorText() {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyErr_NormalizeException(&type, &value, &trace);
    std::string text;
    if (value) {
        PyRef str = PyRef::steal(PyObject_Str(value));
        const char* utf8 = str ? PyUnicode_AsUTF8(str.get()) : nullptr;
        if (utf8)
            text = utf8;
        else
            PyErr_Clear();
    }
    PyErr_Restore(type, value, trace);
    return text;
}

bool isForeach(const std::string& name) {
    return name.starts_with("aten::_foreach_");
}

std::string OpCall::incidentText(const IncidentRecord& inc, const Operand& plain,
                                 const Classification& c, const UserFrame& frame) const {
    std::string text = "operand " + std::to_string(plain.index) +
                       (plain.element >= 0 ? "[" + std::to_string(plain.element) + "]" : "") +
                       " of " + m_info->text + " is a plain torch.Tensor (" +
                       describeTensor(plain.tensor()) + ") meeting DTensor operand " +
                       std::to_string(m_reference->index) + " " + m_refFacts.placementsText +
                       " on " + m_py.meshText(m_refFacts.mesh) + "\n";
    text += "  origin " + std::string(1, char(c.origin)) + " (" +
            std::string(describeOrigin(c.origin)) + "): " + c.evidence + "\n";
    if (!frame.file.empty())
        text += "  op called at " + frame.file + ":" + std::to_string(frame.line) + "\n";
    FixSuggestion fix = suggestFix(c.origin);
    text += "  fix: " + fix.summary + (fix.code.empty() ? "" : ", e.g. " + fix.code) + "\n";
    text += "  policy: " + std::string(toString(inc.action)) + " (" + m_policyRule + ")";
    return text;
}

Classification OpCall::classifyOperand(const Operand& op) {
    bool real = m_real && op.obj == m_fake;  // a fake tensor Dynamo traces
    const at::Tensor& t = real ? THPVariable_Unpack(m_real.get()) : op.tensor();
    ClassifyInput ci;
    ci.plainObj = real ? m_real.get() : op.obj;
    ci.plain = &t;
    ci.provenance = m_agent.tensors().provenance(t);
    ci.opName = m_info->text;
    ci.copyIntoDTensor = m_info->isCopy && m_inputs.front().dtensor;
    ci.insideLoadStateDict = Agent::insideLoadStateDict();
    ci.phase = m_agent.phase();
    ci.phaseLabel = Agent::threadPhaseLabel();
    Classification c = classify(ci);
    if (!m_traced || op.obj != m_fake) return c;
    if (c.origin == OriginClass::Unknown && real) {
        c.origin = OriginClass::InputData;
        c.evidence = "passed as input into the torch.compile'd code (a graph input)";
    }
    c.evidence += "; found while torch.compile traced it";
    return c;
}

// A tensor of per-tensor scalars in a foreach op (`_foreach_addcdiv_.Tensor`).
bool OpCall::isScalarList(const Operand& op) const {
    return isForeach(m_info->text) && op.element < 0 && op.index > 0 && op.tensor().dim() == 1;
}

PolicyDecision OpCall::decide(const Operand& op, const Classification& cls,
                              const UserFrame& frame) const {
    return m_agent.config().policy.decide(
        IncidentFacts{m_info->text, cls.origin, frame.file, frame.module, op.tensor().numel(),
                      isScalarList(op), m_py.hasBatchDim(m_refFacts.mesh)});
}

PyObject* OpCall::incident() {
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
    inc.plainTensor = tensorId(*plain, nullptr);
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

// Observe with another dispatch mode below meshscope: that mode may reconcile
// the op itself, so run it first and record what happened.
PyObject* OpCall::observeWithModeBelow(IncidentRecord& inc, const Operand& plain,
                                       const Classification& cls, const UserFrame& frame,
                                       const PolicyDecision& decision, PyObject* below) {
    std::string name = Py_TYPE(below)->tp_name;
    PyObject* result = call(m_info->call.get(), m_args, m_kwargs);
    PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
    PyErr_Fetch(&type, &value, &trace);
    inc.fingerprint = fingerprint(plain);
    if (result) {
        bool replicates = name.find("Promotion") != std::string::npos;
        inc.action = replicates ? Action::Replicated : Action::Observed;
        inc.outcome = Outcome::Reconciled;
        inc.promotedPlacements = m_writer.intern(replicates ? "[Replicate()]" : "by " + name);
        inc.policyRule = m_writer.intern(decision.rule + "; " + name + " (below meshscope) " +
                                         (replicates ? "replicated it" : "let the op run"));
    } else {
        inc.outcome = Outcome::Raised;
        inc.policyRule = m_writer.intern(decision.rule);
    }
    std::string text = result ? "" : incidentText(inc, plain, cls, frame);
    IncidentSeq seq = m_writer.submit(std::move(inc));
    recordOp(m_writer.nowNs(), m_writer.nowNs(), result, seq, *m_info);
    if (result) return result;
    m_writer.flushNow();
    PyErr_Restore(type, value, trace);
    addNote("meshscope: " + text + "\n  recorded as incident #" + std::to_string(seq.value()) +
                " in " + m_writer.path().string(),
            m_traced);
    return nullptr;
}

PyObject* OpCall::raiseIncident(IncidentRecord& inc, const Operand& plain,
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
PyObject* OpCall::retryReplicated(ArgEditor& editor, OpInfo& callInfo,
                                  const std::vector<std::pair<const Operand*, PyRef>>& sharded,
                                  const PromotionTarget& target, std::string& rule) {
    std::string first = pendingErrorText();
    PyErr_Clear();
    PyRef placements = PyRef::steal(PyList_New(std::max(1, target.meshNdim)));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(placements.get()); ++i)
        PyList_SET_ITEM(placements.get(), i, Py_NewRef(m_py.replicate()));
    auto redistribute = [&](const Operand& operand, PyObject* value) {
        PyRef replicated = PyRef::steal(
            PyObject_CallMethod(value, "redistribute", "OO", target.mesh, placements.get()));
        return replicated && editor.replace(operand, replicated.get());
    };
    bool ok = true;
    for (const auto& [operand, value] : sharded)
        ok = ok && redistribute(*operand, value.get());
    // The op's own DTensor operands too, except the destination of an in-place op.
    bool inPlace = m_info->text.find("_.") != std::string::npos || m_info->text.ends_with("_");
    for (const Operand& op : m_inputs)
        if (ok && op.dtensor && !(inPlace && op.index == 0)) ok = redistribute(op, op.obj);
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
Promotion OpCall::promote(const Plan& p, const PromotionTarget& target) {
    if (p.action == Action::Scalarized) return scalarize(p.operand->obj, p.asList);
    const at::Tensor& plain = p.operand->tensor();
    if (PyObject* cached = m_agent.promotions().find(plain)) {
        Promotion reused;
        reused.value = PyRef::borrow(cached);
        reused.placements = m_py.dtensorFacts(cached, m_writer).placementsText;
        return reused;
    }
    Promotion made = promoteToDTensor(m_py, p.operand->obj, p.action, target);
    if (made.value)
        m_agent.promotions().insert(plain, made.value.get(), p.action == Action::ShardedFromLocal);
    return made;
}

// What happens to each plain operand: the incident's decision for the first,
// each one's own policy decision for the others (a foreach op can mix optimizer
// state with a tensor of scalars), never "observe" for only some of them.
std::vector<OpCall::Plan> OpCall::plan(const Operand& first, const PolicyDecision& decision,
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

PyObject* OpCall::reconcile(IncidentRecord& inc, const Operand& first, const UserFrame& frame,
                            PolicyDecision decision, bool byTorch) {
    std::string rule = decision.rule;
    std::vector<Plan> plans = plan(first, decision, frame, rule);
    OpInfo* callInfo = m_info;
    for (Plan& p : plans) {
        if (p.action != Action::Scalarized) continue;
        PyRef overload = scalarOverload(m_func, p.asList);
        if (overload && callInfo == m_info) {
            callInfo = &m_py.opInfo(overload.get(), m_writer);
        } else {
            p.action = Action::Replicated;
            rule += "; no Python-scalar overload of " + m_info->text + ", replicated instead";
        }
    }
    inc.action = byTorch ? Action::Replicated : plans.front().action;
    inc.policyRule = m_writer.intern(rule);

    PromotionTarget target{m_refFacts.meshObj, m_refFacts.meshNdim,
                           m_py.batchMeshDim(m_refFacts.mesh), decision.shardDim};
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
    ++Agent::threadDepth();
    if (!error.empty()) {  // let PyTorch raise its own error for the original op
        result = call(m_info->call.get(), m_args, m_kwargs);
    } else if (byTorch) {
        result = call(m_info->call.get(), m_args, m_kwargs);
    } else {
        result = call(callInfo->call.get(), editor.args.get(), editor.kwargs.get());
        if (!result && !sharded.empty())
            result = retryReplicated(editor, *callInfo, sharded, target, rule);
    }
    --Agent::threadDepth();
    inc.policyRule = m_writer.intern(rule);
    int64_t end = m_writer.nowNs();
    if (!result && error.empty()) error = pendingErrorText();
    inc.outcome = result && error.empty() ? Outcome::Reconciled : Outcome::Failed;
    if (!error.empty()) inc.error = m_writer.intern(error);
    PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
    PyErr_Fetch(&type, &value, &trace);  // the op's exception, kept while we record
    Action action = inc.action;
    IncidentSeq seq = m_writer.submit(std::move(inc));
    recordOp(start, end, result, seq, *callInfo);
    if (result && error.empty()) {
        m_agent.counters().reconciled.fetch_add(1, std::memory_order_relaxed);
        return result;
    }
    m_writer.flushNow();
    PyErr_Clear();
    if (!type) return result;  // reconciliation failed, yet the original op ran
    PyErr_Restore(type, value, trace);
    addNote("meshscope: could not reconcile " + m_info->text + " by " +
            std::string(toString(action)) + " (" + error + "); recorded as incident #" +
            std::to_string(seq.value()) + " in " + m_writer.path().string());
    return nullptr;
}

}  // namespace

void setStrictErrorType(PyObject* type) {
    Py_XINCREF(type);
    Py_XDECREF(g_strictError);
    g_strictError = type;
}

PyObject* torchDispatch(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc < 1) {
        PyErr_SetString(PyExc_TypeError, "__torch_dispatch__(func, types, args=(), kwargs=None)");
        return nullptr;
    }
    PyObject* func = argv[0];
    PyObject* args = argc > 2 && PyTuple_Check(argv[2]) ? argv[2] : nullptr;
    PyObject* kwargs = argc > 3 && argv[3] != Py_None ? argv[3] : nullptr;
    Agent* agent = Agent::current();
    if (agent) {
        try {
            return OpCall(*agent, func, args, kwargs).run();
        } catch (const std::exception& e) {
            // The agent's own trouble never changes the training: run the op as is.
            agent->counters().agentErrors.fetch_add(1);
            agent->warnOnce("dispatch", std::string("meshscope: dispatch hook error: ") + e.what());
            PyErr_Clear();
        }
    }
    PyRef call = PyRef::steal(PyObject_GetAttrString(func, "_op"));
    if (!call) PyErr_Clear();
    return PyObject_Call(call ? call.get() : func, args ? args : emptyArgs(), kwargs);
}

}  // namespace meshscope::capture

namespace meshscope::capture {
namespace {

// The dispatcher's spare mode key. Nothing in torch registers a kernel for
// it; meshscope registers a boxed fallback and includes the key in the
// attaching thread's dispatch (autograd carries it into backward).
constexpr c10::DispatchKey kHookKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

// Runs the op below the hook. The key is excluded meanwhile, so the ops
// DTensor's dispatch runs inside (local compute, redistributions) and the
// decompositions of composite ops never come back here.
void redispatch(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    c10::impl::ExcludeDispatchKeyGuard guard(kHookKey);
    op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kHookKey), stack);
}

// Tensor operands of one boxed value (a tensor, or tensors inside a list).
// DTensor-ness is read from the tensor's Python object without the GIL: the
// object's type pointer does not change while the tensor holds it.
void scanIValue(const c10::IValue& v, uint16_t index, std::vector<Operand>& out,
                PyTypeObject* dtensorType) {
    auto add = [&](const at::Tensor& t, int16_t element) {
        if (!t.defined()) return;
        PyObject* obj = t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj();
        bool dtensor = obj && t.key_set().has(c10::DispatchKey::Python) &&
                       PyObject_TypeCheck(obj, dtensorType);
        out.push_back({obj, t, index, element, dtensor, false});
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

std::vector<Operand> scanStack(const torch::jit::Stack& stack, size_t count,
                               PyTypeObject* dtensorType) {
    std::vector<Operand> out;
    size_t first = stack.size() - count;
    for (size_t i = 0; i < count; ++i)
        scanIValue(stack[first + i], uint16_t(i), out, dtensorType);
    return out;
}

// Pushes an op's Python result onto the boxed stack as its schema's returns.
void pushResult(const c10::FunctionSchema& schema, PyObject* result, torch::jit::Stack& stack) {
    const auto& returns = schema.returns();
    if (returns.size() == 1) {
        stack.push_back(torch::jit::toIValue(result, returns[0].type()));
        return;
    }
    for (size_t i = 0; i < returns.size(); ++i)
        stack.push_back(torch::jit::toIValue(PyTuple_GET_ITEM(result, i), returns[i].type()));
}

// A mixed op: hand it to the Python-object path (classification, policy,
// promotion through DTensor.from_local) as torch would hand it to a
// TorchDispatchMode, and put its result back on the stack.
void mixedOp(Agent& agent, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    pybind11::gil_scoped_acquire gil;
    c10::impl::ExcludeDispatchKeyGuard guard(kHookKey);
    const c10::FunctionSchema& schema = op.schema();
    size_t nargs = schema.arguments().size();
    PyObject* func = torch::detail::getTorchApiFunction(op).ptr();
    PyRef positional = PyRef::steal(PyList_New(0));
    PyRef kwargs = PyRef::steal(PyDict_New());
    size_t first = stack->size() - nargs;
    for (size_t i = 0; i < nargs; ++i) {
        const c10::Argument& arg = schema.arguments()[i];
        pybind11::object value = torch::jit::toPyObject((*stack)[first + i]);
        if (arg.kwarg_only())
            PyDict_SetItemString(kwargs.get(), arg.name().c_str(), value.ptr());
        else
            PyList_Append(positional.get(), value.ptr());
    }
    torch::jit::drop(*stack, nargs);
    PyRef args = PyRef::steal(PyList_AsTuple(positional.get()));
    PyRef result = PyRef::steal(OpCall(agent, func, args.get(), kwargs.get()).run());
    if (!result) throw pybind11::error_already_set();
    pushResult(schema, result.get(), *stack);
}

// Retries an op that raised once when a promotion meshscope laid out as
// Shard() is among its operands: DTensor has no correct strategy for some
// ops with such operands (index_put in the backward of an index lookup whose
// indices were promoted). The same global tensors laid out as Replicate()
// are always valid, so every DTensor operand except an in-place destination
// is redistributed and the op runs again through DTensor's own dispatch.
// Leaves the outputs on `stack` and returns true on success; false (the
// first error stands) otherwise.
bool retryReplicated(Agent& agent, const c10::OperatorHandle& op,
                     const std::vector<Operand>& inputs, std::vector<c10::IValue> args,
                     torch::jit::Stack& stack, size_t base, const std::exception& first) {
    pybind11::gil_scoped_acquire gil;
    if (Agent::current() != &agent) return false;
    c10::impl::ExcludeDispatchKeyGuard guard(kHookKey);
    bool promoted = false;
    for (const Operand& o : inputs)
        promoted = promoted || (o.dtensor && agent.promotions().isShardedPromotion(o.tensor()));
    if (!promoted) return false;
    const c10::FunctionSchema& schema = op.schema();
    std::string name = operatorText(op.operator_name());
    bool inPlace = name.find("_.") != std::string::npos || name.ends_with("_");
    PyTorch& py = agent.py();
    auto replicated = [&](PyObject* dtensor) -> PyObject* {  // new reference or null
        DTensorFacts facts = py.dtensorFacts(dtensor, agent.writer());
        PyRef placements = PyRef::steal(PyList_New(std::max(1, facts.meshNdim)));
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(placements.get()); ++k)
            PyList_SET_ITEM(placements.get(), k, Py_NewRef(py.replicate()));
        return PyObject_CallMethod(dtensor, "redistribute", "OO", facts.meshObj, placements.get());
    };
    PyRef positional = PyRef::steal(PyList_New(0));
    PyRef kwargs = PyRef::steal(PyDict_New());
    for (size_t i = 0; i < args.size(); ++i) {
        pybind11::object original = torch::jit::toPyObject(args[i]);
        PyRef value = PyRef::borrow(original.ptr());
        if (py.isDTensor(value.get()) && !(inPlace && i == 0)) {
            value = PyRef::steal(replicated(value.get()));
        } else if (PyList_Check(value.get()) || PyTuple_Check(value.get())) {
            PyRef list = PyRef::steal(PySequence_List(value.get()));
            for (Py_ssize_t k = 0; list && k < PyList_GET_SIZE(list.get()); ++k) {
                PyObject* item = PyList_GET_ITEM(list.get(), k);
                if (!py.isDTensor(item)) continue;
                PyObject* moved = replicated(item);
                if (!moved) {
                    list = PyRef{};
                    break;
                }
                PyList_SetItem(list.get(), k, moved);
            }
            value = std::move(list);
        }
        if (!value) {
            PyErr_Clear();
            return false;
        }
        const c10::Argument& arg = schema.arguments()[i];
        if (arg.kwarg_only())
            PyDict_SetItemString(kwargs.get(), arg.name().c_str(), value.get());
        else
            PyList_Append(positional.get(), value.get());
    }
    PyRef tuple = PyRef::steal(PyList_AsTuple(positional.get()));
    PyObject* func = torch::detail::getTorchApiFunction(op).ptr();
    PyRef result = PyRef::steal(PyObject_Call(func, tuple.get(), kwargs.get()));
    if (!result) {
        PyErr_Clear();
        return false;
    }
    // A failed boxed call leaves its arguments on the stack, or some of them.
    stack.resize(std::min(stack.size(), base));
    pushResult(schema, result.get(), stack);
    agent.warnOnce("retry", "meshscope: " + name +
                                " rejected an operand meshscope had promoted with Shard() (" +
                                std::string(first.what()).substr(0, 120) +
                                "); retried with its operands redistributed to Replicate()");
    return true;
}

void hookFallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    Agent* agent = Agent::current();
    PyTypeObject* dtensorType = agent ? agent->py().dtensorType() : nullptr;
    if (!dtensorType) return redispatch(op, ks, stack);
    const c10::FunctionSchema& schema = op.schema();
    std::vector<Operand> inputs = scanStack(*stack, schema.arguments().size(), dtensorType);
    bool dtensor = false, mixed = false;
    for (const Operand& o : inputs)
        dtensor = dtensor || o.dtensor;
    if (dtensor)
        for (Operand& o : inputs)
            if (!o.dtensor && isPlainMixedCandidate(o.tensor())) mixed = o.mixed = true;
    if (mixed) return mixedOp(*agent, op, stack);

    if (!dtensor) {  // plain op: only provenance bookkeeping, and only when needed
        Phase phase = agent->phase();
        bool factory =
            inputs.empty() &&
            (phase == Phase::Forward || phase == Phase::Optimizer || phase == Phase::Data) &&
            isFactoryName(operatorText(op.operator_name()));
        bool propagate = !inputs.empty() && agent->tensors().hasProvenance();
        redispatch(op, ks, stack);
        if (!factory && !propagate) return;
        pybind11::gil_scoped_acquire gil;
        if (Agent::current() != agent) return;  // detached meanwhile
        try {
            std::vector<Operand> outputs = scanStack(*stack, schema.returns().size(), dtensorType);
            OpCall(*agent, agent->py().opInfo(op, agent->writer()), std::move(inputs))
                .afterPlainOp(outputs);
        } catch (const std::exception& e) {
            agent->counters().agentErrors.fetch_add(1);
            agent->warnOnce("dispatch", std::string("meshscope: provenance: ") + e.what());
        }
        return;
    }

    RankWriter& writer = agent->writer();
    int64_t start = writer.nowNs();
    ++Agent::threadDepth();
    auto record = [&](bool ran) {
        int64_t end = writer.nowNs();
        pybind11::gil_scoped_acquire gil;
        if (Agent::current() != agent) return;
        PendingError pending;
        try {
            std::vector<Operand> outputs;
            if (ran) outputs = scanStack(*stack, schema.returns().size(), dtensorType);
            OpCall(*agent, agent->py().opInfo(op, writer), std::move(inputs))
                .recordDTensorOp(start, end, outputs);
        } catch (const std::exception& e) {
            agent->counters().agentErrors.fetch_add(1);
            agent->warnOnce("record", std::string("could not record an op: ") + e.what());
        }
    };
    // A promotion laid out as Shard(batch) can meet an op DTensor has no
    // correct strategy for (index_put in the backward of an index lookup
    // whose indices were promoted): keep the arguments for one retry.
    std::vector<c10::IValue> saved;
    size_t base = stack->size() - schema.arguments().size();
    if (agent->promotions().anySharded()) saved.assign(stack->begin() + base, stack->end());
    try {
        redispatch(op, ks, stack);
    } catch (const std::exception& e) {
        --Agent::threadDepth();
        if (!saved.empty() &&
            retryReplicated(*agent, op, inputs, std::move(saved), *stack, base, e)) {
            record(true);
            return;
        }
        record(false);
        throw;
    }
    --Agent::threadDepth();
    agent->counters().ops.fetch_add(1, std::memory_order_relaxed);
    record(true);
}

}  // namespace

bool installDispatcherHook(std::string& why) {
    static std::unique_ptr<torch::Library> library;
    static std::string error;
    if (library) return true;
    if (error.empty()) {
        try {
            auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "_", kHookKey,
                                                        __FILE__, __LINE__);
            lib->fallback(torch::CppFunction::makeFromBoxedFunction<&hookFallback>());
            library = std::move(lib);
            return true;
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    why = error;
    return false;
}

void enableDispatcherHook(bool on) {
    c10::impl::tls_set_dispatch_key_included(kHookKey, on);
}

bool dispatcherHookEnabled() {
    return c10::impl::tls_is_dispatch_key_included(kHookKey);
}

}  // namespace meshscope::capture
