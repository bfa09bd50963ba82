#include "capture/agent/collectives/collective_tracker.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <pthread.h>
#include <pythread.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>

#include "capture/agent/agent.h"
#include "capture/agent/incidents/failures.h"
#include "capture/agent/interop/torch_types.h"
#include "capture/agent/ops/op_context.h"
#include "core/analysis/fix_suggestion.h"
#include "core/model/settings.h"

namespace meshscope::capture {
CollectiveTracker::CollectiveTracker(Agent& agent)
    : m_agent(agent),
      m_pending([this](const EndedCollective& e) { submit(e); },
                [&agent] { return agent.writer().nowNs(); }) {}

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

void CollectiveTracker::submit(const EndedCollective& e) {
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
    return m_pending.add(std::move(c)) ? id : Id{};
}

void CollectiveTracker::issued(Id id, c10::intrusive_ptr<c10d::Work> work, bool completesOnWait,
                               const at::Tensor& result, OpSeq op, uint64_t own,
                               std::shared_ptr<c10::Event> streamDone) {
    if (!id) return;
    if (own) m_agent.collectives().collectiveIssued(own, id);
    bool onDevice = m_pending.returned(id, m_agent.writer().nowNs(), std::move(work),
                                       completesOnWait, result, op, std::move(streamDone));
    // complete on the device: the monitor polls from now on, not a while later
    if (onDevice)
        if (CollectiveMonitor* monitor = m_agent.monitor()) monitor->workPending();
}

CollectiveTracker::Id CollectiveTracker::waitingForWork(const c10d::Work* work) {
    return m_pending.waitingForWork(work, PyThread_get_thread_ident());
}

CollectiveTracker::Id CollectiveTracker::waitingForTensor(const at::Tensor& tensor) {
    return m_pending.waitingForResult(tensor, PyThread_get_thread_ident());
}

void CollectiveTracker::waited(Id id) {
    m_pending.waited(id);
}

std::string CollectiveTracker::failed(Id id, const std::string& error, std::string_view what) {
    RankWriter& w = m_agent.writer();
    // the record goes before the incident
    std::optional<TrackedCollective> tracked = m_pending.fail(id, error);
    std::optional<IncidentSeq> recorded;  // by poll(), which saw the failure first
    if (!tracked && id && m_pending.failedByPoll(id)) {
        std::unique_lock lock(m_asyncFailed);
        m_asyncFailureAdded.wait_for(lock, kAwaitAsyncFailure, [&] {
            for (const auto& [c, seq] : m_asyncFailures)
                if (c.seq == id) {
                    tracked = c, recorded = seq;
                    return true;
                }
            return false;
        });
    }
    TrackedCollective c;
    if (tracked) {
        c = std::move(*tracked);
    } else {
        c.kind = std::string(what);
        c.kindId = w.intern(c.kind);
        c.thread = Agent::threadIndex();
        c.step = m_agent.step();
    }
    IncidentSeq seq = recorded ? *recorded
                               : recordIncident(c, IncidentKind::CollectiveError, error,
                                                m_agent.frames().shortStack(w), "");
    UserFrame frame = m_agent.frames().userFrame(w);
    FixSuggestion fix = fixForFailure(IncidentKind::CollectiveError, c.kind, {}, error);
    std::string described =
        tracked ? c.describe() + (c.file.empty() ? "" : ", issued" + c.where()) : c.kind;
    return failureNote(IncidentKind::CollectiveError, described, frame.where(), error, fix.summary,
                       fix.code, seq, w.path().string());
}

void CollectiveTracker::ended(Id id, const std::string& why) {
    m_pending.fail(id, why);
}

std::optional<TrackedCollective> CollectiveTracker::latestOnThisThread() {
    return m_pending.latestOn(Agent::threadIndex());
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
    PendingCollectives::Polled polled = m_pending.poll();
    // an error the backend raised asynchronously: nobody may ever wait for it
    for (const auto& [c, error] : polled.failures) {
        IncidentSeq seq = recordIncident(c, IncidentKind::CollectiveError, error, c.stack, "");
        {
            std::lock_guard lock(m_asyncFailed);
            m_asyncFailures.emplace_back(c, seq);
            if (m_asyncFailures.size() > kAsyncFailuresKept) m_asyncFailures.pop_front();
        }
        m_asyncFailureAdded.notify_all();
    }
    return polled.stillOnDevice;
}

std::vector<TrackedCollective> CollectiveTracker::overdue(int64_t nowNs, int64_t ns) {
    return m_pending.overdue(nowNs, ns);
}

void CollectiveTracker::settle(std::chrono::milliseconds budget) {
    auto until = std::chrono::steady_clock::now() + budget;
    while (poll() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void CollectiveTracker::endAll(const std::string& why, IncidentKind kind) {
    // The incident goes to the latest collective each thread issued: the one
    // it was in; earlier ones are recorded pending, unblamed.
    for (const auto& [thread, c] : m_pending.endAll(why)) {
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
    // Named so that top -H, gdb, /proc and the benchmarks' thread split
    // count this thread as meshscope's.
    pthread_setname_np(pthread_self(), "meshscope-mon");
    auto idle =
        m_seconds > 0
            ? std::min(kIdleInterval,
                       duration_cast<milliseconds>(duration<double>(std::max(m_seconds / 4, 0.05))))
            : kIdleInterval;
    int64_t limit = int64_t(m_seconds * 1e9);
    bool polling = false, timesPending = false;
    for (;;) {
        {
            std::unique_lock lock(m_mutex);
            if (m_wake.wait_for(lock, polling || timesPending ? kPollInterval : idle,
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
            // GPU durations of ops: resolved here, not on the training thread
            timesPending = m_agent.deviceTimes().poll();
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
