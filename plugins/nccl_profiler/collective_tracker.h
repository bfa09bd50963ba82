#pragma once

// The version-independent heart of the NCCL profiler plugin: follows each
// collective from NCCL's API call (calling thread: op token, host start)
// through its task (CUDA-callback thread) and its kernel channels (proxy
// thread: GPU times), then hands the finished collective to the capture
// agent's sink (core/plugin_abi/collective_sink.h).
//
// NCCL calls in from several threads and must never be blocked or crashed
// by a profiler, so every entry point is noexcept, lock-free and
// allocation-free. State lives in fixed slot arrays; a handle is an opaque
// (kind, slot, generation) value, and a handle whose slot has moved on is
// ignored. A full pool drops the event and counts it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/plugin_abi/collective_sink.h"

namespace meshscope::nccl_plugin {

// One NCCL communicator the plugin watches (its profiler context), from
// NCCL's init on, whether or not an agent is attached yet.
struct CommInfo {
    uint64_t hash = 0;
    int32_t rank = 0;
    int32_t size = 0;
    int32_t nodes = 0;
    bool kernelTiming = false;  // KernelCh events were requested for it
    char name[128] = {};        // NCCL's commName, cut to fit
    // The sink generation it was last announced to (0: none yet).
    mutable std::atomic<uint64_t> announced{0};
};

// What NCCL's descriptors say about a collective or a point-to-point call.
struct CallFacts {
    const char* func = nullptr;
    size_t count = 0;
    const char* datatype = nullptr;
};

class CollectiveTracker {
  public:
    // `slots`: collectives in flight at once; API calls are remembered in a
    // ring a quarter that size.
    CollectiveTracker(const MeshscopeCollectiveSink& sink, size_t slots);
    ~CollectiveTracker();

    // An API call (CollApi/P2pApi, v5), on the thread that called NCCL.
    void* startApi(const CommInfo& comm, const CallFacts& call) noexcept;
    // A collective or p2p task; `api` is its API call's handle or null (v4).
    // A collective waits for `channels` kernel channels before it is
    // recorded when the communicator has kernel timing.
    void* startTask(const CommInfo& comm, void* api, const CallFacts& call, int channels,
                    bool collective) noexcept;
    // A kernel channel of `task` started / reported its stop at GPU time.
    void* startKernel(void* task, uint64_t gpuNs) noexcept;
    void kernelStopped(void* kernel, uint64_t gpuNs) noexcept;
    // stopEvent for any handle this tracker returned.
    void stop(void* handle) noexcept;
    // Records every collective of `comm` still waiting (its finalize).
    void flush(const CommInfo& comm) noexcept;

    // Events not followed because the pool was full.
    uint64_t drops() const noexcept { return m_drops.load(std::memory_order_relaxed); }

  private:
    struct ApiSlot;
    struct TaskSlot;
    TaskSlot* claimTask() noexcept;
    TaskSlot* liveTask(void* handle, uint32_t& generation) noexcept;
    bool settle(TaskSlot& slot, uint32_t generation) noexcept;
    bool seize(TaskSlot& slot, uint64_t state) noexcept;
    void finish(TaskSlot& slot, uint32_t generation, int64_t endNs) noexcept;
    void sweepStale(size_t count) noexcept;
    bool apiFacts(void* api, const CallFacts& call, uint64_t& token, int64_t& start) noexcept;
    void drop() noexcept;

    const MeshscopeCollectiveSink& m_sink;
    size_t m_taskCount, m_apiCount;
    std::unique_ptr<TaskSlot[]> m_tasks;
    std::unique_ptr<ApiSlot[]> m_apis;
    std::atomic<uint64_t> m_nextApi{0};
    std::atomic<size_t> m_taskCursor{0}, m_sweepCursor{0};
    std::atomic<uint64_t> m_drops{0};
};

}  // namespace meshscope::nccl_plugin
