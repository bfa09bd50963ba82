#pragma once

// Plays NCCL's part towards the profiler plugin on a machine without a GPU:
// loads the plugin as NCCL does (a fresh private copy each time, so tests do
// not share its process-wide state), finds ncclProfiler_v5/_v4, and reports
// communicators and collectives in the order NCCL 2.28 does: the API call
// on the calling thread, its task when the plan runs, then one kernel
// channel after another from the proxy thread.

#include <cstdint>
#include <filesystem>
#include <string>

#include "plugins/nccl_profiler/nccl_profiler_abi.h"

namespace meshscope::test {

class FakeNccl {
  public:
    // Throws std::runtime_error (with dlerror's text) when the plugin cannot
    // be loaded or lacks ncclProfiler_v5.
    explicit FakeNccl(const std::filesystem::path& plugin);
    ~FakeNccl();
    FakeNccl(const FakeNccl&) = delete;
    FakeNccl& operator=(const FakeNccl&) = delete;

    const nccl_abi::ProfilerV5& v5() const { return *m_v5; }
    const nccl_abi::ProfilerV4* v4() const { return m_v4; }

    // A communicator's init: its profiler context (null: the plugin stays
    // off for it) and NCCL's shared activation mask after the call.
    struct Comm {
        void* context = nullptr;
        int mask = 0;
    };
    Comm init(uint64_t hash, int rank, int size, const char* name = "fake comm");
    Comm initV4(uint64_t hash, int rank, int size);
    void finalize(Comm& comm);

    // A collective or p2p API call (started and stopped); its handle.
    void* apiCall(const Comm& comm, uint64_t type, const char* func, size_t count,
                  const char* datatype);
    // The task NCCL makes of an API call (`api` may be null), started.
    void* startTask(const Comm& comm, void* api, uint64_t type, const char* func, size_t count,
                    const char* datatype, int channels);
    // One kernel channel of `task` running from gpuStart to gpuEnd.
    void kernelChannel(const Comm& comm, void* task, uint64_t gpuStart, uint64_t gpuEnd);
    void stop(void* handle);
    // API call, task (stopped), then `channels` kernel channels evenly
    // spread over [gpuStart, gpuEnd].
    void collective(const Comm& comm, const char* func, size_t count, const char* datatype,
                    int channels, uint64_t gpuStart, uint64_t gpuEnd);

  private:
    std::filesystem::path m_copy;
    void* m_lib = nullptr;
    nccl_abi::ProfilerV5* m_v5 = nullptr;
    nccl_abi::ProfilerV4* m_v4 = nullptr;
};

}  // namespace meshscope::test
