#include "capture/agent/collective_tracker.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <pythread.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>

#include "capture/agent/agent.h"
#include "capture/agent/failures.h"
#include "capture/agent/op_handler.h"
#include "capture/agent/torch_types.h"
#include "core/analysis/fix_suggestion.h"
#include "core/model/settings.h"

namespace meshscope::capture {
namespace {

std::string humanBytes(int64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    if (bytes < (int64_t(1) << 20)) return fmt::format("{:.1f} KiB", double(bytes) / 1024);
    return fmt::format("{:.1f} MiB", double(bytes) / double(int64_t(1) << 20));
}

// Whether `work` is complete, and the error it completed with ("" when
// none). A backend that cannot say is asked again later.
struct WorkState {
    bool done = false;
    std::string error;
};
WorkState ask(c10d::Work& work) {
    WorkState state;
    try {
        state.done = work.isCompleted();
        if (state.done)
            if (std::exception_ptr e = work.exception()) try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    state.error = x.what();
                } catch (...) {
                    state.error = "an error the backend did not describe";
                }
    } catch (...) {
        state.done = false;
    }
    return state;
}

WorkState ask(const c10::Event& event) {
    WorkState state;
    try {
        state.done = event.query();
    } catch (...) {  // a device gone (the driver shutting down): not known, asked again
        state.done = false;
    }
    return state;
}

const void* storageKey(const at::Tensor& t) {
    return t.defined() && t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
}

// A copy for callers outside the lock, holding no reference to the work or
// result: the entry keeps its own, so dropping the copy's here (under the
// lock) never destroys either, and the caller never does.
TrackedCollective detached(const TrackedCollective& c) {
    TrackedCollective copy = c;
    copy.work.reset();
    copy.streamDone.reset();
    copy.result = c10::weak_intrusive_ptr<c10::StorageImpl>(c10::intrusive_ptr<c10::StorageImpl>());
    return copy;
}

}  // namespace

std::string TrackedCollective::describe() const {
    std::string text = kind + " on " + (group.empty() ? "its process group" : group);
    if (bytes > 0) text += ", " + humanBytes(bytes);
    if (seq) text += fmt::format(", its collective #{}", position());
    return text;
}

CollectiveTracker::Released::~Released() {
    for (const Ended& e : ended)
        m_tracker.submit(e);
    // ended and works go now, outside the tracker's lock
}

void CollectiveTracker::end(Table::iterator it, CollectiveState state, int64_t endNs,
                            std::string error, Released& released) {
    TrackedCollective& c = it->second;
    if (c.resultKey) {
        auto byResult = m_byResult.find(c.resultKey);
        if (byResult != m_byResult.end() && byResult->second == it->first)
            m_byResult.erase(byResult);
    }
    released.ended.push_back(Ended{std::move(c), state, endNs, std::move(error)});
    m_live.erase(it);
}

CollectiveRecord CollectiveTracker::libraryRecord(RankWriter& w, std::string_view kind,
                                                  const std::string& group, int64_t bytes,
                                                  int64_t startNs, int64_t endNs, uint32_t thread,
                                                  int64_t step) {
    CollectiveRecord r;
    r.kind = w.intern(kind.empty() ? std::string_view("unknown") : kind);
    r.group = w.intern(group);
    r.bytes = bytes;
    r.startNs = startNs;
    r.endNs = std::max(startNs, endNs);
    r.issuedNs = r.endNs;
    r.thread = thread;
    r.step = step;
    return r;
}

void CollectiveTracker::submit(const Ended& e) {
    const TrackedCollective& c = e.collective;
    RankWriter& w = m_agent.writer();
    CollectiveRecord r;
    r.seq = c.seq;
    r.op = c.op;
    r.kind = c.kindId;
    r.group = c.groupId;
    r.bytes = c.bytes;
    r.startNs = c.startNs;
    r.endNs = std::max(e.endNs, c.startNs);
    r.issuedNs = std::clamp(c.issuedNs, c.startNs, r.endNs);
    r.thread = c.thread;
    r.step = c.step;
    r.stack = c.stack;
    r.state = e.state;
    if (!e.error.empty()) r.error = w.intern(e.error);
    m_agent.collectives().agentCollective(std::move(r), c.op ? 0 : c.enclosing);
}

