#include "capture/agent/collectives/collective_bridge.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>

#include "capture/agent/agent.h"
#include "core/util/hot_path.h"

namespace meshscope::capture {
namespace {

std::atomic<bool> g_listening{false};
std::atomic<uint64_t> g_nextToken{0};
thread_local uint64_t t_token = 0;  // the innermost recorded op of this thread

// Token = thread index << kThreadShift | serial: the collective's record
// keeps the thread that called the library, whichever thread reports it.
constexpr int kThreadShift = 44;

// Runs fn(agent) while an agent is attached, keeping it attached meanwhile.
// Plugins call from C and from NCCL's threads: nothing may escape.
template <typename Fn>
void withAgent(Fn&& fn) noexcept {
    try {
        std::shared_lock lock(CollectiveBridge::lifetime());
        if (Agent* agent = Agent::current()) fn(*agent);
    } catch (...) {  // the collective is lost; the training is not
    }
}

std::string hex(uint64_t value) {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
    return text;
}

int64_t sinkNow(void*) {
    int64_t now = 0;
    withAgent([&](Agent& a) { now = a.writer().nowNs(); });
    return now;
}

uint64_t sinkCurrentOp(void*) {
    return t_token;
}

void sinkCommunicator(void*, uint64_t hash, const char* name, int32_t rank, int32_t size,
                      int32_t nodes) {
    withAgent(
        [&](Agent& a) { a.collectives().communicator(hash, name ? name : "", rank, size, nodes); });
}

void sinkRecord(void*, const MeshscopeCollectiveEvent* event) {
    if (event) withAgent([&](Agent& a) { a.collectives().record(*event); });
}

void sinkDropped(void*, uint64_t total) {
    withAgent([&](Agent& a) { a.collectives().dropped(total); });
}

uint64_t sinkGeneration(void*) {
    return Agent::attachedGeneration();
}

const MeshscopeCollectiveSink kSink{
    MESHSCOPE_COLLECTIVE_SINK_ABI_VERSION,
    nullptr,
    &sinkNow,
    &sinkCurrentOp,
    &sinkCommunicator,
    &sinkRecord,
    &sinkDropped,
    &sinkGeneration,
};

}  // namespace

std::shared_mutex& CollectiveBridge::lifetime() {
    static std::shared_mutex mutex;
    return mutex;
}

bool CollectiveBridge::listening() {
    return g_listening.load(std::memory_order_relaxed);
}

MESHSCOPE_HOT uint64_t CurrentOp::enter(uint64_t& previous) {
    previous = t_token;
    if (!g_listening.load(std::memory_order_relaxed)) return 0;
    uint64_t serial = g_nextToken.fetch_add(1, std::memory_order_relaxed) + 1;
    t_token = uint64_t(Agent::threadIndex()) << kThreadShift |
              (serial & ((uint64_t(1) << kThreadShift) - 1));
    return t_token;
}

MESHSCOPE_HOT void CurrentOp::leave(uint64_t token, uint64_t previous) {
    if (token) t_token = previous;
}

// What `token` stood for once recorded; an empty subject when a newer token
// took its place in the table (too old to know); nullopt while it may still
// be recorded.
std::optional<CollectiveBridge::Subject> CollectiveBridge::recordedSubject(uint64_t token) const {
    const auto& [known, subject] = m_recent[token % kRecentOps];
    if (known == token) return subject;
    if (known > token) return Subject{};
    return std::nullopt;
}

MESHSCOPE_HOT MESHSCOPE_PREFETCHES void CollectiveBridge::prefetchSlot(uint64_t token) const {
    __builtin_prefetch(&m_recent[token % kRecentOps], 1, 3);
}

MESHSCOPE_HOT void CollectiveBridge::opRecorded(uint64_t token, OpSeq seq) {
    std::lock_guard lock(m_mutex);
    resolved(token, Subject{seq, CollectiveSeq{}});
}

void CollectiveBridge::collectiveIssued(uint64_t own, CollectiveSeq seq) {
    std::lock_guard lock(m_mutex);
    resolved(own, Subject{OpSeq{}, seq});
}

void CollectiveBridge::agentCollective(CollectiveRecord rec, uint64_t enclosing) {
    std::lock_guard lock(m_mutex);
    Enclosed enclosed{std::move(rec), enclosing};
    std::optional<Subject> op = enclosing ? recordedSubject(enclosing) : Subject{};
    if (!op && m_enclosed.size() < kMaxWaiting) {  // the op it ran inside is still running
        m_enclosed.push_back(std::move(enclosed));
        return;
    }
    submit(enclosed, op.value_or(Subject{}).op);
}

void CollectiveBridge::submit(Enclosed& enclosed, OpSeq op) {
    if (op) enclosed.record.op = op;  // else the op it names itself (c10d calls), or none
    m_agent.writer().submit(std::move(enclosed.record));
}

void CollectiveBridge::resolved(uint64_t token, Subject subject) {
    m_recent[token % kRecentOps] = {token, subject};
    for (auto it = m_waiting.begin(); it != m_waiting.end();) {
        if (it->token != token) {
            ++it;
            continue;
        }
        submit(*it, subject);
        it = m_waiting.erase(it);
    }
    if (!subject.op) return;
    std::vector<Enclosed> ready;  // submitting resolves further tokens: take them out first
    for (auto it = m_enclosed.begin(); it != m_enclosed.end();) {
        if (it->enclosing != token) {
            ++it;
            continue;
        }
        ready.push_back(std::move(*it));
        it = m_enclosed.erase(it);
    }
    for (Enclosed& enclosed : ready)
        submit(enclosed, subject.op);
}

void CollectiveBridge::record(const MeshscopeCollectiveEvent& e) {
    Waiting waiting;
    waiting.record = CollectiveTracker::libraryRecord(
        m_agent.writer(), e.kind ? e.kind : "", "comm " + hex(e.commHash), e.bytes, e.hostStartNs,
        e.hostEndNs, e.opToken ? uint32_t(e.opToken >> kThreadShift) : Agent::threadIndex(),
        m_agent.step());
    if (e.deviceStartNs > 0 && e.deviceEndNs >= e.deviceStartNs)
        waiting.device =
            DeviceTimeRecord{CollectiveSeq{}, e.deviceEndNs - e.deviceStartNs, e.deviceStartNs};
    waiting.token = e.opToken;
    std::lock_guard lock(m_mutex);
    std::optional<Subject> subject = waiting.token ? recordedSubject(waiting.token) : Subject{};
    if (!subject && m_waiting.size() < kMaxWaiting) {  // its op is still running
        m_waiting.push_back(std::move(waiting));
        return;
    }
    submit(waiting, subject.value_or(Subject{}));
}

void CollectiveBridge::submit(Waiting& waiting, const Subject& subject) {
    RankWriter& w = m_agent.writer();
    CollectiveSeq seq = subject.collective;
    if (!seq) {  // the library's own record, tied to the op that issued it
        waiting.record.op = subject.op;
        seq = w.submit(std::move(waiting.record));
    }
    if (!seq || !waiting.device) return;
    waiting.device->subject = seq;
    w.submit(Record{std::move(*waiting.device)});
}

void CollectiveBridge::communicator(uint64_t hash, std::string_view name, int rank, int size,
                                    int nodes) {
    std::string value = "name=" + std::string(name) + " rank=" + std::to_string(rank) +
                        " size=" + std::to_string(size) + " nodes=" + std::to_string(nodes);
    m_agent.writer().submit(Record{MetaRecord{"comm." + hex(hash), std::move(value)}});
}

void CollectiveBridge::dropped(uint64_t total) {
    m_agent.writer().submit(Record{MetaRecord{"collective_plugin.dropped", std::to_string(total)}});
}

void CollectiveBridge::flush() {
    std::lock_guard lock(m_mutex);
    std::vector<Enclosed> enclosed = std::move(m_enclosed);
    m_enclosed.clear();
    for (Enclosed& e : enclosed)
        submit(e, OpSeq{});
    for (Waiting& waiting : m_waiting)
        submit(waiting, Subject{});
    m_waiting.clear();
}

void exposeCollectiveSink() {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&meshscope_collective_sink), &info) || !info.dli_fname)
        return;
    // Promotes the loaded extension into the global scope (RTLD_NOLOAD: no
    // second copy); the extra reference is given back at once.
    if (void* self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)) dlclose(self);
}

}  // namespace meshscope::capture

extern "C" const MeshscopeCollectiveSink* meshscope_collective_sink(void) {
    using namespace meshscope::capture;
    bool attached = false;
    withAgent([&](Agent&) { attached = true; });
    if (!attached) return nullptr;
    g_listening.store(true, std::memory_order_relaxed);
    return &kSink;
}
