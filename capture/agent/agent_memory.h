#pragma once

// The agent's own memory for what it reads on every op: the Agent object
// (with the direct-mapped tables of its caches) and its caches' hash nodes.
// Taken from 2 MiB regions advised as transparent huge pages, apart from the
// training's heap. On a machine where a TLB miss is costly (a virtual
// machine walks two page tables), the agent's per-op reads otherwise land on
// scattered heap pages between the training's tensor buffers, each a TLB
// entry of its own. Where huge pages are off or refused, the regions are
// ordinary pages and only the grouping remains. Nothing of the training's
// own allocations changes.

#include <memory_resource>

namespace meshscope::capture {

// Thread-safe; lives for the process. Memory handed back is reused for the
// agent's later allocations, never returned to the system.
std::pmr::memory_resource* agentMemory();

}  // namespace meshscope::capture
