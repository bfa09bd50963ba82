#include "tests/plugins/fake_nccl.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>

namespace meshscope::test {
namespace {

using namespace nccl_abi;

std::filesystem::path privateCopy(const std::filesystem::path& plugin) {
    static std::atomic<int> serial{0};
    auto copy = std::filesystem::temp_directory_path() /
                ("meshscope-nccl-plugin-" + std::to_string(::getpid()) + "-" +
                 std::to_string(serial++) + ".so");
    std::filesystem::copy_file(plugin, copy, std::filesystem::copy_options::overwrite_existing);
    return copy;
}

}  // namespace

FakeNccl::FakeNccl(const std::filesystem::path& plugin) : m_copy(privateCopy(plugin)) {
    m_lib = dlopen(m_copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m_lib) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    m_v5 = static_cast<ProfilerV5*>(dlsym(m_lib, "ncclProfiler_v5"));
    m_v4 = static_cast<ProfilerV4*>(dlsym(m_lib, "ncclProfiler_v4"));
    if (!m_v5) throw std::runtime_error("the plugin exports no ncclProfiler_v5");
}

FakeNccl::~FakeNccl() {
    // The library stays loaded: a plugin thread may still be in it.
    std::error_code ignored;
    std::filesystem::remove(m_copy, ignored);
}

FakeNccl::Comm FakeNccl::init(uint64_t hash, int rank, int size, const char* name) {
    Comm comm;
    m_v5->init(&comm.context, hash, &comm.mask, name, 1, size, rank, nullptr);
    return comm;
}

FakeNccl::Comm FakeNccl::initV4(uint64_t hash, int rank, int size) {
    Comm comm;
    m_v4->init(&comm.context, &comm.mask, "fake comm", hash, 1, size, rank, nullptr);
    return comm;
}

void FakeNccl::finalize(Comm& comm) {
    m_v5->finalize(comm.context);
    comm.context = nullptr;
}

void* FakeNccl::apiCall(const Comm& comm, uint64_t type, const char* func, size_t count,
                        const char* datatype) {
    EventDescrV5 d{};
    d.type = type;
    if (type == kCollApi)
        d.collApi = {func, count, datatype, 0, nullptr, false};
    else
        d.p2pApi = {func, count, datatype, nullptr, false};
    void* handle = nullptr;
    m_v5->startEvent(comm.context, &handle, &d);
    if (handle) m_v5->stopEvent(handle);  // NCCL stops it when the call returns
    return handle;
}

void* FakeNccl::startTask(const Comm& comm, void* api, uint64_t type, const char* func,
                          size_t count, const char* datatype, int channels) {
    EventDescrV5 d{};
    d.type = type;
    d.parentObj = api;
    if (type == kColl) {
        d.coll.func = func;
        d.coll.count = count;
        d.coll.datatype = datatype;
        d.coll.nChannels = uint8_t(channels);
    } else {
        d.p2p.func = func;
        d.p2p.count = count;
        d.p2p.datatype = datatype;
        d.p2p.nChannels = uint8_t(channels);
    }
    void* handle = nullptr;
    m_v5->startEvent(comm.context, &handle, &d);
    return handle;
}

void FakeNccl::kernelChannel(const Comm& comm, void* task, uint64_t gpuStart, uint64_t gpuEnd) {
    EventDescrV5 d{};
    d.type = kKernelCh;
    d.parentObj = task;
    d.kernelCh.pTimer = gpuStart;
    void* handle = nullptr;
    m_v5->startEvent(comm.context, &handle, &d);
    EventStateArgs args{};
    args.kernelCh.pTimer = gpuEnd;
    if (handle) m_v5->recordEventState(handle, kKernelChStop, &args);
    if (handle) m_v5->stopEvent(handle);
}

void FakeNccl::stop(void* handle) {
    if (handle) m_v5->stopEvent(handle);
}

void FakeNccl::collective(const Comm& comm, const char* func, size_t count, const char* datatype,
                          int channels, uint64_t gpuStart, uint64_t gpuEnd) {
    void* api = apiCall(comm, kCollApi, func, count, datatype);
    void* task = startTask(comm, api, kColl, func, count, datatype, channels);
    stop(task);
    uint64_t step = channels > 0 ? (gpuEnd - gpuStart) / uint64_t(channels) : 0;
    for (int c = 0; c < channels; ++c)
        kernelChannel(comm, task, gpuStart + uint64_t(c) * step, gpuStart + uint64_t(c + 1) * step);
}

}  // namespace meshscope::test
