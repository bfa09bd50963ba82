#include "capture/agent/incidents/failures.h"

#include <fmt/format.h>

#include <algorithm>

#include "capture/agent/agent.h"
#include "capture/agent/interop/python_callbacks.h"
#include "capture/agent/interop/torch_types.h"
#include "capture/agent/ops/op_recorder.h"
#include "core/analysis/fix_suggestion.h"

namespace meshscope::capture {

std::string threadStacks() {
    PendingError pending;
    std::string out;
    PyObject* stacks = callback(Callback::ThreadStacks);
    PyRef text = stacks ? PyRef::steal(PyObject_CallNoArgs(stacks)) : PyRef{};
    const char* utf8 = text && PyUnicode_Check(text.get()) ? PyUnicode_AsUTF8(text.get()) : nullptr;
    out = utf8 ? utf8 : "(the Python stacks could not be read)\n";
    return out;
}

std::string failureNote(IncidentKind kind, const std::string& what, const std::string& where,
                        const std::string& error, const std::string& fixSummary,
                        const std::string& fixCode, IncidentSeq seq, const std::string& path) {
    std::string text = fmt::format("meshscope: {}: {}\n", incidentKindInfo(kind).title, what);
    if (!where.empty()) text += "  called" + where + "\n";
    if (kind == IncidentKind::DTensorError) text += "  error: " + firstLine(error, 300) + "\n";
    text += "  fix: " + fixSentence(FixSuggestion{fixSummary, fixCode, {}}) + "\n";
    text += fmt::format("  recorded as incident #{} in {}", seq.value(), path);
    return text;
}

// An attribute on the exception itself: an identity kept here could be
// reused by a later exception at the same address.
constexpr const char* kRecordedAttribute = "__meshscope_recorded__";

bool alreadyRecorded(PyObject* value) {
    if (!value) return false;
    bool recorded = PyObject_HasAttrString(value, kRecordedAttribute);
    PyErr_Clear();
    return recorded;
}

void markRecorded(PyObject* value, const std::string& note) {
    if (!value) return;
    if (PyObject_SetAttrString(value, kRecordedAttribute, Py_True) != 0) PyErr_Clear();
    PyRef text = PyRef::steal(PyUnicode_FromString(note.c_str()));
    PyRef done = PyRef::steal(PyObject_CallMethod(value, "add_note", "O", text.get()));
    PyErr_Clear();
}

std::string exceptionText(PyObject* value) {
    PyRef text = PyRef::steal(PyObject_Str(value));
    const char* utf8 = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
    std::string out = std::string(Py_TYPE(value)->tp_name) + ": " + (utf8 ? utf8 : "");
    PyErr_Clear();
    return out;
}

namespace {

std::string valueText(const c10::IValue& v) {
    if (v.isBool()) return v.toBool() ? "True" : "False";
    if (v.isInt()) return std::to_string(v.toInt());
    if (v.isDouble()) return fmt::format("{:g}", v.toDouble());
    if (v.isString()) {  // quoted as Python; one a plain quote cannot hold is left out
        const std::string& text = v.toStringRef();
        if (text.find_first_of("'\\\n\r") != std::string::npos) return {};
        return "'" + text + "'";
    }
    if (v.isIntList()) {
        std::string out = "[";
        for (int64_t i : v.toIntVector())
            out += (out.size() > 1 ? ", " : "") + std::to_string(i);
        return out + "]";
    }
    if (v.isScalar()) return fmt::format("{:g}", v.toScalar().toDouble());
    if (v.isDevice()) return "'" + v.toDevice().str() + "'";
    return {};  // a type a fix does not reason about
}

}  // namespace

std::string argumentsText(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                          size_t max) {
    std::string out;
    const auto& declared = schema.arguments();
    for (size_t i = 0; i < args.size() && i < declared.size(); ++i) {
        const c10::IValue& v = args[i];
        if (v.isNone() || v.isTensor() || v.isTensorList() || (v.isList() && !v.isIntList()))
            continue;
        std::string text = valueText(v);
        if (text.empty()) continue;
        out += (out.empty() ? "" : ", ") + declared[i].name() + "=" + text;
    }
    if (out.size() > max) out = out.substr(0, max) + "...";
    return out;
}

std::string recordFailureIncident(OpContext& op, IncidentKind kind, const std::string& error,
                                  const std::string& args) {
    Agent& agent = op.agent();
    RankWriter& writer = op.writer();
    TorchTypes& torch = op.torch();
    const OpInfo& info = op.info();
    agent.counters().incidents.fetch_add(1, std::memory_order_relaxed);
    UserFrame frame = agent.frames().userFrame(writer);
    std::vector<std::string> placements;
    std::string operands;
    for (const Operand& o : op.inputs()) {
        if (!o.dtensor) continue;
        DTensorFacts facts = torch.dtensorFacts(o.obj, writer);
        placements.emplace_back(facts.placementsText);
        operands += fmt::format("{}{} {} {} on {}", operands.empty() ? "" : ", ", o.index,
                                dtypeName(o.tensor().scalar_type()) +
                                    shapeText(o.tensor().sizes().data(), o.tensor().dim()),
                                facts.placementsText, torch.meshText(facts.mesh));
    }
    IncidentRecord inc;
    inc.kind = kind;
    inc.timeNs = writer.nowNs();
    inc.step = agent.step();
    inc.thread = Agent::threadIndex();
    inc.op = info.name;
    std::string what =
        operands.empty() ? info.text : info.text + " with DTensor operands " + operands;
    inc.evidence = writer.intern(what);
    inc.error = writer.intern(error);
    if (!args.empty()) inc.detail = writer.intern(args);
    inc.action = Action::Observed;
    inc.outcome = Outcome::Raised;
    inc.stack = agent.frames().shortStack(writer);
    // the first DTensor operand by the user's name for it, which the fix uses
    int ndim = -1;
    std::string name;
    for (const Operand& o : op.inputs())
        if (o.dtensor) {
            ndim = int(o.tensor().dim());
            if (o.obj) name = agent.frames().heldAs(o.obj, writer);
            if (!name.empty()) OpRecorder(op).tensorId(o, nullptr, /*identity=*/true, name);
            break;
        }
    OpRecorder(op).addOperands(inc.operands, op.inputs(), OperandRole::Input);
    IncidentSeq seq = writer.submit(std::move(inc));
    writer.flushNow();  // on disk before the exception propagates
    FailedCall call{info.text, placements, ndim, args, name};
    FixSuggestion fix = fixForFailure(kind, call, error);
    return failureNote(kind, what, frame.where(), error, fix.summary, fix.code, seq,
                       writer.path().string());
}

void checkScalarRead(OpContext& op, std::optional<double> value) {
    PendingError pending;
    try {
        if (op.reference() && isPartial(op.referenceFacts()))
            recordPartialRead(op, op.referenceFacts(), "float()/item()", value);
    } catch (const std::exception& e) {
        op.agent().ownError("record", std::string("could not record a partial read: ") + e.what());
    }
}

bool isPartial(const DTensorFacts& facts) {
    return facts.placementsText.find("Partial") != std::string_view::npos;
}

void recordPartialRead(OpContext& op, const DTensorFacts& facts, std::string_view how,
                       std::optional<double> value) {
    Agent& agent = op.agent();
    RankWriter& writer = op.writer();
    agent.counters().incidents.fetch_add(1, std::memory_order_relaxed);
    UserFrame frame = agent.frames().userFrame(writer);
    std::string what = fmt::format("{} of a DTensor {} on {}", how, facts.placementsText,
                                   op.torch().meshText(facts.mesh));
    std::string read =
        value ? fmt::format("rank {} read {:.6g}", agent.config().rank, *value) : std::string();
    IncidentRecord inc;
    inc.kind = IncidentKind::PartialRead;
    inc.timeNs = writer.nowNs();
    inc.step = agent.step();
    inc.thread = Agent::threadIndex();
    inc.op = op.info().name;
    inc.evidence = writer.intern(what);
    if (!read.empty()) inc.detail = writer.intern(read);
    inc.action = Action::Observed;
    inc.outcome = Outcome::Raised;
    inc.stack = agent.frames().shortStack(writer);
    OpRecorder(op).addOperands(inc.operands, op.inputs(), OperandRole::Input);
    IncidentSeq seq = writer.submit(std::move(inc));
    // said once per call site while the job runs: the value is already in a log line
    agent.warnOnce("partial-read" + frame.where(),
                   fmt::format("meshscope: rank {}: {}{} gives this rank's unreduced share{}, "
                               "not the value; call full_tensor() on every rank first (recorded "
                               "as incident #{})",
                               agent.config().rank, what, frame.where(),
                               value ? fmt::format(" ({:.6g})", *value) : "", seq.value()));
}

}  // namespace meshscope::capture
