// NCCL's entry points into meshscope's profiler plugin: the exported
// ncclProfiler_v5 and ncclProfiler_v4 turn NCCL's event descriptors into
// CollectiveTracker calls. Every communicator is followed from its init,
// also one NCCL creates before a capture agent attaches (eager init through
// init_process_group(device_id=...), then meshscope.attach()): the agent's
// collective sink is looked up again, at most every 10 ms, until one is
// attached, and each communicator is announced to every agent that
// attaches. When NCCL's plugin version does not match, the plugin says so
// once on stderr and activates no events, so NCCL runs as without it.
// Nothing here throws or blocks NCCL's threads.

#include <time.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>

#include "plugins/nccl_profiler/collective_tracker.h"
#include "plugins/nccl_profiler/nccl_profiler_abi.h"

namespace meshscope::nccl_plugin {
namespace {

using namespace nccl_abi;

constexpr const char* kPluginName = "meshscope";
constexpr size_t kDefaultSlots = 4096;
constexpr int kMaskV5 = kCollApi | kP2pApi | kColl | kP2p | kKernelCh;
constexpr int kMaskV4 = kColl | kP2p | kKernelCh;

std::mutex g_initMutex;  // init and finalize only, never an event
std::atomic<CollectiveTracker*> g_tracker{nullptr};
std::atomic<bool> g_saidNoSink{false}, g_saidSinkVersion{false}, g_saidNccl{false};

// One line on stderr, the first time `said` is raised.
void sayOnce(std::atomic<bool>& said, const char* format, ...) {
    if (said.exchange(true)) return;
    va_list args;
    va_start(args, format);
    std::fputs("meshscope NCCL profiler: ", stderr);
    std::vfprintf(stderr, format, args);
    std::fputs("\n", stderr);
    va_end(args);
}

// ncclGetVersion() of the NCCL loaded in this process, 0 if none is.
int loadedNcclVersion() {
    void* lib = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
    if (!lib) return 0;
    auto get = reinterpret_cast<ncclResult_t (*)(int*)>(dlsym(lib, "ncclGetVersion"));
    int version = 0;
    if (!get || get(&version) != ncclSuccess) version = 0;
    dlclose(lib);
    return version;
}

// NCCL before 2.27 knows neither exported version and never calls the
// plugin: say so as soon as it loads it.
__attribute__((constructor)) void checkNcclOnLoad() {
    int version = loadedNcclVersion();
    if (version > 0 && version < kFirstNcclWithV4)
        sayOnce(g_saidNccl,
                "NCCL %d.%d.%d loads profiler plugins up to ABI v3; this plugin speaks v5 "
                "(NCCL 2.28) and v4 (NCCL 2.27): it stays off, no NCCL collective is recorded",
                version / 10000, version / 100 % 100, version % 100);
}

// Whether the NCCL that called ABI `abi` is one that version was declared
// for (any NCCL from its first release on; unknown when none is loaded).
bool ncclMatches(int abi, int firstNccl) {
    int version = loadedNcclVersion();
    if (version == 0 || version >= firstNccl) return true;
    sayOnce(g_saidNccl,
            "NCCL %d.%d.%d called the v%d profiler interface, which meshscope declared for NCCL "
            "%d.%d and later: it stays off, no NCCL collective is recorded",
            version / 10000, version / 100 % 100, version % 100, abi, firstNccl / 10000,
            firstNccl / 100 % 100);
    return false;
}

constexpr int64_t kSinkRetryNs = 10'000'000;
std::atomic<const MeshscopeCollectiveSink*> g_sink{nullptr};
std::atomic<int64_t> g_nextSinkLookup{0};

int64_t steadyNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The attached agent's sink, kept once found (it stays valid for the
// process, core/plugin_abi/collective_sink.h); until then looked up at most
// every kSinkRetryNs (always when `now`), so an agent that attaches after
// NCCL created its communicators still gets their collectives.
const MeshscopeCollectiveSink* findSink(bool now) {
    if (const MeshscopeCollectiveSink* sink = g_sink.load(std::memory_order_acquire)) return sink;
    int64_t t = steadyNs();
    if (!now && t < g_nextSinkLookup.load(std::memory_order_relaxed)) return nullptr;
    g_nextSinkLookup.store(t + kSinkRetryNs, std::memory_order_relaxed);
    auto getter = reinterpret_cast<MeshscopeCollectiveSinkGetter>(
        dlsym(RTLD_DEFAULT, MESHSCOPE_COLLECTIVE_SINK_SYMBOL));
    const MeshscopeCollectiveSink* sink = getter ? getter() : nullptr;
    if (!sink) return nullptr;
    if (sink->abiVersion != MESHSCOPE_COLLECTIVE_SINK_ABI_VERSION) {
        sayOnce(g_saidSinkVersion,
                "the attached meshscope agent speaks collective-sink ABI v%u, this plugin v%u: "
                "use the plugin built with that agent; no NCCL collective is recorded",
                sink->abiVersion, MESHSCOPE_COLLECTIVE_SINK_ABI_VERSION);
        g_nextSinkLookup.store(INT64_MAX, std::memory_order_relaxed);  // never again
        return nullptr;
    }
    g_sink.store(sink, std::memory_order_release);
    return sink;
}

size_t envSize(const char* name, size_t fallback) {
    const char* text = std::getenv(name);
    char* end = nullptr;
    unsigned long long value = text ? std::strtoull(text, &end, 10) : 0;
    return text && end != text && *end == '\0' ? size_t(value) : fallback;
}

// The process's tracker, made once a sink is found (by whichever thread
// gets there first: NCCL's init or an event after a late attach).
CollectiveTracker* tracker(bool lookNow = false) {
    if (CollectiveTracker* t = g_tracker.load(std::memory_order_acquire)) return t;
    const MeshscopeCollectiveSink* sink = findSink(lookNow);
    if (!sink) return nullptr;
    size_t slots = envSize("MESHSCOPE_NCCL_PROFILER_SLOTS", kDefaultSlots);
    auto* made = new (std::nothrow) CollectiveTracker(*sink, slots);
    CollectiveTracker* expected = nullptr;
    if (made && !g_tracker.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
        delete made;  // another thread's won
        return expected;
    }
    return made;
}

// Tells the attached agent about `comm` once per agent (generation).
void announce(const CommInfo& comm) {
    const MeshscopeCollectiveSink* sink = g_sink.load(std::memory_order_acquire);
    uint64_t generation = sink ? sink->generation(sink->ctx) : 0;
    if (!generation) return;
    uint64_t seen = comm.announced.load(std::memory_order_relaxed);
    if (seen == generation || !comm.announced.compare_exchange_strong(seen, generation)) return;
    sink->communicator(sink->ctx, comm.hash, comm.name, comm.rank, comm.size, comm.nodes);
}

// The tracker for an event of `comm`, announcing the communicator to a newly
// attached agent; null (the event is not followed) while none ever was.
CollectiveTracker* trackerFor(const CommInfo* comm) {
    CollectiveTracker* t = comm ? tracker() : nullptr;
    if (!t) {
        if (comm)
            sayOnce(g_saidNoSink,
                    "NCCL ran a collective while no meshscope agent was attached in this process; "
                    "collectives are recorded from the agent's attach() on");
        return nullptr;
    }
    announce(*comm);
    return t;
}

// Follows one communicator, attached or not (see the top of this file).
// NCCL keeps one activation mask for all its communicators; every
// communicator asks for the same events.
ncclResult_t initComm(void** context, int* mask, int active, uint64_t hash, const char* name,
                      int nodes, int ranks, int rank) noexcept {
    *context = nullptr;
    try {
        std::lock_guard lock(g_initMutex);
        bool kernels = envSize("MESHSCOPE_NCCL_KERNEL_TIMING", 1) != 0;
        auto* comm = new (std::nothrow) CommInfo{};
        if (!comm) return ncclSuccess;
        comm->hash = hash;
        comm->rank = rank;
        comm->size = ranks;
        comm->nodes = nodes;
        comm->kernelTiming = kernels;
        std::snprintf(comm->name, sizeof comm->name, "%s", name ? name : "");
        if (tracker(true)) announce(*comm);
        *context = comm;
        *mask = kernels ? active : active & ~int(kKernelCh);
    } catch (...) {  // a mutex failure: stay off for this communicator
    }
    return ncclSuccess;
}

// Coll, P2p and KernelCh, whose descriptors read alike in v4 and v5.
template <typename Descr>
void* startTaskEvent(CollectiveTracker& t, const CommInfo& comm, void* api, const Descr& d) {
    switch (d.type) {
        case kColl:
            return t.startTask(comm, api, {d.coll.func, d.coll.count, d.coll.datatype},
                               d.coll.nChannels, true);
        case kP2p:
            return t.startTask(comm, api, {d.p2p.func, d.p2p.count, d.p2p.datatype},
                               d.p2p.nChannels, false);
        case kKernelCh:
            return t.startKernel(d.parentObj, d.kernelCh.pTimer);
        default:
            return nullptr;
    }
}

ncclResult_t initV5(void** context, uint64_t commId, int* mask, const char* commName, int nNodes,
                    int nRanks, int rank, DebugLogger) {
    *context = nullptr;
    if (!ncclMatches(5, kFirstNcclWithV5)) return ncclSuccess;
    return initComm(context, mask, kMaskV5, commId, commName, nNodes, nRanks, rank);
}

ncclResult_t initV4(void** context, int* mask, const char* commName, uint64_t commHash, int nNodes,
                    int nRanks, int rank, DebugLogger) {
    *context = nullptr;
    if (!ncclMatches(4, kFirstNcclWithV4)) return ncclSuccess;
    return initComm(context, mask, kMaskV4, commHash, commName, nNodes, nRanks, rank);
}

ncclResult_t startEventV5(void* context, void** handle, EventDescrV5* d) {
    *handle = nullptr;
    auto* comm = static_cast<const CommInfo*>(context);
    CollectiveTracker* t = d ? trackerFor(comm) : nullptr;
    if (!t) return ncclSuccess;
    if (d->type == kCollApi)
        *handle = t->startApi(*comm, {d->collApi.func, d->collApi.count, d->collApi.datatype});
    else if (d->type == kP2pApi)
        *handle = t->startApi(*comm, {d->p2pApi.func, d->p2pApi.count, d->p2pApi.datatype});
    else  // a v5 task's parent is its API call
        *handle = startTaskEvent(*t, *comm, d->parentObj, *d);
    return ncclSuccess;
}

ncclResult_t startEventV4(void* context, void** handle, EventDescrV4* d) {
    *handle = nullptr;
    auto* comm = static_cast<const CommInfo*>(context);
    CollectiveTracker* t = d ? trackerFor(comm) : nullptr;
    if (!t) return ncclSuccess;
    *handle = startTaskEvent(*t, *comm, nullptr, *d);  // v4 parents are groups, not calls
    return ncclSuccess;
}

ncclResult_t stopEvent(void* handle) {
    if (CollectiveTracker* t = g_tracker.load(std::memory_order_acquire)) t->stop(handle);
    return ncclSuccess;
}

ncclResult_t recordEventState(void* handle, int state, EventStateArgs* args) {
    CollectiveTracker* t = g_tracker.load(std::memory_order_acquire);
    if (t && args && state == kKernelChStop) t->kernelStopped(handle, args->kernelCh.pTimer);
    return ncclSuccess;
}

ncclResult_t finalize(void* context) {
    auto* comm = static_cast<CommInfo*>(context);
    if (!comm) return ncclSuccess;
    if (CollectiveTracker* t = g_tracker.load(std::memory_order_acquire)) t->flush(*comm);
    delete comm;
    return ncclSuccess;
}

}  // namespace
}  // namespace meshscope::nccl_plugin

// The symbols NCCL looks up (newest first).
extern "C" {
__attribute__((visibility("default"))) meshscope::nccl_abi::ProfilerV5 ncclProfiler_v5 = {
    meshscope::nccl_plugin::kPluginName,      meshscope::nccl_plugin::initV5,
    meshscope::nccl_plugin::startEventV5,     meshscope::nccl_plugin::stopEvent,
    meshscope::nccl_plugin::recordEventState, meshscope::nccl_plugin::finalize,
};
__attribute__((visibility("default"))) meshscope::nccl_abi::ProfilerV4 ncclProfiler_v4 = {
    meshscope::nccl_plugin::kPluginName,      meshscope::nccl_plugin::initV4,
    meshscope::nccl_plugin::startEventV4,     meshscope::nccl_plugin::stopEvent,
    meshscope::nccl_plugin::recordEventState, meshscope::nccl_plugin::finalize,
};
}
