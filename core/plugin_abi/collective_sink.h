#pragma once

/* The C ABI between the capture agent and plugins that observe collectives
 * below torch (plugins/nccl_profiler, loaded by NCCL itself). A plugin never
 * links the agent: it looks up MESHSCOPE_COLLECTIVE_SINK_SYMBOL in the
 * process (dlsym(RTLD_DEFAULT, ...)); the agent's extension exports it and
 * returns its sink while attached, or NULL. Plain C so either side can be
 * built by any compiler. Any change to these structs bumps
 * MESHSCOPE_COLLECTIVE_SINK_ABI_VERSION; a plugin refuses a sink of another
 * version (it says so once and records nothing).
 *
 * Every function may be called from any thread (NCCL's proxy and CUDA
 * callback threads included), never throws, and returns quickly.
 *
 * The getter returns NULL while no agent is attached; once it returned the
 * sink, the sink stays valid for the life of the process: its functions do
 * nothing while no agent is attached, and generation() tells a plugin that
 * another agent (another rank file) took over, so it announces its
 * communicators again. A plugin asks the getter again later when it got
 * NULL (communicators NCCL created before attach). */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MESHSCOPE_COLLECTIVE_SINK_ABI_VERSION 2u
#define MESHSCOPE_COLLECTIVE_SINK_SYMBOL "meshscope_collective_sink"

/* One collective (or point-to-point transfer) as the library ran it. */
typedef struct MeshscopeCollectiveEvent {
    const char* kind;    /* the library's name for it: "AllReduce", "Send" */
    uint64_t commHash;   /* communicator id, equal on every rank of it */
    int32_t commRank;    /* this process's rank in the communicator */
    int32_t commSize;    /* ranks in the communicator */
    int64_t bytes;       /* count * datatype size; 0 when the datatype is unknown */
    int64_t hostStartNs; /* sink clock (nowNs) when the library was called */
    int64_t hostEndNs;   /* sink clock at the library's last report on it */
    /* GPU globaltimer ns (the device's clock, not the host's) of the first
     * kernel channel's start and the last one's end; both 0 when unknown. */
    int64_t deviceStartNs;
    int64_t deviceEndNs;
    uint64_t opToken; /* currentOp() on the calling thread; 0: no op known */
} MeshscopeCollectiveEvent;

typedef struct MeshscopeCollectiveSink {
    uint32_t abiVersion; /* MESHSCOPE_COLLECTIVE_SINK_ABI_VERSION of the agent */
    void* ctx;           /* passed back to every function */
    /* Monotonic ns on the rank's clock (the store's startNs/endNs). */
    int64_t (*nowNs)(void* ctx);
    /* A token for the op running on the calling thread, 0 if none. */
    uint64_t (*currentOp)(void* ctx);
    /* A communicator the plugin watches; once per communicator. */
    void (*communicator)(void* ctx, uint64_t commHash, const char* name, int32_t rank, int32_t size,
                         int32_t nodes);
    void (*record)(void* ctx, const MeshscopeCollectiveEvent* event);
    /* Total events the plugin could not follow (its pool was full). */
    void (*dropped)(void* ctx, uint64_t total);
    /* Nonzero id of the attached agent, new at every attach; 0 while none
     * is attached. Communicators are announced once per generation. */
    uint64_t (*generation)(void* ctx);
} MeshscopeCollectiveSink;

/* Type of the exported MESHSCOPE_COLLECTIVE_SINK_SYMBOL. */
typedef const MeshscopeCollectiveSink* (*MeshscopeCollectiveSinkGetter)(void);

#ifdef __cplusplus
}
#endif
