// ctypes entry points over FakeNccl, for the integration test that feeds
// the plugin inside a Python process where the real capture agent runs.

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "tests/plugins/fake_nccl.h"

namespace {

std::unique_ptr<meshscope::test::FakeNccl> g_nccl;

// The plugin keeps NCCL's name pointers: NCCL's names are static strings,
// Python's bytes are not.
const char* lasting(const char* text) {
    static std::mutex mutex;
    static std::set<std::string> names;
    std::lock_guard lock(mutex);
    return names.insert(text).first->c_str();
}

meshscope::test::FakeNccl::Comm comm(void* context) {
    return {context, 0};
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int fake_nccl_open(const char* plugin) {
    try {
        g_nccl = std::make_unique<meshscope::test::FakeNccl>(plugin);
        return 0;
    } catch (const std::exception&) {
        return 1;
    }
}

__attribute__((visibility("default"))) void* fake_nccl_init(uint64_t hash, int rank, int size) {
    return g_nccl->init(hash, rank, size, "driver comm").context;
}

__attribute__((visibility("default"))) void* fake_nccl_api_call(void* context, const char* func,
                                                                size_t count,
                                                                const char* datatype) {
    return g_nccl->apiCall(comm(context), meshscope::nccl_abi::kCollApi, lasting(func), count,
                           lasting(datatype));
}

__attribute__((visibility("default"))) void fake_nccl_run_task(void* context, void* api,
                                                               const char* func, size_t count,
                                                               const char* datatype, int channels,
                                                               uint64_t gpuStart, uint64_t gpuEnd) {
    auto c = comm(context);
    void* task = g_nccl->startTask(c, api, meshscope::nccl_abi::kColl, lasting(func), count,
                                   lasting(datatype), channels);
    g_nccl->stop(task);
    for (int i = 0; i < channels; ++i)
        g_nccl->kernelChannel(c, task, gpuStart, gpuEnd);
}

__attribute__((visibility("default"))) void fake_nccl_finalize(void* context) {
    auto c = comm(context);
    g_nccl->finalize(c);
}
}
