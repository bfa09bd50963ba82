// The incident resolver (incidents.h): a mixed op's plain operand
// classified, the policy decided, the operand promoted (or scalarized), the
// op called with it, and the incident and op recorded; or the incident
// raised as DTensor's error with meshscope's note.

#include "capture/agent/incidents/incidents.h"

#include <ATen/DTensorState.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <string>
#include <vector>

#include "capture/agent/incidents/failures.h"
#include "capture/agent/incidents/fingerprint.h"
#include "capture/agent/incidents/promotion_plan.h"
#include "capture/agent/interop/tracing.h"
#include "capture/agent/ops/arg_editor.h"
#include "core/analysis/fix_suggestion.h"
#include "core/util/content_hash.h"

namespace meshscope::capture {
namespace {

PyObject* g_strictError = nullptr;  // strong reference

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

std::string IncidentResolver::incidentText(const IncidentRecord& inc, const Operand& plain,
                                           const Classification& c, const UserFrame& frame) {
    std::string text = "operand " + std::to_string(plain.index) +
                       (plain.element >= 0 ? "[" + std::to_string(plain.element) + "]" : "") +
                       " of " + m_op.info().text + " is a plain torch.Tensor (" +
                       describeTensor(plain.tensor()) + ") meeting DTensor operand " +
                       std::to_string(m_op.reference()->index) + " " +
                       std::string(m_op.referenceFacts().placementsText) + " on " +
                       m_op.torch().meshText(m_op.referenceFacts().mesh) + "\n";
    text += "  origin " + std::string(1, char(c.origin)) + " (" +
            std::string(describeOrigin(c.origin)) + "): " + c.evidence + "\n";
    if (!m_plainName.empty()) text += "  the plain tensor is `" + m_plainName + "` there\n";
    if (!frame.file.empty())
        text += "  op called at " + frame.file + ":" + std::to_string(frame.line) + "\n";
    FixFacts facts;
    facts.name = m_plainName;
    facts.ndim = int(plain.tensor().dim());
    facts.meshDims = m_op.torch().meshDimNames(m_op.referenceFacts().mesh);
    FixSuggestion fix = fixForIncident(c.origin, c.evidence, facts);
    text += "  fix: " + fixSentence(fix) + "\n";
    text += "  policy: " + std::string(toString(inc.action)) + " (" + m_policyRule + ")";
    return text;
}

Classification IncidentResolver::classifyOperand(const Operand& op) {
    bool real = m_real && op.obj == m_fake;  // a fake tensor Dynamo traces
    const at::Tensor& t = real ? THPVariable_Unpack(m_real.get()) : op.tensor();
    ClassifyInput ci;
    ci.plainObj = real ? m_real.get() : op.obj;
    ci.plain = &t;
    ci.tensors = &m_op.agent().tensors();
    ci.ownerLookup = parameterLookup();
    OriginFacts& f = ci.facts;
    f.provenance = m_op.agent().tensors().provenance(t);
    std::string lastStep;
    if (const Provenance* last = m_op.agent().tensors().lastStep(t);
        last && f.provenance && last->createdAt != f.provenance->createdAt)
        lastStep = last->evidence + m_op.agent().frames().whereOf(last->createdAt);
    f.lastStep = lastStep;
    f.attachedAt = m_op.agent().config().attachedAt;
    f.madeBeforeAttach = m_op.agent().tensors().preexisting(t);
    f.opName = m_op.info().text;
    f.copyIntoDTensor = m_op.info().isCopy && m_op.inputs().front().dtensor;
    f.insideLoadStateDict = Agent::insideLoadStateDict();
    f.phase = m_op.agent().phase();
    f.phaseLabel = Agent::threadPhaseLabel();
    Classification c = classify(std::move(ci));
    if (c.bornAsOwner)  // the record of the plain tensor carries that birth
        m_op.agent().tensors().setProvenance(t, Provenance{c.origin, c.evidence, c.createdAt});
    if (!m_traced || op.obj != m_fake) return c;
    if (c.origin == OriginClass::Unknown && real) {
        c.origin = OriginClass::InputData;
        c.evidence = "passed as input into the torch.compile'd code (a graph input)";
    }
    c.evidence += "; found while torch.compile traced it";
    return c;
}

// A tensor of per-tensor scalars in a foreach op (`_foreach_addcdiv_.Tensor`).
bool IncidentResolver::isScalarList(const Operand& op) const {
    return isForeach(m_op.info().text) && op.element < 0 && op.index > 0 && op.tensor().dim() == 1;
}

PolicyDecision IncidentResolver::decide(const Operand& op, const Classification& cls,
                                        const UserFrame& frame) {
    return m_op.agent().config().policy.decide(
        IncidentFacts{m_op.info().text, cls.origin, frame.file, frame.module, op.tensor().numel(),
                      isScalarList(op), m_op.torch().hasBatchDim(m_op.referenceFacts().mesh)});
}

// What a fix written at the incident needs, as "at=FILE:LINE; mesh=EXPR;
// dtensor=NAME[; global=NAME]" (global: the plain tensor's name is a global
// of that frame's module): the frame where the user's name for the plain operand
// lives (`held`; else the innermost user frame), and in that frame the
// name of the first DTensor operand and an expression of its mesh (a
// variable holding it, else "NAME.device_mesh"). "" when nothing is known.
std::string IncidentResolver::namesForFix(const FrameCache::Holding& held) {
    if (held.depth <= 0) return {};  // no frame holds it (or only code torch.compile traced)
    FrameCache& frames = m_op.agent().frames();
    int depth = held.depth;
    std::string out = "at=" + held.file + ":" + std::to_string(held.line);
    auto add = [&](std::string_view key, const std::string& value) {
        if (!value.empty()) out += (out.empty() ? "" : "; ") + std::string(key) + "=" + value;
    };
    for (const Operand& o : m_op.inputs()) {
        if (!o.dtensor || !o.obj) continue;
        std::string name = frames.holding(o.obj, m_op.writer(), depth).name;
        PyRef mesh = PyRef::steal(PyObject_GetAttrString(o.obj, "device_mesh"));
        if (!mesh) PyErr_Clear();
        std::string meshName = mesh ? frames.holding(mesh.get(), m_op.writer(), depth).name : "";
        if (meshName.empty() && !name.empty()) meshName = name + ".device_mesh";
        if (meshName.empty() && mesh) meshName = frames.meshVia(mesh.get(), m_op.writer(), depth);
        add("mesh", meshName);
        add("dtensor", name);
        break;
    }
    if (held.global) add("global", held.name);
    return out;
}

PyObject* IncidentResolver::resolve() {
    m_op.agent().counters().incidents.fetch_add(1, std::memory_order_relaxed);
    const Operand* plain = m_op.firstMixed();
    UserFrame frame;
    if (traceFacts(*plain) && !m_tracedFrames.empty()) {
        const Frame& f = m_tracedFrames.front();
        frame.file = m_tracedFile;
        frame.line = f.line;
        frame.stack = m_op.writer().internStack(std::span<const Frame>(&f, 1));
    } else {
        frame = m_op.agent().frames().userFrame(m_op.writer(), true);
    }
    Classification cls = classifyOperand(*plain);
    PyObject* plainObj = m_real && plain->obj == m_fake ? m_real.get() : plain->obj;
    FrameCache::Holding held = m_op.agent().frames().holding(plainObj, m_op.writer());
    if (held.name.empty() && m_traced && plain->obj == m_fake) {  // a local of traced code
        held.name = tracedLocalHolding(m_fake);
    }
    if (held.name.empty() && plainObj && plain->tensor().is_view()) {  // k_out[:, a:b] = k
        PyRef base = PyRef::steal(PyObject_GetAttrString(plainObj, "_base"));
        PyErr_Clear();
        if (base && base.get() != Py_None)
            held = m_op.agent().frames().holding(base.get(), m_op.writer());
    }
    m_plainName = held.name;
    bool byTorch = at::get_dtensor_allow_implicit_replication();
    PolicyDecision decision =
        byTorch ? PolicyDecision{Action::Replicated, 0,
                                 "torch implicit_replication(): DTensor replicates the plain "
                                 "tensor itself"}
                : decide(*plain, cls, frame);
    m_policyRule = decision.rule;

    IncidentRecord inc;
    inc.timeNs = m_op.writer().nowNs();
    inc.step = m_op.agent().step();
    inc.thread = Agent::threadIndex();
    inc.op = m_op.info().name;
    inc.operandIndex = plain->index;
    inc.plainTensor = m_recorder.tensorId(*plain, nullptr, /*identity=*/true, m_plainName);
    inc.origin = cls.origin;
    inc.evidence = m_op.writer().intern(cls.evidence);
    inc.action = decision.action;
    inc.stack = m_traced && !m_tracedFrames.empty()
                    ? m_op.writer().internStack(std::span<const Frame>(
                          m_tracedFrames.data(), std::min<size_t>(m_tracedFrames.size(), 12)))
                    : m_op.agent().frames().shortStack(m_op.writer());
    m_recorder.addOperands(inc.operands, m_op.inputs(), OperandRole::Input);
    if (std::string names = namesForFix(held); !names.empty())
        inc.detail = m_op.writer().intern(names);

    if (decision.action == Action::Observed || decision.action == Action::StrictError)
        return raiseIncident(inc, *plain, cls, frame, decision);
    return reconcile(inc, *plain, frame, decision, byTorch);
}

// Observe with another dispatch mode below meshscope: that mode may reconcile
// the op itself, so run it first and record what happened.
PyObject* IncidentResolver::observeWithModeBelow(IncidentRecord& inc, const Operand& plain,
                                                 const Classification& cls, const UserFrame& frame,
                                                 const PolicyDecision& decision, PyObject* below) {
    std::string name = Py_TYPE(below)->tp_name;
    PyObject* result = m_op.callAsCalled();
    IncidentSeq seq;
    std::string text;
    {
        PendingError pending;  // the op's exception, kept while we record
        inc.fingerprint = fingerprint(plain);
        if (result) {
            bool replicates = name.find("Promotion") != std::string::npos;
            inc.action = replicates ? Action::Replicated : Action::Observed;
            inc.outcome = Outcome::Reconciled;
            inc.promotedPlacements =
                m_op.writer().intern(replicates ? "[Replicate()]" : "by " + name);
            std::string did = !replicates ? "let the op run"
                              : name == "KerasDTensorPromotionMode"
                                  ? "replicated it: Keras' torch backend promotes a plain tensor "
                                    "that meets a DTensor with DTensor.from_local(t, mesh, "
                                    "[Replicate()] * mesh.ndim), trusting every rank to hold the "
                                    "same values (the fingerprint checks that)"
                                  : "replicated it";
            inc.policyRule =
                m_op.writer().intern(decision.rule + "; " + name + " (below meshscope) " + did);
        } else {
            inc.outcome = Outcome::Raised;
            inc.policyRule = m_op.writer().intern(decision.rule);
            if (PyObject* error = pending.normalizedValue())
                inc.error = m_op.writer().intern(exceptionText(error));
        }
        text = result ? "" : incidentText(inc, plain, cls, frame);
        seq = m_op.writer().submit(std::move(inc));
        m_recorder.recordOp(m_op.writer().nowNs(), m_op.writer().nowNs(), result, seq, m_op.info());
        if (!result) m_op.writer().flushNow();
    }
    if (result) return result;
    addNote("meshscope: " + text + "\n  recorded as incident #" + std::to_string(seq.value()) +
                " in " + m_op.writer().path().string(),
            m_traced);
    return nullptr;
}

PyObject* IncidentResolver::raiseIncident(IncidentRecord& inc, const Operand& plain,
                                          const Classification& cls, const UserFrame& frame,
                                          const PolicyDecision& decision) {
    if (decision.action == Action::Observed)
        if (PyRef below = modeBelow())
            return observeWithModeBelow(inc, plain, cls, frame, decision, below.get());
    inc.policyRule = m_op.writer().intern(decision.rule);
    inc.outcome = Outcome::Raised;
    std::string text = incidentText(inc, plain, cls, frame);
    bool strict = decision.action == Action::StrictError;
    auto submit = [&] {
        IncidentSeq seq = m_op.writer().submit(std::move(inc));
        m_op.writer().flushNow();  // on disk before the exception propagates
        return "  recorded as incident #" + std::to_string(seq.value()) + " in " +
               m_op.writer().path().string();
    };
    if (strict) {
        inc.error = m_op.writer().intern(text);
        std::string message =
            "meshscope strict: mixed torch.Tensor and DTensor: " + text + "\n" + submit();
        PyErr_SetString(g_strictError ? g_strictError : PyExc_RuntimeError, message.c_str());
        return nullptr;
    }
    PyObject* result = m_op.callAsCalled();
    if (!result) {
        std::string where;
        {
            PendingError pending;  // DTensor's own message, kept with the incident
            if (PyObject* error = pending.normalizedValue())
                inc.error = m_op.writer().intern(exceptionText(error));
            where = submit();
        }
        addNote("meshscope: " + text + "\n" + where, m_traced);
        return nullptr;
    }
    // DTensor accepted what we predicted it would reject.
    submit();
    m_op.agent().warnOnce("predict",
                          "meshscope: " + m_op.info().text +
                              " accepted a plain tensor meshscope expected it to reject; "
                              "the incident is recorded as raised");
    return result;
}

// DTensor has no sharding strategy for some ops with a Shard(batch) operand
// (index_put in the backward of an index lookup whose indices were promoted
// below autograd). The same global tensor laid out as Replicate() is always
// valid, so retry once with the promoted operands redistributed.
PyObject* IncidentResolver::retryReplicated(
    ArgEditor& editor, OpInfo& callInfo,
    const std::vector<std::pair<const Operand*, PyRef>>& sharded, const PromotionTarget& target,
    std::string& rule) {
    std::string first = pendingErrorText();
    PyErr_Clear();
    auto redistribute = [&](const Operand& operand, PyObject* value) {
        PyRef replicated =
            redistributeReplicated(m_op.torch(), value, target.mesh, target.meshNdim);
        return replicated && editor.replace(operand, replicated.get());
    };
    bool ok = true;
    for (const auto& [operand, value] : sharded)
        ok = ok && redistribute(*operand, value.get());
    ok = ok && replicateDTensorOperands(m_op, editor);  // the op's own too
    if (!ok) {
        PyErr_Clear();
        PyErr_SetString(PyExc_RuntimeError, first.c_str());
        return nullptr;
    }
    rule += "; DTensor rejected the Shard() layout (" + first.substr(0, 160) +
            "), redistributed the same global tensor to Replicate()";
    return m_op.call(callInfo.call.get(), editor.args.get(), editor.kwargs.get());
}

// The operand's replacement: the DTensor it was promoted to before (same
// global tensor in forward and backward), or a new promotion.
Promotion IncidentResolver::promote(const Plan& p, const PromotionTarget& target) {
    if (p.action == Action::Scalarized) return scalarize(p.operand->obj, p.asList);
    const at::Tensor& plain = p.operand->tensor();
    if (PyObject* cached = m_op.agent().promotions().find(plain)) {
        Promotion reused;
        reused.value = PyRef::borrow(cached);
        reused.placements =
            std::string(m_op.torch().dtensorFacts(cached, m_op.writer()).placementsText);
        return reused;
    }
    Promotion made = promoteToDTensor(m_op.torch(), p.operand->obj, p.action, target);
    if (made.value)
        m_op.agent().promotions().insert(plain, made.value.get(),
                                         p.action == Action::ShardedFromLocal);
    return made;
}

// What happens to each plain operand: the incident's decision for the first,
// each one's own policy decision for the others (a foreach op can mix optimizer
// state with a tensor of scalars), never "observe" for only some of them.
std::vector<IncidentResolver::Plan> IncidentResolver::plan(const Operand& first,
                                                           const PolicyDecision& decision,
                                                           const UserFrame& frame,
                                                           std::string& rule) {
    std::vector<Plan> plans;
    for (const Operand& op : m_op.inputs()) {
        if (!op.mixed) continue;
        PlannedOperand facts{op.index, std::nullopt, isScalarList(op), op.tensor().numel() == 1};
        if (&op != &first) facts.own = decide(op, classifyOperand(op), frame);
        plans.push_back({&op, plannedAction(decision.action, facts, rule), facts.scalarList});
    }
    return plans;
}

PyObject* IncidentResolver::reconcile(IncidentRecord& inc, const Operand& first,
                                      const UserFrame& frame, PolicyDecision decision,
                                      bool byTorch) {
    std::string rule = decision.rule;
    std::vector<Plan> plans = plan(first, decision, frame, rule);
    OpInfo* callInfo = &m_op.info();
    for (Plan& p : plans) {
        if (p.action != Action::Scalarized) continue;
        PyRef overload = scalarOverload(m_op.func(), p.asList);
        if (overload && callInfo == &m_op.info()) {
            callInfo = &m_op.torch().opInfo(overload.get(), m_op.writer());
        } else {
            p.action = Action::Replicated;
            rule += "; no Python-scalar overload of " + m_op.info().text + ", replicated instead";
        }
    }
    inc.action = byTorch ? Action::Replicated : plans.front().action;
    inc.policyRule = m_op.writer().intern(rule);

    PromotionTarget target{m_op.referenceFacts().meshObj, m_op.referenceFacts().meshNdim,
                           m_op.torch().batchMeshDim(m_op.referenceFacts().mesh),
                           decision.shardDim};
    ArgEditor editor(m_op.args(), m_op.kwargs());
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
    inc.promotedPlacements = m_op.writer().intern(placements);

    int64_t start = m_op.writer().nowNs();
    PyObject* result = nullptr;
    OpFrame opFrame(m_op.agent(),
                    m_op.inputs());  // the promoted op's redistributions are its collectives
    if (!error.empty()) {            // let PyTorch raise its own error for the original op
        result = m_op.callAsCalled();
    } else if (byTorch) {
        result = m_op.callAsCalled();
    } else {
        result = m_op.call(callInfo->call.get(), editor.args.get(), editor.kwargs.get());
        if (!result && !sharded.empty())
            result = retryReplicated(editor, *callInfo, sharded, target, rule);
    }
    opFrame.ran();
    injectedFault("reconcile");
    inc.policyRule = m_op.writer().intern(rule);
    int64_t end = m_op.writer().nowNs();
    if (!result && error.empty()) error = pendingErrorText();
    inc.outcome = result && error.empty() ? Outcome::Reconciled : Outcome::Failed;
    if (!error.empty()) inc.error = m_op.writer().intern(error);
    Action action = inc.action;
    IncidentSeq seq;
    bool raised;
    {
        PendingError pending;  // the op's exception, kept while we record
        raised = pending.active();
        seq = m_op.writer().submit(std::move(inc));
        opFrame.recorded(m_recorder.recordOp(start, end, result, seq, *callInfo));
        if (!result || !error.empty()) m_op.writer().flushNow();
    }
    if (result && error.empty()) {
        m_op.agent().counters().reconciled.fetch_add(1, std::memory_order_relaxed);
        return result;
    }
    if (!raised) return result;  // reconciliation failed, yet the original op ran
    addNote("meshscope: could not reconcile " + m_op.info().text + " by " +
            std::string(toString(action)) + " (" + error + "); recorded as incident #" +
            std::to_string(seq.value()) + " in " + m_op.writer().path().string());
    return nullptr;
}

bool IncidentResolver::traceFacts(const Operand& plain) {
    if (!plain.obj || !plain.tensor().key_set().has(c10::DispatchKey::Python)) return false;
    std::optional<TracedFrames> traced = tracedFrames(m_op.writer());
    if (!traced) return false;
    m_traced = true;
    m_tracedFrames = std::move(traced->frames);
    m_tracedFile = std::move(traced->innermostFile);
    m_fake = plain.obj;
    m_real = realTensorOf(plain.obj);
    return true;
}

uint64_t IncidentResolver::fingerprint(const Operand& op) const {
    if (m_real && op.obj == m_fake) return fingerprintTensor(THPVariable_Unpack(m_real.get()));
    return fingerprintTensor(op.tensor());
}

PyObject* IncidentResolver::substitutePromoted() {
    ArgEditor editor(m_op.args(), m_op.kwargs());
    bool any = false;
    for (const Operand& op : m_op.inputs())
        if (PyObject* promoted = m_op.agent().promotions().find(op.tensor()))
            any = editor.replace(op, promoted) || any;
    if (!any) return nullptr;
    RankWriter& writer = m_op.writer();
    int64_t start = writer.nowNs();
    PyObject* result = m_op.call(m_op.info().call.get(), editor.args.get(), editor.kwargs.get());
    int64_t end = writer.nowNs();
    PendingError pending;  // the op's own exception survives its record
    m_recorder.recordOp(start, end, result, IncidentSeq{}, m_op.info());
    return result;
}

bool replicateDTensorOperands(OpContext& op, ArgEditor& editor) {
    for (const Operand& o : op.inputs()) {
        if (!o.dtensor || (op.info().isInPlace && o.index == 0)) continue;
        DTensorFacts facts = op.torch().dtensorFacts(o.obj, op.writer());
        PyRef replicated = redistributeReplicated(op.torch(), o.obj, facts.meshObj, facts.meshNdim);
        if (!replicated || !editor.replace(o, replicated.get())) return false;
    }
    return true;
}

void setStrictErrorType(PyObject* type) {
    Py_XINCREF(type);
    Py_XDECREF(g_strictError);
    g_strictError = type;
}

}  // namespace meshscope::capture