CollectiveTracker::Id CollectiveTracker::issue(CollectiveIssue what, uint64_t enclosingToken) {
    RankWriter& w = m_agent.writer();
    TrackedCollective c;
    c.seq = w.reserveCollectiveSeq();
    c.kind = std::move(what.kind);
    c.group = std::move(what.group);
    c.kindId = w.intern(c.kind);
    c.groupId = w.intern(c.group.empty() ? std::string("process group") : c.group);
    c.bytes = what.bytes;
    c.startNs = what.startNs ? what.startNs : w.nowNs();
    c.issuedNs = c.startNs;
    c.step = m_agent.step();
    c.thread = Agent::threadIndex();
    c.pythonThread = PyThread_get_thread_ident();
    UserFrame frame = m_agent.frames().userFrame(w);
    c.stack = frame.stack;
    c.file = std::move(frame.file);
    c.line = frame.line;
    c.enclosing = enclosingToken;
    Id id = c.seq;
    Released released(*this);
    std::lock_guard lock(m_mutex);
    if (m_live.size() >= kMaxTracked) {  // followed no further: recorded as issued
        released.ended.push_back(Ended{std::move(c), CollectiveState::Unwaited, c.startNs,
                                       "not followed: too many collectives in flight"});
        return Id{};
    }
    m_live.emplace(id.value(), std::move(c));
    return id;
}

void CollectiveTracker::issued(Id id, c10::intrusive_ptr<c10d::Work> work, bool completesOnWait,
                               const at::Tensor& result, OpSeq op, uint64_t own,
                               std::shared_ptr<c10::Event> streamDone) {
    if (!id) return;
    if (own) m_agent.collectives().collectiveIssued(own, id);
    int64_t now = m_agent.writer().nowNs();
    bool onDevice = (work && !completesOnWait) || (!work && streamDone);
    {
        Released released(*this);
        std::lock_guard lock(m_mutex);
        auto it = m_live.find(id.value());
        if (it == m_live.end()) return;
        TrackedCollective& c = it->second;
        c.returned = true;
        c.completesOnWait = completesOnWait;
        c.issuedNs = now;
        c.op = op;
        if (const void* key = storageKey(result)) {
            c.result = result.storage().getWeakStorageImpl();
            c.resultKey = key;
            m_byResult[key] = id.value();
        }
        if (work)  // asked after its wait, and by the monitor's next poll
            c.work = std::move(work);
        else if (streamDone)  // asked by the monitor until its stream passed the mark
            c.streamDone = std::move(streamDone);
        else if (!c.resultKey)  // nothing to wait for: done when the call returned
            end(it, CollectiveState::Completed, now, "", released);
    }
    // complete on the device: the monitor polls from now on, not a while later
    if (onDevice)
        if (CollectiveMonitor* monitor = m_agent.monitor()) monitor->workPending();
}

CollectiveTracker::Id CollectiveTracker::waitingForWork(const c10d::Work* work) {
    if (!work) return Id{};
    std::lock_guard lock(m_mutex);
    for (auto& [seq, c] : m_live)
        if (c.work.get() == work) {
            c.waiter = PyThread_get_thread_ident();
            return c.seq;
        }
    return Id{};
}

CollectiveTracker::Id CollectiveTracker::waitingForTensor(const at::Tensor& tensor) {
    const void* key = storageKey(tensor);
    if (!key) return Id{};
    std::lock_guard lock(m_mutex);
    auto found = m_byResult.find(key);
    if (found == m_byResult.end()) return Id{};
    auto it = m_live.find(found->second);
    if (it == m_live.end() || it->second.result.expired()) return Id{};
    it->second.waiter = PyThread_get_thread_ident();
    return it->second.seq;
}

