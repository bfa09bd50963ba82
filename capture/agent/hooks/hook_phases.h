#pragma once

// Benchmarks only (MESHSCOPE_BENCH_HOOK=phases): where the dispatcher hook's
// time goes on a recorded DTensor op, phase by phase, measured inside the
// process with the CPU's time-stamp counter. tests/bench/capture_overhead.py
// reads it through meshscope.stats() ("hook_phases") and prints ns per op
// beside the wall-clock ratios: a breakdown that needs no profiler on the
// machine (the lent GPU machines have none) and no differencing of noisy
// ratios. Off (one relaxed load a phase) unless a benchmark turned it on.
//
// The same switch times the C++ ends of the Python adapters in the same
// steps (HookPhases::Adapter): each call's own ticks, the original call it
// wraps left out. A loop of one call (tests/bench/adapter_calls.py) keeps
// code and data warm; here each call meets the caches a training step
// leaves, which is what the overhead benchmark's adapters cost.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

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

// The adapter calls HookPhases::Adapter times, by the call that counts.
enum class AdapterCall : uint8_t {
    Collective,  // a functional collective's wrapper (issue, hand-over to the tracker)
    WaitTensor,  // funcol.wait_tensor's wrapper (the collective waited for, ended, recorded)
    WorkWait,    // Work.wait()'s two calls into the agent (before and after the wait)
    ToLocal,     // DTensor.to_local()/full_tensor(): the output's provenance
    Guarded,     // DTensor.from_local()/redistribute()/distribute_tensor(): the guard
    Forward,     // the root module call's enter_forward (phase, inputs tagged)
    Step,        // an optimizer step's record and the step's bookkeeping (advance_step)
};
inline constexpr size_t kAdapterCallCount = 7;

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
    static uint64_t ticks();

    // The agent's own ticks of a call that wraps another: from `start` (0:
    // not timed) to its end, the wrapped call's ticks, between pause() and
    // resume(), left out.
    class OwnTime {
      public:
        explicit OwnTime(uint64_t start) : m_start(start) {}
        void pause() {
            if (m_start && !m_paused) m_paused = ticks();
        }
        // The ticks of the pause it ends (0: none).
        uint64_t resume() {
            if (!m_paused) return 0;
            uint64_t paused = ticks() - m_paused;
            m_excluded += paused;
            m_paused = 0;
            return paused;
        }
        bool paused() const { return m_paused != 0; }
        OwnTime(const OwnTime&) = delete;
        OwnTime& operator=(const OwnTime&) = delete;

      protected:
        bool timed() const { return m_start != 0; }
        uint64_t own() const { return ticks() - m_start - m_excluded; }

      private:
        uint64_t m_start, m_paused = 0, m_excluded = 0;
    };
    // A plain op's own time in the hook from `entered` (the hook's entry
    // ticks, 0 when not timed), the op it redispatches paused out; counted
    // apart from the DTensor ops' phases.
    class PlainOp : public OwnTime {
      public:
        explicit PlainOp(uint64_t entered) : OwnTime(entered) {}
        ~PlainOp() {
            if (!timed()) return;
            add(HookPhase::Plain, own());
            s_plainOps.fetch_add(1, std::memory_order_relaxed);
        }
    };
    // While alive, the adapter call `kind` is timed, the original it wraps
    // paused out. `counts`: a call of its own (false: more ticks of the call
    // counted last, as Work.wait()'s second call into the agent).
    class Adapter : public OwnTime {
      public:
        explicit Adapter(AdapterCall kind, bool counts = true)
            : OwnTime(on() ? ticks() : 0), m_kind(kind), m_counts(counts) {
            if (timed()) m_outer = std::exchange(t_adapter, this);
        }
        ~Adapter() {
            if (!timed()) return;
            t_adapter = m_outer;
            adapter(m_kind, own(), m_counts);
        }
        // The end of a Moved pause: its ticks are moved time.
        void resumeMoved() {
            s_adapterMoved[size_t(m_kind)].fetch_add(resume(), std::memory_order_relaxed);
        }

      private:
        AdapterCall m_kind;
        bool m_counts;
        Adapter* m_outer = nullptr;
    };

    // While alive, this thread's timed adapter call is paused and the ticks
    // count apart, as its "moved" time: releasing what torch would have
    // released itself without meshscope, only later (a collective's Work
    // after its wait_tensor, the DTensor specs the agent's cache outlived).
    // Not the agent's cost, only where it lands. Inside the call an adapter
    // wraps (paused already) it counts nothing.
    class Moved {
      public:
        Moved() {
            if (on() && t_adapter && !t_adapter->paused()) {
                m_adapter = t_adapter;
                m_adapter->pause();
            }
        }
        ~Moved() {
            if (m_adapter) m_adapter->resumeMoved();
        }
        Moved(const Moved&) = delete;
        Moved& operator=(const Moved&) = delete;

      private:
        Adapter* m_adapter = nullptr;
    };

    // Nanoseconds per op of each phase ("gil_ns", ..., "plain_ns"), with
    // "dtensor_ops" and "plain_ops", and per adapter call
    // ("adapter_collective_ns", ...) with their counts
    // ("adapter_collective_calls", ...); empty when never enabled.
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
    static void adapter(AdapterCall kind, uint64_t n, bool counts) {
        s_adapterSum[size_t(kind)].fetch_add(n, std::memory_order_relaxed);
        if (counts) s_adapterCalls[size_t(kind)].fetch_add(1, std::memory_order_relaxed);
    }
    static inline std::atomic<bool> s_on{false};
    static inline std::array<std::atomic<uint64_t>, kHookPhaseCount> s_sum{};
    static inline std::atomic<uint64_t> s_ops{0}, s_plainOps{0};
    static inline std::array<std::atomic<uint64_t>, kAdapterCallCount> s_adapterSum{},
        s_adapterCalls{}, s_adapterMoved{};
    static inline thread_local uint64_t t_last = 0;
    static inline thread_local Adapter* t_adapter = nullptr;  // the innermost timed one
};

}  // namespace meshscope::capture
