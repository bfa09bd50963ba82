#pragma once

// meshscope's own declaration of NCCL's profiler-plugin ABI, written from
// NCCL's documentation (ext-profiler/README.md of NCCL 2.28). NCCL dlopens
// the library named by NCCL_PROFILER_PLUGIN and looks up, newest first,
// ncclProfiler_v5 (NCCL 2.28 and later) ... ncclProfiler_v1; the plugin
// exports v5 and v4 (NCCL 2.27). The structs must match NCCL's layouts
// field by field: every field keeps its documented type and order, also the
// ones meshscope does not read. NCCL never dereferences event handles; they
// are the plugin's own opaque values.

#include <nccl.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace meshscope::nccl_abi {

// The profiler ABI is NCCL 2's; a major version change means a new ABI.
static_assert(NCCL_MAJOR == 2, "nccl_profiler_abi.h declares NCCL 2's profiler ABI");

// First NCCL releases that load each exported version.
inline constexpr int kFirstNcclWithV4 = 22700;  // NCCL_VERSION(2, 27, 0)
inline constexpr int kFirstNcclWithV5 = 22800;  // NCCL_VERSION(2, 28, 0)

// Event types (bits of the activation mask the plugin returns from init).
enum EventType : uint64_t {
    kGroup = 1u << 0,
    kColl = 1u << 1,  // a collective task, started when its plan runs
    kP2p = 1u << 2,
    kProxyOp = 1u << 3,
    kProxyStep = 1u << 4,
    kProxyCtrl = 1u << 5,
    kKernelCh = 1u << 6,  // one kernel channel's GPU start/stop (globaltimer ns)
    kNetPlugin = 1u << 7,
    kGroupApi = 1u << 8,  // v5: API calls, on the calling thread
    kCollApi = 1u << 9,
    kP2pApi = 1u << 10,
    kKernelLaunch = 1u << 11,
};

// recordEventState states meshscope reads (the enum has more).
enum EventState : int {
    kKernelChStop = 22,  // args->kernelCh.pTimer: the channel's GPU stop time
};

// NCCL's logger; the plugin writes to stderr instead and never calls it.
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);

// Descriptor members that v4 and v5 lay out alike.
struct ProxyOpDescr {
    pid_t pid;
    uint8_t channelId;
    int peer;
    int nSteps;
    int chunkSize;
    int isSend;
};
struct ProxyStepDescr {
    int step;
};
struct KernelChDescr {
    uint8_t channelId;
    uint64_t pTimer;  // GPU globaltimer ns at the channel's start
};
struct NetPluginDescr {
    int64_t id;
    void* data;
};

// Event descriptor of ABI v5 (NCCL 2.28).
struct EventDescrV5 {
    uint64_t type;    // one EventType
    void* parentObj;  // the parent's handle as this plugin returned it, or null
    int rank;
    union {
        struct {
            bool graphCaptured;
            int groupDepth;
        } groupApi;
        struct {
            const char* func;  // "AllReduce", ...
            size_t count;
            const char* datatype;  // "ncclFloat32", ...
            int root;
            void* stream;
            bool graphCaptured;
        } collApi;
        struct {
            const char* func;
            size_t count;
            const char* datatype;
            void* stream;
            bool graphCaptured;
        } p2pApi;
        struct {
            void* stream;
        } kernelLaunch;
        struct {
            uint64_t seqNumber;
            const char* func;
            const void* sendBuff;
            void* recvBuff;
            size_t count;
            int root;
            const char* datatype;
            uint8_t nChannels;  // kernel channels: one KernelCh event each
            uint8_t nWarps;
            const char* algo;
            const char* proto;
            void* parentGroup;
        } coll;
        struct {
            const char* func;
            void* buff;
            const char* datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
            void* parentGroup;
        } p2p;
        ProxyOpDescr proxyOp;
        ProxyStepDescr proxyStep;
        KernelChDescr kernelCh;
        NetPluginDescr netPlugin;
    };
};

// Event descriptor of ABI v4 (NCCL 2.27): a one-byte type, no API events.
struct EventDescrV4 {
    uint8_t type;
    void* parentObj;
    int rank;
    union {
        struct {
            uint64_t seqNumber;
            const char* func;
            const void* sendBuff;
            void* recvBuff;
            size_t count;
            int root;
            const char* datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char* algo;
            const char* proto;
        } coll;
        struct {
            const char* func;
            void* buff;
            const char* datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
        } p2p;
        ProxyOpDescr proxyOp;
        ProxyStepDescr proxyStep;
        KernelChDescr kernelCh;
        NetPluginDescr netPlugin;
    };
};

// recordEventState arguments, the same shape in v4 and v5.
union EventStateArgs {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        void* data;
    } netPlugin;
    struct {
        uint64_t pTimer;  // GPU globaltimer ns at the channel's stop
    } kernelCh;
};

// The exported ncclProfiler_v5 symbol.
struct ProfilerV5 {
    const char* name;
    ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask,
                         const char* commName, int nNodes, int nRanks, int rank, DebugLogger logfn);
    ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
    ncclResult_t (*stopEvent)(void* eHandle);
    ncclResult_t (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
    ncclResult_t (*finalize)(void* context);
};

// The exported ncclProfiler_v4 symbol: init takes the name before the hash.
struct ProfilerV4 {
    const char* name;
    ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName,
                         uint64_t commHash, int nNodes, int nRanks, int rank, DebugLogger logfn);
    ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
    ncclResult_t (*stopEvent)(void* eHandle);
    ncclResult_t (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
    ncclResult_t (*finalize)(void* context);
};

}  // namespace meshscope::nccl_abi