void CollectiveTracker::waited(Id id) {
    if (!id) return;
    c10::intrusive_ptr<c10d::Work> work;  // destroyed last, outside the lock
    bool onWait = false;
    {
        Released released(*this);
        std::lock_guard lock(m_mutex);
        auto it = m_live.find(id.value());
        if (it == m_live.end()) return;
        it->second.waiter = 0;
        it->second.waited = true;
        onWait = it->second.completesOnWait;
        if (!it->second.work)
            end(it, CollectiveState::Completed, m_agent.writer().nowNs(), "", released);
        else
            work = it->second.work;
    }
    if (!work) return;
    // gloo: complete once wait() returned; NCCL: on the device, perhaps later
    WorkState state = ask(*work);
    if (!state.done && !onWait) return;
    Released released(*this);
    std::lock_guard lock(m_mutex);
    auto it = m_live.find(id.value());
    if (it != m_live.end())
        end(it, state.error.empty() ? CollectiveState::Completed : CollectiveState::Failed,
            m_agent.writer().nowNs(), state.error, released);
}

std::string CollectiveTracker::failed(Id id, const std::string& error, std::string_view what) {
    RankWriter& w = m_agent.writer();
    TrackedCollective c;
    bool tracked = false;
    {
        Released released(*this);  // the record goes before the incident
        std::lock_guard lock(m_mutex);
        auto it = id ? m_live.find(id.value()) : m_live.end();
        if (it != m_live.end()) {
            c = detached(it->second);
            tracked = true;
            end(it, CollectiveState::Failed, w.nowNs(), error, released);
        }
    }
    if (!tracked) {
        c.kind = std::string(what);
        c.kindId = w.intern(c.kind);
        c.thread = Agent::threadIndex();
        c.step = m_agent.step();
    }
    IncidentSeq seq =
        recordIncident(c, IncidentKind::CollectiveError, error, m_agent.frames().shortStack(w), "");
    UserFrame frame = m_agent.frames().userFrame(w);
    FixSuggestion fix = fixForFailure(IncidentKind::CollectiveError, c.kind, {}, error);
    std::string described =
        tracked ? c.describe() + (c.file.empty() ? "" : ", issued" + c.where()) : c.kind;
    return failureNote(IncidentKind::CollectiveError, described, frame.where(), error, fix.summary,
                       fix.code, seq, w.path().string());
}

void CollectiveTracker::ended(Id id, const std::string& why) {
    if (!id) return;
    Released released(*this);
    std::lock_guard lock(m_mutex);
    auto it = m_live.find(id.value());
    if (it != m_live.end())
        end(it, CollectiveState::Failed, m_agent.writer().nowNs(), why, released);
}

std::optional<TrackedCollective> CollectiveTracker::latestOnThisThread() {
    uint32_t thread = Agent::threadIndex();
    std::lock_guard lock(m_mutex);
    const TrackedCollective* latest = nullptr;
    for (const auto& [seq, c] : m_live)
        if (c.thread == thread && (!latest || c.seq.value() > latest->seq.value())) latest = &c;
    if (!latest) return std::nullopt;
    return detached(*latest);
}

std::shared_ptr<c10::Event> CollectiveTracker::streamMark(std::optional<c10::Device> device) {
    if (!device || device->is_cpu() || device->is_meta()) return {};
    try {
        const c10::impl::DeviceGuardImplInterface* impl =
            c10::impl::getDeviceGuardImpl(device->type());
        auto event = std::make_shared<c10::Event>(device->type());
        event->record(impl->getStream(*device));
        return event;
    } catch (...) {  // no events on this backend (or none now): complete when the call returned
        return {};
    }
}

