#include "capture/agent/collectives/pending_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "capture/agent/hooks/hook_phases.h"

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

}  // namespace

std::string TrackedCollective::describe() const {
    std::string text = kind + " on " + (group.empty() ? "its process group" : group);
    if (bytes > 0) text += ", " + humanBytes(bytes);
    if (seq) text += fmt::format(", its collective #{}", position());
    return text;
}

TrackedCollective TrackedCollective::detached() const {
    TrackedCollective copy = *this;
    copy.work.reset();
    copy.streamDone.reset();
    copy.result = c10::weak_intrusive_ptr<c10::StorageImpl>(c10::intrusive_ptr<c10::StorageImpl>());
    return copy;
}

PendingCollectives::Released::~Released() {
    for (const EndedCollective& e : ended)
        m_table.m_sink(e);
    // ended (with their works and results) go now, outside the table's lock
}

void PendingCollectives::end(Table::iterator it, CollectiveState state, int64_t endNs,
                             std::string error, Released& released) {
    TrackedCollective& c = it->second;
    if (c.resultKey) {
        auto byResult = m_byResult.find(c.resultKey);
        if (byResult != m_byResult.end() && byResult->second == it->first)
            m_byResult.erase(byResult);
    }
    released.ended.push_back(EndedCollective{std::move(c), state, endNs, std::move(error)});
    m_live.erase(it);
}

bool PendingCollectives::add(TrackedCollective c) {
    Released released(*this);
    Lock lock(*this);
    if (m_live.size() >= m_capacity) {  // followed no further: recorded as issued
        int64_t start = c.startNs;
        released.ended.push_back(EndedCollective{std::move(c), CollectiveState::Unwaited, start,
                                                 "not followed: too many collectives in flight"});
        return false;
    }
    int64_t key = c.seq.value();
    m_live.emplace(key, std::move(c));
    return true;
}

bool PendingCollectives::returned(CollectiveSeq seq, int64_t nowNs,
                                  c10::intrusive_ptr<c10d::Work> work, bool completesOnWait,
                                  const at::Tensor& result, OpSeq op,
                                  std::shared_ptr<c10::Event> streamDone) {
    bool onDevice = (work && !completesOnWait) || (!work && streamDone);
    Released released(*this);
    Lock lock(*this);
    auto it = m_live.find(seq.value());
    if (it == m_live.end()) return false;
    TrackedCollective& c = it->second;
    c.returned = true;
    c.completesOnWait = completesOnWait;
    c.issuedNs = nowNs;
    c.op = op;
    if (const void* key = storageKey(result)) {
        c.result = result.storage().getWeakStorageImpl();
        c.resultKey = key;
        m_byResult[key] = seq.value();
    }
    if (work)  // asked after its wait, and by the next poll
        c.work = std::move(work);
    else if (streamDone)  // asked by the poll until its stream passed the mark
        c.streamDone = std::move(streamDone);
    else if (!c.resultKey)  // nothing to wait for: done when the call returned
        end(it, CollectiveState::Completed, nowNs, "", released);
    return onDevice;
}

CollectiveSeq PendingCollectives::waitingForWork(const c10d::Work* work, unsigned long waiter) {
    if (!work) return {};
    Lock lock(*this);
    for (auto& [seq, c] : m_live)
        if (c.work.get() == work) {
            c.waiter = waiter;
            return c.seq;
        }
    return {};
}

CollectiveSeq PendingCollectives::waitingForResult(const at::Tensor& result, unsigned long waiter) {
    const void* key = storageKey(result);
    if (!key) return {};
    Lock lock(*this);
    auto found = m_byResult.find(key);
    if (found == m_byResult.end()) return {};
    auto it = m_live.find(found->second);
    if (it == m_live.end() || it->second.result.expired()) return {};
    it->second.waiter = waiter;
    return it->second.seq;
}

void PendingCollectives::waited(CollectiveSeq seq) {
    if (!seq) return;
    c10::intrusive_ptr<c10d::Work> work;  // destroyed last, outside the lock
    bool onWait = false;
    {
        Released released(*this);
        Lock lock(*this);
        auto it = m_live.find(seq.value());
        if (it == m_live.end()) return;
        it->second.waiter = 0;
        it->second.waited = true;
        onWait = it->second.completesOnWait;
        if (!it->second.work)
            end(it, CollectiveState::Completed, m_clock(), "", released);
        else
            work = it->second.work;
    }
    if (!work) return;
    // gloo: complete once wait() returned; NCCL: on the device, perhaps later
    WorkState state = ask(*work);
    if (!state.done && !onWait) return;
    {
        Released released(*this);
        Lock lock(*this);
        auto it = m_live.find(seq.value());
        if (it != m_live.end())
            end(it, state.error.empty() ? CollectiveState::Completed : CollectiveState::Failed,
                m_clock(), state.error, released);
    }
    // Often the work's last reference: a functional collective's wait_tensor
    // released it in torch before meshscope followed it
    HookPhases::Moved moved;
    work.reset();
}

