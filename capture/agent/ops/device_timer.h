#pragma once

// GPU durations of recorded ops, beside their host times. Device events
// (c10::Event with timing on: CUDA events on NVIDIA GPUs, through torch's
// device-generic interface, so nothing here is compiled with CUDA) are
// recorded on the op's current stream before and after it runs. The pairs
// wait in a bounded queue and are resolved later with query(), oldest
// first, by poll() on the agent's monitor thread: the training thread never
// waits for the GPU and asks it nothing (an event query and an elapsed time
// are driver calls; it resolves only what frees room in a full queue). Each
// resolved pair becomes a DeviceTimeRecord of its op. Events are pooled per device
// (creating one is a driver call). Thread-safe; a backend without timing
// events turns timing off for its device type, once.

#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/store/rank_writer.h"

namespace meshscope::capture {

class DeviceTimer {
  public:
    // `warn` hears, once per device type, why timing is off there.
    DeviceTimer(RankWriter& writer, std::function<void(const std::string&)> warn);

    // Whether ops are timed now (sampling by step: Agent::advanceStep).
    void setActive(bool active) { m_active.store(active, std::memory_order_relaxed); }
    bool active() const { return m_active.load(std::memory_order_relaxed); }

    // One op being timed: constructed right before it runs (start event),
    // end() right after it ran (end event: before anything else the host
    // does, which would count while the GPU idles), stop() once its record
    // has `op`'s seq. Inactive for host-only ops.
    class Span {
      public:
        // A host op (no device) does nothing here, inline: most ops on
        // the CPU, and every op at steps that time no device.
        Span(DeviceTimer& timer, std::optional<c10::Device> device) : m_timer(timer) {
            if (device && timer.active()) start(*device);
        }
        Span(const Span&) = delete;
        Span& operator=(const Span&) = delete;
        ~Span() {
            if (m_start || m_end) release();
        }
        void end() {
            if (m_start && !m_end) m_end = m_timer.recorded(*m_device);
        }
        void stop(OpSeq op) {
            if (m_start) finish(op);
        }

      private:
        void start(c10::Device device);
        void release();  // events of an op never recorded go back
        void finish(OpSeq op);
        DeviceTimer& m_timer;
        std::optional<c10::Device> m_device;
        std::optional<c10::Event> m_start, m_end;
    };

    // Writes the durations of queued ops whose end event has passed; whether
    // any is still queued (the monitor polls again soon).
    bool poll();
    // Writes queued durations as their ops finish on the device, for at most
    // `limit` (detach: not the hot path, yet a hung GPU must not hang it);
    // what is left counts as dropped.
    void drain(std::chrono::milliseconds limit);
    // Ops whose duration was given up: the queue was full, or drain() ran out
    // of time.
    uint64_t dropped() const;

    static constexpr size_t kMaxPending = 4096;

  private:
    struct Pending {
        c10::Event start, end;
        OpSeq op;
    };
    void finish(c10::Event start, c10::Event end, OpSeq op);
    // An event recorded now on `device`'s current stream, or none (timing is
    // off for its type, or, `opening` an op's span, the queue is full).
    std::optional<c10::Event> recorded(c10::Device device, bool opening = false);
    // With m_mutex held:
    c10::Event takeEvent(c10::Device device);
    void recycle(c10::Event event);
    bool resolveFront();
    void disable(c10::DeviceType type, const std::string& why);

    RankWriter& m_writer;
    std::function<void(const std::string&)> m_warn;
    std::atomic<bool> m_active{true};
    mutable std::mutex m_mutex;  // guards everything below
    std::deque<Pending> m_pending;
    std::unordered_map<c10::Device, std::vector<c10::Event>> m_spare;
    std::set<c10::DeviceType> m_off;
    uint64_t m_dropped = 0;
};

}  // namespace meshscope::capture
