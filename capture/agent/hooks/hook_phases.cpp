#include "capture/agent/hooks/hook_phases.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace meshscope::capture {

namespace {

int64_t steadyNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The clocks when the timing started: ticks convert to ns by their rates
// since then.
std::atomic<uint64_t> g_ticks0{0};
std::atomic<int64_t> g_ns0{0};

constexpr std::array<const char*, kHookPhaseCount> kNames = {
    "gil_ns",      "enter_ns",  "op_ns",   "outputs_ns", "stack_ns",
    "operands_ns", "submit_ns", "done_ns", "plain_ns"};
constexpr std::array<const char*, kAdapterCallCount> kAdapterNames = {
    "collective", "wait_tensor", "work_wait", "to_local", "guarded", "forward", "step"};

}  // namespace

uint64_t HookPhases::ticks() {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();  // ~8 ns; steady_clock would add ~25 ns a mark
#else
    return uint64_t(steadyNs());
#endif
}

void HookPhases::enable(bool on) {
    if (on) {
        for (auto& s : s_sum)
            s.store(0, std::memory_order_relaxed);
        for (auto* sums : {&s_adapterSum, &s_adapterCalls, &s_adapterMoved})
            for (auto& s : *sums)
                s.store(0, std::memory_order_relaxed);
        s_ops.store(0, std::memory_order_relaxed);
        s_plainOps.store(0, std::memory_order_relaxed);
        g_ns0.store(steadyNs(), std::memory_order_relaxed);
        g_ticks0.store(ticks(), std::memory_order_relaxed);
    }
    s_on.store(on, std::memory_order_relaxed);
}

std::map<std::string, double> HookPhases::perOp() {
    std::map<std::string, double> out;
    int64_t ns = steadyNs() - g_ns0.load(std::memory_order_relaxed);
    uint64_t ticks = HookPhases::ticks() - g_ticks0.load(std::memory_order_relaxed);
    if (!g_ns0.load(std::memory_order_relaxed) || ns <= 0 || !ticks) return out;
    double nsPerTick = double(ns) / double(ticks);
    uint64_t ops = s_ops.load(std::memory_order_relaxed);
    uint64_t plain = s_plainOps.load(std::memory_order_relaxed);
    for (size_t i = 0; i < kHookPhaseCount; ++i) {
        uint64_t n = HookPhase(i) == HookPhase::Plain ? plain : ops;
        out[kNames[i]] =
            n ? double(s_sum[i].load(std::memory_order_relaxed)) * nsPerTick / double(n) : 0.0;
    }
    out["dtensor_ops"] = double(ops);
    out["plain_ops"] = double(plain);
    for (size_t i = 0; i < kAdapterCallCount; ++i) {
        uint64_t calls = s_adapterCalls[i].load(std::memory_order_relaxed);
        std::string name = std::string("adapter_") + kAdapterNames[i];
        out[name + "_ns"] = calls ? double(s_adapterSum[i].load(std::memory_order_relaxed)) *
                                        nsPerTick / double(calls)
                                  : 0.0;
        out[name + "_calls"] = double(calls);
        out[name + "_moved_ns"] = calls
                                      ? double(s_adapterMoved[i].load(std::memory_order_relaxed)) *
                                            nsPerTick / double(calls)
                                      : 0.0;
    }
    return out;
}

}  // namespace meshscope::capture