std::optional<TrackedCollective> PendingCollectives::fail(CollectiveSeq seq,
                                                          const std::string& error,
                                                          CollectiveState state) {
    if (!seq) return std::nullopt;
    Released released(*this);
    Lock lock(*this);
    auto it = m_live.find(seq.value());
    if (it == m_live.end()) return std::nullopt;
    TrackedCollective copy = it->second.detached();
    end(it, state, m_clock(), error, released);
    return copy;
}

bool PendingCollectives::failedByPoll(CollectiveSeq seq) {
    Lock lock(*this);
    return std::find(m_failedByPoll.begin(), m_failedByPoll.end(), seq.value()) !=
           m_failedByPoll.end();
}

std::optional<TrackedCollective> PendingCollectives::latestOn(uint32_t thread) {
    Lock lock(*this);
    const TrackedCollective* latest = nullptr;
    for (const auto& [seq, c] : m_live)
        if (c.thread == thread && (!latest || c.seq.value() > latest->seq.value())) latest = &c;
    if (!latest) return std::nullopt;
    return latest->detached();
}

PendingCollectives::Polled PendingCollectives::poll() {
    struct Ask {
        int64_t seq;
        c10::intrusive_ptr<c10d::Work> work;  // either this
        std::shared_ptr<c10::Event> event;    // or this; both outlive the lock
    };
    std::vector<Ask> asks;
    {
        Released released(*this);
        Lock lock(*this);
        int64_t now = m_clock();
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
    Polled polled;
    if (asks.empty()) return polled;
    std::vector<std::pair<int64_t, WorkState>> answers;
    for (const Ask& a : asks) {
        WorkState state = a.work ? ask(*a.work) : ask(*a.event);
        if (state.done) answers.emplace_back(a.seq, std::move(state));
    }
    {
        Released released(*this);
        Lock lock(*this);
        int64_t now = m_clock();
        for (auto& [seq, state] : answers) {
            auto it = m_live.find(seq);
            if (it == m_live.end()) continue;
            bool failed = !state.error.empty();
            if (failed) {
                polled.failures.emplace_back(it->second.detached(), state.error);
                m_failedByPoll.push_back(seq);
                if (m_failedByPoll.size() > kFailedKept) m_failedByPoll.pop_front();
            }
            end(it, failed ? CollectiveState::Failed : CollectiveState::Completed, now, state.error,
                released);
        }
    }
    polled.stillOnDevice = asks.size() > answers.size();
    return polled;  // asks (holding works) go after the lock
}

std::vector<TrackedCollective> PendingCollectives::overdue(int64_t nowNs, int64_t ns) {
    Lock lock(*this);
    std::vector<TrackedCollective> out;
    for (auto& [seq, c] : m_live)
        if (!c.reported && nowNs - c.startNs > ns) {
            c.reported = true;
            out.push_back(c.detached());
        }
    return out;
}

std::map<uint32_t, TrackedCollective> PendingCollectives::endAll(const std::string& why) {
    // The latest collective each thread issued is the one it was in. Earlier
    // ones still pending (NCCL's, waited for on the host, their completion
    // not yet reported) are ended pending too, unblamed.
    std::map<uint32_t, TrackedCollective> stuck;  // by thread
    Released released(*this);
    Lock lock(*this);
    int64_t now = m_clock();
    for (auto it = m_live.begin(); it != m_live.end();) {
        TrackedCollective& c = it->second;
        // a functional collective whose result nobody waited for and no
        // work to ask: whether it completed is not known
        bool unwaited = !c.work && !c.streamDone && c.returned && !c.waiter;
        auto [latest, fresh] = stuck.try_emplace(c.thread);
        if (!unwaited && (fresh || c.seq.value() > latest->second.seq.value()))
            latest->second = c.detached();
        end(it++, unwaited ? CollectiveState::Unwaited : CollectiveState::Pending, now,
            unwaited ? "" : why, released);
    }
    return stuck;
}

size_t PendingCollectives::size() {
    Lock lock(*this);
    return m_live.size();
}

}  // namespace meshscope::capture