bool CollectiveTracker::poll() {
    struct Ask {
        int64_t seq;
        c10::intrusive_ptr<c10d::Work> work;  // either this
        std::shared_ptr<c10::Event> event;    // or this; both outlive the lock
    };
    std::vector<Ask> asks;
    {
        Released released(*this);
        std::lock_guard lock(m_mutex);
        int64_t now = m_agent.writer().nowNs();
        for (auto it = m_live.begin(); it != m_live.end();) {
            TrackedCollective& c = it->second;
            if (c.work || c.streamDone) {
                asks.push_back({it->first, c.work, c.streamDone});
                ++it;
            } else if (c.returned && c.resultKey && !c.waiter && c.result.expired()) {
                // its result is gone and nothing waited for it
                end(it++, CollectiveState::Unwaited, now, "", released);
            } else {
                ++it;
            }
        }
    }
    if (asks.empty()) return false;
    std::vector<std::pair<int64_t, WorkState>> answers;
    for (const Ask& a : asks) {
        WorkState state = a.work ? ask(*a.work) : ask(*a.event);
        if (state.done) answers.emplace_back(a.seq, std::move(state));
    }
    std::vector<std::pair<TrackedCollective, std::string>> failures;
    {
        Released released(*this);
        std::lock_guard lock(m_mutex);
        int64_t now = m_agent.writer().nowNs();
        for (auto& [seq, state] : answers) {
            auto it = m_live.find(seq);
            if (it == m_live.end()) continue;
            bool failed = !state.error.empty();
            if (failed) failures.emplace_back(detached(it->second), state.error);
            end(it, failed ? CollectiveState::Failed : CollectiveState::Completed, now, state.error,
                released);
        }
    }
    // an error the backend raised asynchronously: nobody may ever wait for it
    for (const auto& [c, error] : failures)
        recordIncident(c, IncidentKind::CollectiveError, error, c.stack, "");
    return asks.size() > answers.size();
}

std::vector<TrackedCollective> CollectiveTracker::overdue(int64_t nowNs, int64_t ns) {
    std::lock_guard lock(m_mutex);
    std::vector<TrackedCollective> out;
    for (auto& [seq, c] : m_live)
        if (!c.reported && nowNs - c.startNs > ns) {
            c.reported = true;
            out.push_back(detached(c));
        }
    return out;
}

