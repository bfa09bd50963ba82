#pragma once

// MESHSCOPE_HOT marks a function on the capture agent's per-op path (the
// dispatcher hook, the op record, the writer's queue). GCC and Clang put
// such functions in .text.hot, which the linker lays out together: the few
// kilobytes of code every op runs sit on a handful of adjacent pages instead
// of being spread over the extension's 1.8 MB of text. Between two ops,
// torch's and Python's code evicts the agent's from the core's caches; the
// agent's code ran about 20 instructions per instruction-cache miss
// (callgrind), so each op pays for every line and every page it touches.
#if defined(__GNUC__)
#define MESHSCOPE_HOT [[gnu::hot]]
// The same for a lambda, after its parameter list: `[&](bool ran)
// MESHSCOPE_HOT_LAMBDA { ... }` (a lambda's call operator is a function of
// its own, laid out with the unmarked code otherwise).
#define MESHSCOPE_HOT_LAMBDA __attribute__((hot))
#else
#define MESHSCOPE_HOT
#define MESHSCOPE_HOT_LAMBDA
#endif

// MESHSCOPE_PREFETCHES marks a function that prefetches memory it is about to
// write (__builtin_prefetch(p, 1, 3)): on x86 it may then use PREFETCHW,
// which fetches the line for ownership. The hook writes an op's record into
// queue memory no core holds any more and then takes a lock, whose fence
// waits for those stores: fetched a few hundred ns earlier, the misses
// overlap the hook's other work instead.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define MESHSCOPE_PREFETCHES [[gnu::target("prfchw")]]
#else
#define MESHSCOPE_PREFETCHES
#endif
