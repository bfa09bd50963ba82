#pragma once

// PendingCollectives: the collective tracker's table of the collectives whose
// life has not ended (collective_tracker.h), by seq, with what says each is
// complete: the backend's Work, an event on the stream it ran on, or the
// result a wait_tensor waits for. Pure bookkeeping, without Python or the
// Agent, so the rules are unit-tested (tests/capture/pending_collectives_test.cpp):
// when a collective ends, which ones are overdue, what is left at the end.
//
// Locking: the table has its own mutex. Works and events are asked outside
// it (a backend may take the GIL), and a collective that ended goes to the
// sink, and its references to works and result storages are released,
// outside it too: a Work's last reference destroys its output tensors, which
// takes the GIL.

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "capture/agent/interop/frames.h"
#include "core/store/records.h"

namespace meshscope::capture {

// A collective whose life has not ended, as the tracker holds it.
struct TrackedCollective {
    CollectiveSeq seq;  // its place in the rank's order, + 1
    std::string kind, group;
    StringId kindId, groupId;
    int64_t bytes = 0;
    int64_t startNs = 0, issuedNs = 0;
    int64_t step = 0;
    uint32_t thread = 0;
    unsigned long pythonThread = 0;  // ident of the thread that issued it
    StackId stack;                   // the user frame that issued it
    std::string file;                // the issuing user frame's, or ""
    int line = 0;
    // " at train.py:30", or "": made only for messages, not per collective
    std::string where() const { return whereText(file, line); }
    OpSeq op;                      // the op it was recorded under (c10d calls)
    uint64_t enclosing = 0;        // CollectiveBridge token of the op it ran inside
    bool returned = false;         // the issuing call returned
    bool waited = false;           // a wait returned on the host
    unsigned long waiter = 0;      // ident of a thread blocked in its wait, 0: none
    bool reported = false;         // a hang incident was written for it
    bool completesOnWait = false;  // its backend's work is complete once wait() returned
    // What says it is complete: the backend's work, and for functional
    // collectives the result that wait_tensor is called on (by storage).
    c10::intrusive_ptr<c10d::Work> work;
    std::shared_ptr<c10::Event> streamDone;  // no work: passed once it ran on its stream
    c10::weak_intrusive_ptr<c10::StorageImpl> result{c10::intrusive_ptr<c10::StorageImpl>()};
    const void* resultKey = nullptr;

    int64_t position() const { return seq.value() - 1; }
    // "all_reduce on default_pg (2 ranks), 16 B, its collective #3"
    std::string describe() const;
    // A copy for callers outside the lock, holding no reference to the work
    // or result: the entry keeps its own, so dropping the copy's never
    // destroys either.
    TrackedCollective detached() const;
};

// A collective whose life ended, on its way to the store.
struct EndedCollective {
    TrackedCollective collective;  // still holding its work and result
    CollectiveState state;
    int64_t endNs;
    std::string error;
};

class PendingCollectives {
  public:
    // Gets each collective whose life ended, in the order they ended, outside
    // the lock, while it still holds its work and result.
    using Sink = std::function<void(const EndedCollective&)>;
    using Clock = std::function<int64_t()>;       // the rank's ns clock
    static constexpr size_t kCapacity = 1 << 16;  // beyond: ended as issued

    PendingCollectives(Sink sink, Clock clock, size_t capacity = kCapacity)
        : m_sink(std::move(sink)), m_clock(std::move(clock)), m_capacity(capacity) {}

    // A collective about to be issued. False when the table is full: it is
    // ended as unwaited right away ("not followed").
    bool add(TrackedCollective c);
    // The issuing call returned at `nowNs` (see CollectiveTracker::issued).
    // Returns whether it completes on the device (someone must poll).
    bool returned(CollectiveSeq seq, int64_t nowNs, c10::intrusive_ptr<c10d::Work> work,
                  bool completesOnWait, const at::Tensor& result, OpSeq op,
                  std::shared_ptr<c10::Event> streamDone);
    // `waiter` (a thread ident) blocks in the wait of the collective with
    // this work or result; returns its seq (invalid: not tracked).
    CollectiveSeq waitingForWork(const c10d::Work* work, unsigned long waiter);
    CollectiveSeq waitingForResult(const at::Tensor& result, unsigned long waiter);
    // A wait returned: ended when nothing else says it is complete, or its
    // work is complete (or complete once waited for).
    void waited(CollectiveSeq seq);
    // Ended by the issuing call or a wait raising `error`. Returns it
    // (detached) when it was tracked.
    std::optional<TrackedCollective> fail(CollectiveSeq seq, const std::string& error,
                                          CollectiveState state = CollectiveState::Failed);
    // The latest collective `thread` issued and still pending.
    std::optional<TrackedCollective> latestOn(uint32_t thread);
    // Whether poll() ended `seq` as failed (among the last kFailedKept).
    bool failedByPoll(CollectiveSeq seq);
    static constexpr size_t kFailedKept = 64;

    // Asks the works and events of the pending collectives (outside the
    // lock) and ends those that completed, and functional collectives whose
    // result is gone unwaited.
    struct Polled {
        bool stillOnDevice = false;  // something still waits for its backend
        std::vector<std::pair<TrackedCollective, std::string>> failures;  // asynchronous errors
    };
    Polled poll();
    // Pending longer than `ns` at `nowNs` and not reported before; marks them
    // reported.
    std::vector<TrackedCollective> overdue(int64_t nowNs, int64_t ns);
    // The rank's recording ends: everything is ended, pending (`why`) or,
    // for a functional collective with nothing to ask whose result nobody
    // waited for, unwaited. Returns each thread's latest pending one.
    std::map<uint32_t, TrackedCollective> endAll(const std::string& why);

    size_t size();
    // Whether this table's lock is held now (for the tests: nothing the
    // sink or a work's destructor does may run under it).
    bool locked() const { return m_locked.load(std::memory_order_relaxed); }

  private:
    using Table = std::unordered_map<int64_t, TrackedCollective>;
    // What a method ends under the lock, sunk and let go of when it is
    // destroyed: declared before the lock, so after it is released.
    class Released {
      public:
        explicit Released(PendingCollectives& table) : m_table(table) {}
        ~Released();
        Released(const Released&) = delete;
        Released& operator=(const Released&) = delete;
        std::vector<EndedCollective> ended;

      private:
        PendingCollectives& m_table;
    };
    // The table's lock, marking locked() while held.
    class Lock {
      public:
        explicit Lock(PendingCollectives& table) : m_table(table), m_guard(table.m_mutex) {
            m_table.m_locked.store(true, std::memory_order_relaxed);
        }
        ~Lock() { m_table.m_locked.store(false, std::memory_order_relaxed); }
        Lock(const Lock&) = delete;
        Lock& operator=(const Lock&) = delete;

      private:
        PendingCollectives& m_table;
        std::lock_guard<std::mutex> m_guard;
    };
    // Under the lock: takes `it` out of the table into `released`.
    void end(Table::iterator it, CollectiveState state, int64_t endNs, std::string error,
             Released& released);

    Sink m_sink;
    Clock m_clock;
    size_t m_capacity;
    std::mutex m_mutex;
    std::atomic<bool> m_locked{false};
    Table m_live;                                         // by seq
    std::unordered_map<const void*, int64_t> m_byResult;  // result storage -> seq
    std::deque<int64_t> m_failedByPoll;                   // newest last
};

}  // namespace meshscope::capture