void CollectiveTracker::settle(std::chrono::milliseconds budget) {
    auto until = std::chrono::steady_clock::now() + budget;
    while (poll() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void CollectiveTracker::endAll(const std::string& why, IncidentKind kind) {
    // The incident goes to the latest collective each thread issued: the one
    // it was in. Earlier ones still pending (NCCL's, waited for on the host,
    // their completion not yet reported) are recorded pending, unblamed.
    std::map<uint32_t, TrackedCollective> stuck;  // by thread
    {
        Released released(*this);
        std::lock_guard lock(m_mutex);
        int64_t now = m_agent.writer().nowNs();
        for (auto it = m_live.begin(); it != m_live.end();) {
            TrackedCollective& c = it->second;
            // a functional collective whose result nobody waited for and no
            // work to ask: whether it completed is not known
            bool unwaited = !c.work && !c.streamDone && c.returned && !c.waiter;
            auto [latest, fresh] = stuck.try_emplace(c.thread);
            if (!unwaited && (fresh || c.seq.value() > latest->second.seq.value()))
                latest->second = detached(c);
            end(it++, unwaited ? CollectiveState::Unwaited : CollectiveState::Pending, now,
                unwaited ? "" : why, released);
        }
    }
    for (const auto& [thread, c] : stuck) {
        // a hang is reported once; a failure (an abort) is news
        if (!c.seq || (c.reported && kind == IncidentKind::CollectiveHang)) continue;
        double waited = double(m_agent.writer().nowNs() - c.startNs) / 1e9;
        std::string text = kind == IncidentKind::CollectiveHang
                               ? fmt::format("still pending after {:.1f} s when {}", waited, why)
                               : fmt::format("pending for {:.1f} s when {}", waited, why);
        recordIncident(c, kind, text, c.stack, "");
    }
}

IncidentSeq CollectiveTracker::recordIncident(const TrackedCollective& c, IncidentKind kind,
                                              const std::string& error, StackId stack,
                                              const std::string& detail) {
    RankWriter& w = m_agent.writer();
    IncidentRecord inc;
    inc.kind = kind;
    inc.timeNs = w.nowNs();
    inc.step = c.seq ? c.step : m_agent.step();
    inc.thread = c.thread;
    inc.op = c.kindId;
    inc.operandIndex = c.seq ? int32_t(std::min<int64_t>(c.position(), INT32_MAX)) : -1;
    inc.evidence =
        w.intern(c.seq ? c.describe() + (c.file.empty() ? "" : ", issued" + c.where()) : c.kind);
    inc.error = w.intern(error);
    if (!detail.empty()) inc.detail = w.intern(detail);
    inc.stack = stack ? stack : c.stack;
    IncidentSeq seq = w.submit(std::move(inc));
    m_agent.counters().incidents.fetch_add(1, std::memory_order_relaxed);
    w.flushNow();
    return seq;
}

CollectiveMonitor::CollectiveMonitor(Agent& agent, double watchdogSeconds)
    : m_agent(agent), m_seconds(watchdogSeconds), m_thread([this] { run(); }) {}

CollectiveMonitor::~CollectiveMonitor() {
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

void CollectiveMonitor::workPending() {
    if (m_polling.exchange(true, std::memory_order_acq_rel)) return;  // polls already
    {
        std::lock_guard lock(m_mutex);
        m_woken = true;
    }
    m_wake.notify_one();
}

void CollectiveMonitor::run() {
    using namespace std::chrono;
    auto idle =
        m_seconds > 0
            ? std::min(kIdleInterval,
                       duration_cast<milliseconds>(duration<double>(std::max(m_seconds / 4, 0.05))))
            : kIdleInterval;
    int64_t limit = int64_t(m_seconds * 1e9);
    bool polling = false;
    for (;;) {
        {
            std::unique_lock lock(m_mutex);
            if (m_wake.wait_for(lock, polling ? kPollInterval : idle,
                                [this] { return m_stop || m_woken; }) &&
                m_stop)
                return;
            m_woken = false;
        }
        try {
            // cleared before the poll: a work handed over after it wakes us
            m_polling.store(false, std::memory_order_release);
            polling = m_agent.tracker().poll();
            if (polling) m_polling.store(true, std::memory_order_release);
            if (m_seconds <= 0) continue;
            std::vector<TrackedCollective> late =
                m_agent.tracker().overdue(m_agent.writer().nowNs(), limit);
            if (!late.empty()) reportHangs(late);
        } catch (const std::exception& e) {
            m_agent.ownError("monitor", std::string("meshscope: collective monitor: ") + e.what());
        }
    }
}

void CollectiveMonitor::reportHangs(const std::vector<TrackedCollective>& late) {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    PyGILState_STATE gil = PyGILState_Ensure();
    {
        PendingError saved;
        std::string stacks = threadStacks();
        RankWriter& w = m_agent.writer();
        for (const TrackedCollective& c : late) {
            // where the rank is blocked: the thread in its wait, else the
            // thread that issued it while the call has not returned
            unsigned long blocked = c.waiter ? c.waiter : c.returned ? 0 : c.pythonThread;
            ThreadStack at = blocked ? m_agent.frames().stackOfThread(blocked, w) : ThreadStack{};
            double waited = double(w.nowNs() - c.startNs) / 1e9;
            std::string why =
                fmt::format("pending for {:.1f} s (watchdog: {}={:g}); the training goes on",
                            waited, setting("watchdog_s").env, m_seconds);
            IncidentSeq seq = m_agent.tracker().recordIncident(c, IncidentKind::CollectiveHang, why,
                                                               at.stack, stacks);
            const std::string& where = at.where;
            std::string text = fmt::format(
                "meshscope watchdog: rank {}: {}{}{} has not completed after {:.1f} s; recorded "
                "as incident #{} in {}\nPython stacks of rank {} (most recent call last):\n{}",
                m_agent.config().rank, c.describe(), c.file.empty() ? "" : ", issued" + c.where(),
                where.empty() || where == c.where() ? "" : ", waited for" + where, waited,
                seq.value(), w.path().string(), m_agent.config().rank, stacks);
            PySys_WriteStderr("%s", "");  // flushes Python's pending stderr first
            std::fputs(text.c_str(), stderr);
            std::fflush(stderr);
        }
    }
    PyGILState_Release(gil);
}

}  // namespace meshscope::capture
