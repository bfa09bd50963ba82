#include "plugins/nccl_profiler/collective_tracker.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace meshscope::nccl_plugin {
namespace {

static_assert(sizeof(uintptr_t) == 8, "handles pack kind, slot and generation into 64 bits");

// Handle layout: kind (2 bits) | slot index (22 bits) | generation (32 bits).
enum Kind : uintptr_t { kApi = 1, kTask = 2, kKernel = 3 };
constexpr int kIndexBits = 22;
constexpr size_t kMaxSlots = size_t(1) << kIndexBits;

// A task whose kernel channels have not all reported this long after the
// task ended is recorded with the GPU times seen so far.
constexpr int64_t kSettleNs = 1'000'000'000;
// Slots checked for such stragglers on every new task.
constexpr size_t kSweepPerTask = 8;

// Task state word: generation << 32 | outstanding, where outstanding 0 is a
// free slot, 1 a slot one thread owns (being filled or recorded), n >= 2 a
// live task waiting for n - 1 more stops.
constexpr uint64_t kFree = 0, kOwned = 1;
constexpr uint64_t word(uint32_t generation, uint64_t outstanding) {
    return uint64_t(generation) << 32 | outstanding;
}
constexpr uint32_t generationOf(uint64_t state) {
    return uint32_t(state >> 32);
}
constexpr uint64_t outstandingOf(uint64_t state) {
    return state & 0xFFFFFFFFu;
}

void* encode(Kind kind, size_t index, uint32_t generation) {
    return reinterpret_cast<void*>(uintptr_t(kind) | uintptr_t(index) << 2 |
                                   uintptr_t(generation) << (2 + kIndexBits));
}
Kind kindOf(const void* h) {
    return Kind(reinterpret_cast<uintptr_t>(h) & 3);
}
size_t indexOf(const void* h) {
    return (reinterpret_cast<uintptr_t>(h) >> 2) & (kMaxSlots - 1);
}
uint32_t generationOf(const void* h) {
    return uint32_t(reinterpret_cast<uintptr_t>(h) >> (2 + kIndexBits));
}

// Bytes per element of NCCL's datatype names; 0 for names it does not
// spell (NCCL 2.28 calls ncclUint8 "Unknown").
int64_t datatypeBytes(const char* name) {
    struct Size {
        const char* name;
        int64_t bytes;
    };
    static constexpr Size kSizes[] = {
        {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
        {"ncclFloat16", 2}, {"ncclBfloat16", 2}, {"ncclInt32", 4},      {"ncclUint32", 4},
        {"ncclFloat32", 4}, {"ncclInt64", 8},    {"ncclUint64", 8},     {"ncclFloat64", 8},
    };
    for (const Size& s : kSizes)
        if (name && std::strcmp(name, s.name) == 0) return s.bytes;
    return 0;
}

int64_t byteCount(const CallFacts& call) {
    return int64_t(call.count) * datatypeBytes(call.datatype);
}

}  // namespace

// An API call, kept in a ring until overwritten: NCCL passes its handle as
// the parent of the task it becomes, often after the call (and its stop)
// returned. Written under a sequence lock: generation 0 while being written.
struct CollectiveTracker::ApiSlot {
    std::atomic<uint32_t> generation{0};
    std::atomic<const char*> func{nullptr};
    std::atomic<size_t> count{0};
    std::atomic<uint64_t> token{0};
    std::atomic<int64_t> startNs{0};
};

struct CollectiveTracker::TaskSlot {
    std::atomic<uint64_t> state{word(0, kFree)};
    std::atomic<const CommInfo*> comm{nullptr};
    std::atomic<const char*> func{nullptr};
    std::atomic<int64_t> bytes{0};
    std::atomic<uint64_t> token{0};
    std::atomic<int64_t> hostStartNs{0};
    std::atomic<int64_t> stoppedNs{0};  // sink clock at the task's own stop; 0 before
    std::atomic<int> kernelsExpected{0}, kernelsStopped{0};
    std::atomic<uint64_t> gpuStart{std::numeric_limits<uint64_t>::max()};
    std::atomic<uint64_t> gpuEnd{0};
};

CollectiveTracker::CollectiveTracker(const MeshscopeCollectiveSink& sink, size_t slots)
    : m_sink(sink),
      m_taskCount(std::clamp<size_t>(slots, 4, kMaxSlots)),
      m_apiCount(std::max<size_t>(4, m_taskCount / 4)),
      m_tasks(new TaskSlot[m_taskCount]),
      m_apis(new ApiSlot[m_apiCount]) {}

CollectiveTracker::~CollectiveTracker() = default;

void* CollectiveTracker::startApi(const CommInfo&, const CallFacts& call) noexcept {
    uint64_t n = m_nextApi.fetch_add(1, std::memory_order_relaxed);
    size_t index = n % m_apiCount;
    uint32_t generation = std::max<uint32_t>(1, uint32_t(n / m_apiCount + 1));
    ApiSlot& slot = m_apis[index];
    slot.generation.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    slot.func.store(call.func, std::memory_order_relaxed);
    slot.count.store(call.count, std::memory_order_relaxed);
    slot.token.store(m_sink.currentOp(m_sink.ctx), std::memory_order_relaxed);
    slot.startNs.store(m_sink.nowNs(m_sink.ctx), std::memory_order_relaxed);
    slot.generation.store(generation, std::memory_order_release);
    return encode(kApi, index, generation);
}

// The op token and start time of the API call `api`, if its slot still
// holds that call and it is the call `task` describes.
bool CollectiveTracker::apiFacts(void* api, const CallFacts& task, uint64_t& token,
                                 int64_t& start) noexcept {
    if (!api || kindOf(api) != kApi || indexOf(api) >= m_apiCount) return false;
    ApiSlot& slot = m_apis[indexOf(api)];
    uint32_t generation = slot.generation.load(std::memory_order_acquire);
    const char* func = slot.func.load(std::memory_order_relaxed);
    size_t count = slot.count.load(std::memory_order_relaxed);
    token = slot.token.load(std::memory_order_relaxed);
    start = slot.startNs.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    bool unchanged = slot.generation.load(std::memory_order_relaxed) == generation;
    return unchanged && generation == generationOf(api) && count == task.count && func &&
           task.func && std::strcmp(func, task.func) == 0;
}

void* CollectiveTracker::startTask(const CommInfo& comm, void* api, const CallFacts& call,
                                   int channels, bool collective) noexcept {
    sweepStale(kSweepPerTask);
    TaskSlot* slot = claimTask();
    if (!slot) {
        drop();
        return nullptr;
    }
    uint64_t token = 0;
    int64_t start = 0;
    if (!apiFacts(api, call, token, start)) {
        token = m_sink.currentOp(m_sink.ctx);
        start = m_sink.nowNs(m_sink.ctx);
    }
    int kernels = collective && comm.kernelTiming ? std::max(0, channels) : 0;
    slot->comm.store(&comm, std::memory_order_relaxed);
    slot->func.store(call.func, std::memory_order_relaxed);
    slot->bytes.store(byteCount(call), std::memory_order_relaxed);
    slot->token.store(token, std::memory_order_relaxed);
    slot->hostStartNs.store(start, std::memory_order_relaxed);
    slot->stoppedNs.store(0, std::memory_order_relaxed);
    slot->kernelsExpected.store(kernels, std::memory_order_relaxed);
    slot->kernelsStopped.store(0, std::memory_order_relaxed);
    slot->gpuStart.store(std::numeric_limits<uint64_t>::max(), std::memory_order_relaxed);
    slot->gpuEnd.store(0, std::memory_order_relaxed);
    uint32_t generation = generationOf(slot->state.load(std::memory_order_relaxed));
    // Live: waits for its own stop and one stop per kernel channel.
    slot->state.store(word(generation, kOwned + 1 + uint64_t(kernels)), std::memory_order_release);
    return encode(kTask, size_t(slot - m_tasks.get()), generation);
}

// A free slot, now owned by the caller under a new generation, or null.
CollectiveTracker::TaskSlot* CollectiveTracker::claimTask() noexcept {
    for (int attempt = 0; attempt < 2; ++attempt) {
        for (size_t probe = 0; probe < m_taskCount; ++probe) {
            size_t index = m_taskCursor.fetch_add(1, std::memory_order_relaxed) % m_taskCount;
            TaskSlot& slot = m_tasks[index];
            uint64_t state = slot.state.load(std::memory_order_acquire);
            if (outstandingOf(state) != kFree) continue;
            uint32_t next = std::max<uint32_t>(1, generationOf(state) + 1);
            if (slot.state.compare_exchange_strong(state, word(next, kOwned))) return &slot;
        }
        sweepStale(m_taskCount);  // full pool: record the stragglers and retry once
    }
    return nullptr;
}

CollectiveTracker::TaskSlot* CollectiveTracker::liveTask(void* h, uint32_t& generation) noexcept {
    if ((kindOf(h) != kTask && kindOf(h) != kKernel) || indexOf(h) >= m_taskCount) return nullptr;
    TaskSlot& slot = m_tasks[indexOf(h)];
    uint64_t state = slot.state.load(std::memory_order_acquire);
    generation = generationOf(h);
    if (generationOf(state) != generation || outstandingOf(state) <= kOwned) return nullptr;
    return &slot;
}

void* CollectiveTracker::startKernel(void* task, uint64_t gpuNs) noexcept {
    uint32_t generation = 0;
    TaskSlot* slot = task && kindOf(task) == kTask ? liveTask(task, generation) : nullptr;
    if (!slot || slot->kernelsExpected.load(std::memory_order_relaxed) == 0) return nullptr;
    uint64_t seen = slot->gpuStart.load(std::memory_order_relaxed);
    while (gpuNs < seen && !slot->gpuStart.compare_exchange_weak(seen, gpuNs)) {
    }
    return encode(kKernel, size_t(slot - m_tasks.get()), generation);
}

void CollectiveTracker::kernelStopped(void* kernel, uint64_t gpuNs) noexcept {
    uint32_t generation = 0;
    TaskSlot* slot = kernel && kindOf(kernel) == kKernel ? liveTask(kernel, generation) : nullptr;
    if (!slot) return;
    uint64_t seen = slot->gpuEnd.load(std::memory_order_relaxed);
    while (gpuNs > seen && !slot->gpuEnd.compare_exchange_weak(seen, gpuNs)) {
    }
}

void CollectiveTracker::stop(void* handle) noexcept {
    uint32_t generation = 0;
    if (!handle || kindOf(handle) == kApi) return;  // API slots live on in their ring
    TaskSlot* slot = liveTask(handle, generation);
    if (!slot) return;
    if (kindOf(handle) == kTask) {
        slot->stoppedNs.store(m_sink.nowNs(m_sink.ctx), std::memory_order_relaxed);
    } else if (slot->kernelsStopped.fetch_add(1) >=
               slot->kernelsExpected.load(std::memory_order_relaxed)) {
        return;  // more channels reported than announced: not counted twice
    }
    if (settle(*slot, generation)) finish(*slot, generation, m_sink.nowNs(m_sink.ctx));
}

// Takes one stop off a live task; true when that was its last outstanding
// one, which makes the caller its owner, who then records it.
bool CollectiveTracker::settle(TaskSlot& slot, uint32_t generation) noexcept {
    uint64_t state = slot.state.load(std::memory_order_acquire);
    for (;;) {
        uint64_t outstanding = outstandingOf(state);
        if (generationOf(state) != generation || outstanding <= kOwned) return false;
        if (slot.state.compare_exchange_weak(state, word(generation, outstanding - 1)))
            return outstanding - 1 == kOwned;
    }
}

// Records an owned task (host end at `endNs`) and frees its slot.
void CollectiveTracker::finish(TaskSlot& slot, uint32_t generation, int64_t endNs) noexcept {
    const CommInfo* comm = slot.comm.load(std::memory_order_relaxed);
    MeshscopeCollectiveEvent e{};
    e.kind = slot.func.load(std::memory_order_relaxed);
    e.commHash = comm->hash;
    e.commRank = comm->rank;
    e.commSize = comm->size;
    e.bytes = slot.bytes.load(std::memory_order_relaxed);
    e.hostStartNs = slot.hostStartNs.load(std::memory_order_relaxed);
    e.hostEndNs = endNs;
    uint64_t gpuStart = slot.gpuStart.load(std::memory_order_relaxed);
    uint64_t gpuEnd = slot.gpuEnd.load(std::memory_order_relaxed);
    if (gpuEnd != 0 && gpuStart <= gpuEnd) {
        e.deviceStartNs = int64_t(gpuStart);
        e.deviceEndNs = int64_t(gpuEnd);
    }
    e.opToken = slot.token.load(std::memory_order_relaxed);
    if (e.kind) m_sink.record(m_sink.ctx, &e);
    slot.state.store(word(generation, kFree), std::memory_order_release);
}

// Takes a live task from whoever waits on it, for recording it early.
bool CollectiveTracker::seize(TaskSlot& slot, uint64_t state) noexcept {
    return outstandingOf(state) > kOwned &&
           slot.state.compare_exchange_strong(state, word(generationOf(state), kOwned));
}

// Records up to `count` tasks, from a rotating cursor, whose own stop is
// older than kSettleNs while some kernel channel never reported.
void CollectiveTracker::sweepStale(size_t count) noexcept {
    int64_t now = m_sink.nowNs(m_sink.ctx);
    for (size_t i = 0; i < std::min(count, m_taskCount); ++i) {
        size_t index = m_sweepCursor.fetch_add(1, std::memory_order_relaxed) % m_taskCount;
        TaskSlot& slot = m_tasks[index];
        uint64_t state = slot.state.load(std::memory_order_acquire);
        int64_t stopped = slot.stoppedNs.load(std::memory_order_relaxed);
        if (stopped == 0 || now - stopped < kSettleNs) continue;
        if (seize(slot, state)) finish(slot, generationOf(state), stopped);
    }
}

void CollectiveTracker::flush(const CommInfo& comm) noexcept {
    for (size_t index = 0; index < m_taskCount; ++index) {
        TaskSlot& slot = m_tasks[index];
        uint64_t state = slot.state.load(std::memory_order_acquire);
        if (slot.comm.load(std::memory_order_relaxed) != &comm || !seize(slot, state)) continue;
        int64_t stopped = slot.stoppedNs.load(std::memory_order_relaxed);
        finish(slot, generationOf(state), stopped ? stopped : m_sink.nowNs(m_sink.ctx));
    }
    if (uint64_t dropped = drops()) m_sink.dropped(m_sink.ctx, dropped);
}

void CollectiveTracker::drop() noexcept {
    uint64_t total = m_drops.fetch_add(1, std::memory_order_relaxed) + 1;
    // The sink hears the first drop and every 1024th (and the total at flush).
    if (total == 1 || total % 1024 == 0) m_sink.dropped(m_sink.ctx, total);
}

}  // namespace meshscope::nccl_plugin
