#include "capture/agent/failures.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>

#include "capture/agent/agent.h"
#include "capture/agent/op_handler.h"
#include "capture/agent/torch_types.h"
#include "core/analysis/fix_suggestion.h"

namespace meshscope::capture {
namespace {

thread_local int t_scope = 0;
thread_local std::vector<uint64_t> t_scoped;  // entries ending with the outermost scope

std::string humanBytes(int64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    if (bytes < (int64_t(1) << 20)) return fmt::format("{:.1f} KiB", double(bytes) / 1024);
    return fmt::format("{:.1f} MiB", double(bytes) / double(int64_t(1) << 20));
}

// Whether a c10d collective is done: its work completed or gone. The strong
// reference taken to ask goes into `held`, released after the caller
// unlocked (PendingCollectives::Released).
bool done(const PendingCollective& e, std::vector<c10::intrusive_ptr<c10d::Work>>& held) {
    if (!e.hasWork) return false;
    if (e.work.expired()) return true;
    c10::intrusive_ptr<c10d::Work> work = e.work.lock();
    if (!work) return true;
    held.push_back(work);
    try {
        return work->isCompleted();
    } catch (...) {  // a backend that cannot say: done when gone
        return false;
    }
}

// A copy for a caller, without the work: the registry's entry keeps its own
// weak reference, so dropping the copy's here (m_mutex held) never destroys
// the Work, and the caller, on whatever thread, never does either.
PendingCollective detached(const PendingCollective& e) {
    PendingCollective copy = e;
    copy.work = c10::weak_intrusive_ptr<c10d::Work>(c10::intrusive_ptr<c10d::Work>());
    return copy;
}

}  // namespace

std::string PendingCollective::describe() const {
    std::string text = kind + " on " + (group.empty() ? "its process group" : group);
    if (bytes > 0) text += ", " + humanBytes(bytes);
    if (position >= 0) text += fmt::format(", its collective #{}", position);
    return text;
}

uint64_t PendingCollectives::begin(PendingCollective& entry) {
    Released released;  // after the lock (Released)
    std::lock_guard lock(m_mutex);
    prune(released);
    entry.id = m_nextId++;
    entry.position = m_positions++;
    m_entries.push_back(entry);
    return entry.id;
}

void PendingCollectives::attach(uint64_t id, StackId stack, const std::string& where,
                                const c10::intrusive_ptr<c10d::Work>& work) {
    std::lock_guard lock(m_mutex);
    for (PendingCollective& e : m_entries)
        if (e.id == id) {
            e.stack = stack;
            e.where = where;
            if (work) {
                e.work = c10::weak_intrusive_ptr<c10d::Work>(work);
                e.hasWork = true;
            }
        }
}

void PendingCollectives::end(uint64_t id) {
    Released released;
    std::lock_guard lock(m_mutex);
    removeIf([id](const PendingCollective& e) { return e.id == id; }, released);
}

template <typename Pred>
void PendingCollectives::removeIf(Pred pred, Released& released) {
    auto keep = std::stable_partition(m_entries.begin(), m_entries.end(),
                                      [&](const PendingCollective& e) { return !pred(e); });
    std::move(keep, m_entries.end(), std::back_inserter(released.entries));
    m_entries.erase(keep, m_entries.end());
}

void PendingCollectives::enterScope() {
    ++t_scope;
}

void PendingCollectives::leaveScope() {
    if (--t_scope > 0 || t_scoped.empty()) return;
    std::vector<uint64_t> ids;
    ids.swap(t_scoped);
    Released released;
    std::lock_guard lock(m_mutex);
    removeIf(
        [&](const PendingCollective& e) {
            return std::find(ids.begin(), ids.end(), e.id) != ids.end();
        },
        released);
}

void PendingCollectives::abandonScope() {
    if (--t_scope <= 0) t_scoped.clear();
}

void PendingCollectives::endWithScope(uint64_t id) {
    if (t_scope > 0)
        t_scoped.push_back(id);
    else
        end(id);
}

std::optional<PendingCollective> PendingCollectives::latestScoped() {
    std::lock_guard lock(m_mutex);
    for (auto id = t_scoped.rbegin(); id != t_scoped.rend(); ++id)
        for (const PendingCollective& e : m_entries)
            if (e.id == *id) return detached(e);
    return std::nullopt;
}

void PendingCollectives::prune(Released& released) {
    removeIf([&](const PendingCollective& e) { return done(e, released.works); }, released);
}

std::vector<PendingCollective> PendingCollectives::overdue(int64_t nowNs, int64_t ns) {
    Released released;
    std::lock_guard lock(m_mutex);
    prune(released);
    std::vector<PendingCollective> out;
    for (PendingCollective& e : m_entries)
        if (!e.reported && nowNs - e.startNs > ns) {
            e.reported = true;
            out.push_back(detached(e));
        }
    return out;
}

std::vector<PendingCollective> PendingCollectives::unreported() {
    Released released;
    std::lock_guard lock(m_mutex);
    prune(released);
    std::vector<PendingCollective> out;
    for (PendingCollective& e : m_entries)
        if (!e.reported) {
            e.reported = true;
            out.push_back(detached(e));
        }
    return out;
}

std::optional<PendingCollective> PendingCollectives::forWork(const c10d::Work* work) {
    Released released;
    std::lock_guard lock(m_mutex);
    for (const PendingCollective& e : m_entries)
        if (e.hasWork && !e.work.expired()) {
            released.works.push_back(e.work.lock());
            if (released.works.back() && released.works.back().get() == work) return detached(e);
        }
    return std::nullopt;
}

Watchdog::Watchdog(Agent& agent, double seconds) : m_agent(agent), m_seconds(seconds) {
    if (seconds > 0) m_thread = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    if (!m_thread.joinable()) return;
    // the thread may be waiting for the GIL this thread holds
    if (Py_IsInitialized() && PyGILState_Check()) {
        Py_BEGIN_ALLOW_THREADS m_thread.join();
        Py_END_ALLOW_THREADS
    } else {
        m_thread.join();
    }
}

void Watchdog::run() {
    using namespace std::chrono;
    auto tick = duration_cast<milliseconds>(duration<double>(std::clamp(m_seconds / 4, 0.05, 1.0)));
    int64_t limit = int64_t(m_seconds * 1e9);
    for (;;) {
        {
            std::unique_lock lock(m_mutex);
            if (m_wake.wait_for(lock, tick, [this] { return m_stop; })) return;
        }
        std::vector<PendingCollective> late =
            m_agent.pending().overdue(m_agent.writer().nowNs(), limit);
        if (late.empty()) continue;
        if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
        PyGILState_STATE gil = PyGILState_Ensure();
        std::string stacks = threadStacks();
        for (const PendingCollective& p : late) {
            double waited = double(m_agent.writer().nowNs() - p.startNs) / 1e9;
            std::string why = fmt::format(
                "pending for {:.1f} s (watchdog: MESHSCOPE_WATCHDOG_S={:g}); the training goes on",
                waited, m_seconds);
            IncidentSeq seq = recordHang(m_agent, p, why, stacks);
            std::string text = fmt::format(
                "meshscope watchdog: rank {}: {}{} has not completed after {:.1f} s; recorded as "
                "incident #{} in {}\nPython stacks of rank {} (most recent call last):\n{}",
                m_agent.config().rank, p.describe(), p.where, waited, seq.value(),
                m_agent.writer().path().string(), m_agent.config().rank, stacks);
            PySys_WriteStderr("%s", "");  // flushes Python's pending stderr first
            std::fputs(text.c_str(), stderr);
            std::fflush(stderr);
        }
        PyGILState_Release(gil);
    }
}

std::string threadStacks() {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    std::string out;
    PyRef module = PyRef::steal(PyImport_ImportModule("meshscope._attach"));
    PyRef text = module ? PyRef::steal(PyObject_CallMethod(module.get(), "_thread_stacks", nullptr))
                        : PyRef{};
    const char* utf8 = text && PyUnicode_Check(text.get()) ? PyUnicode_AsUTF8(text.get()) : nullptr;
    out = utf8 ? utf8 : "(the Python stacks could not be read)\n";
    PyErr_Clear();
    PyErr_Restore(type, value, trace);
    return out;
}

IncidentSeq recordHang(Agent& agent, const PendingCollective& p, const std::string& why,
                       const std::string& stacks) {
    RankWriter& w = agent.writer();
    IncidentRecord inc;
    inc.kind = IncidentKind::CollectiveHang;
    inc.timeNs = w.nowNs();
    inc.step = p.step;
    inc.thread = p.thread;
    inc.op = w.intern(p.kind);
    inc.operandIndex = int32_t(std::min<int64_t>(p.position, INT32_MAX));
    inc.evidence = w.intern(p.describe());
    inc.error = w.intern(why);
    if (!stacks.empty()) inc.detail = w.intern(stacks);
    inc.stack = p.stack;
    IncidentSeq seq = w.submit(std::move(inc));
    agent.counters().incidents.fetch_add(1, std::memory_order_relaxed);
    w.flushNow();
    return seq;
}

void recordStillPending(Agent& agent, const std::string& why) {
    for (const PendingCollective& p : agent.pending().unreported()) {
        double waited = double(agent.writer().nowNs() - p.startNs) / 1e9;
        recordHang(agent, p, fmt::format("still pending after {:.1f} s when {}", waited, why), "");
    }
}

std::string failureNote(IncidentKind kind, const std::string& what, const std::string& where,
                        const std::string& error, const std::string& fixSummary,
                        const std::string& fixCode, IncidentSeq seq, const std::string& path) {
    std::string text = fmt::format("meshscope: {}: {}\n", incidentKindInfo(kind).title, what);
    if (!where.empty()) text += "  called" + where + "\n";
    if (kind == IncidentKind::DTensorError) text += "  error: " + firstLine(error, 300) + "\n";
    text += "  fix: " + fixSummary + (fixCode.empty() ? "" : ", e.g. " + fixCode) + "\n";
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

// OpHandler's part in failures: the incident of an op that raised.
std::string OpHandler::recordFailure(IncidentKind kind, const std::string& error,
                                     const std::string& evidence, int64_t position) {
    m_agent.counters().incidents.fetch_add(1, std::memory_order_relaxed);
    UserFrame frame = m_agent.frames().userFrame(m_writer);
    std::vector<std::string> placements;
    std::string operands;
    for (const Operand& op : m_inputs) {
        if (!op.dtensor) continue;
        DTensorFacts facts = m_torch.dtensorFacts(op.obj, m_writer);
        placements.emplace_back(facts.placementsText);
        operands += fmt::format("{}{} {} {} on {}", operands.empty() ? "" : ", ", op.index,
                                dtypeName(op.tensor().scalar_type()) +
                                    shapeText(op.tensor().sizes().data(), op.tensor().dim()),
                                facts.placementsText, m_torch.meshText(facts.mesh));
    }
    IncidentRecord inc;
    inc.kind = kind;
    inc.timeNs = m_writer.nowNs();
    inc.step = m_agent.step();
    inc.thread = Agent::threadIndex();
    inc.op = m_info->name;
    inc.operandIndex =
        isCollectiveKind(kind) ? int32_t(std::min<int64_t>(position, INT32_MAX)) : -1;
    std::string what = !evidence.empty()  ? evidence
                       : operands.empty() ? m_info->text
                                          : m_info->text + " with DTensor operands " + operands;
    inc.evidence = m_writer.intern(what);
    inc.error = m_writer.intern(error);
    inc.action = Action::Observed;
    inc.outcome = Outcome::Raised;
    inc.stack = m_agent.frames().shortStack(m_writer);
    addOperands(inc.operands, m_inputs, OperandRole::Input);
    IncidentSeq seq = m_writer.submit(std::move(inc));
    m_writer.flushNow();  // on disk before the exception propagates
    FixSuggestion fix = fixForFailure(kind, m_info->text, placements, error);
    return failureNote(kind, what, frame.where(), error, fix.summary, fix.code, seq,
                       m_writer.path().string());
}

}  // namespace meshscope::capture
