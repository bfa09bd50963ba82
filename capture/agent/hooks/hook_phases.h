#pragma once

// Benchmarks only (MESHSCOPE_BENCH_HOOK=phases): where the dispatcher hook's
// time goes on a recorded DTensor op, phase by phase, measured inside the
// process with the CPU's time-stamp counter. tests/bench/capture_overhead.py
// reads it through meshscope.stats() ("hook_phases") and prints ns per op
// beside the wall-clock ratios: a breakdown that needs no profiler on the
// machine (the lent GPU machines have none) and no differencing of noisy
// ratios. Off (one relaxed load a phase) unless a benchmark turned it on.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace meshscope::capture {

// A DTensor op's phases in the order the hook runs them.
enum class HookPhase : uint8_t {
    Gil,       // taking the GIL around the op
    Enter,     // start time, the op's frame (nesting, GPU span), its arguments kept
    Op,        // the op itself (DTensor's dispatch below the hook): not the agent's
    Outputs,   // end time, the outputs scanned, the op's schema facts
    Stack,     // the user's Python frame (FrameCache::userStack)
    Operands,  // operand facts and tensor ids (spec cache, tensor table)
    Submit,    // the record handed to the writer
    Done,      // the rest: the frame closed, counters
    Plain,     // a plain op's own hook time (its op not counted), per plain op
};
inline constexpr size_t kHookPhaseCount = 9;

class HookPhases {
  public:
    // Starts (and zeroes) or stops the timing, process-wide.
    static void enable(bool on);
    static bool on() { return s_on.load(std::memory_order_relaxed); }

    // While alive, the DTensor op this thread's hook runs is timed (the
    // clock starts); laps outside one (another path's record) count nothing.
    // (Each mark reads the process-wide switch before the thread's clock: a
    // thread_local in this extension costs a __tls_get_addr call, which an
    // untimed op should not pay.)
    class Op {
      public:
        Op() : m_timed(on()) {
            if (m_timed) t_last = ticks();
        }
        ~Op() {
            if (m_timed) t_last = 0;
        }
        Op(const Op&) = delete;
        Op& operator=(const Op&) = delete;

      private:
        bool m_timed;
    };
    // `phase` of the timed op ended now; the next one starts.
    static void lap(HookPhase phase) {
        if (on() && t_last) mark(phase);
    }
    // The timed op is recorded: one more op the phases divide over.
    static void opDone() {
        if (!on() || !t_last) return;
        mark(HookPhase::Done);
        s_ops.fetch_add(1, std::memory_order_relaxed);
    }
    // A plain op's own time (`own` ticks), counted apart.
    static void plainOp(uint64_t own) {
        add(HookPhase::Plain, own);
        s_plainOps.fetch_add(1, std::memory_order_relaxed);
    }
    static uint64_t ticks();

    // Nanoseconds per op of each phase ("gil_ns", ..., "plain_ns"), with
    // "dtensor_ops" and "plain_ops"; empty when never enabled.
    static std::map<std::string, double> perOp();

  private:
    static void mark(HookPhase phase) {
        uint64_t now = ticks();
        add(phase, now - t_last);
        t_last = now;
    }
    static void add(HookPhase phase, uint64_t n) {
        s_sum[size_t(phase)].fetch_add(n, std::memory_order_relaxed);
    }
    static inline std::atomic<bool> s_on{false};
    static inline std::array<std::atomic<uint64_t>, kHookPhaseCount> s_sum{};
    static inline std::atomic<uint64_t> s_ops{0}, s_plainOps{0};
    static inline thread_local uint64_t t_last = 0;
};

}  // namespace meshscope::capture
