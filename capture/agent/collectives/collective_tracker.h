#pragma once

// The one owner of a collective's life in the agent, from issue to the end
// of its life, whoever issued it (a c10d call the dispatcher hook sees, a
// functional collective of DTensor's redistributions or tensor parallelism)
// and whatever the backend. Hooks and adapters only report what they see:
//
//   issue()    the collective is about to run: its place in the rank's
//              order (the record's seq, reserved now), kind, group, bytes,
//              step and the user frame that issued it;
//   issued()   the issuing call returned: the Work that says when it is
//              complete and, for a functional collective, its result
//              tensor, whose wait_tensor waits for it;
//   waiting()/waited()/failed()
//              a wait (Work.wait(), wait_tensor, an AsyncCollectiveTensor's
//              lazy wait) started, returned, or raised.
//
// A collective is complete when its backend says so: Work::isCompleted()
// (NCCL: the work finished on the device, which can be long after wait()
// returned on the host). A call that returns no Work ran on a device stream
// (NCCL's synchronous collectives since torch 2.7 run on the current stream
// and return none) or is done: on a stream, it is complete when an event
// recorded there as the call returned has passed (streamMark); otherwise
// when its wait returned, or when the call returned. The
// monitor thread (CollectiveMonitor) asks the works still pending, ends
// those that completed or failed asynchronously, and, as the watchdog,
// writes a hang incident with every thread's Python stacks once one stays
// pending past its time. A collective's record (CollectiveRecord, state,
// issue-to-end span, call site) is built here and nowhere else, once its
// life ended: completed, failed, released unwaited, or still pending when
// the rank's recording ends (exit, a signal, an abort).
//
// The table of pending collectives, with its locking rules, is
// PendingCollectives (pending_collectives.h); this class adds what needs
// the Agent and Python: seqs, user frames, records and incidents.

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "capture/agent/collectives/pending_collectives.h"
#include "capture/agent/interop/frames.h"
#include "core/store/rank_writer.h"
#include "core/store/records.h"

namespace meshscope::capture {

class Agent;

// What the issuing hook knows of a collective before it runs.
struct CollectiveIssue {
    std::string kind;   // "all_reduce"
    std::string group;  // "default_pg (2 ranks)", "mesh dim tp"
    int64_t bytes = 0;
    int64_t startNs = 0;
};

class CollectiveTracker {
  public:
    using Id = CollectiveSeq;

    explicit CollectiveTracker(Agent& agent);

    // A collective about to be issued on this thread. Requires the GIL (the
    // user frame). Returns its id (its seq); invalid when not tracked.
    Id issue(CollectiveIssue what, uint64_t enclosingToken = 0);
    // The issuing call returned. `work`: the backend's work (null: none),
    // complete once its wait() returned when `completesOnWait` (gloo), else
    // when it says so; `result`: a functional collective's result
    // (undefined: none); `op`: the op the hook recorded it under; `own`: the
    // CollectiveBridge token of the call, under which NCCL's own events of
    // it are reported; `streamDone`: without a work, the call's streamMark.
    void issued(Id id, c10::intrusive_ptr<c10d::Work> work, bool completesOnWait,
                const at::Tensor& result, OpSeq op, uint64_t own,
                std::shared_ptr<c10::Event> streamDone = {});
    // An event recorded now on `device`'s current stream, or null: a CPU
    // device, or one without events. Passed once what the stream ran before
    // it (a collective the call just enqueued) finished.
    static std::shared_ptr<c10::Event> streamMark(std::optional<c10::Device> device);
    // A wait starts on the calling thread (returns the collective waited
    // for, if tracked), and returns: the collective may be complete.
    Id waitingForWork(const c10d::Work* work);
    Id waitingForTensor(const at::Tensor& tensor);
    void waited(Id id);
    // The issuing call or a wait raised `error`: the collective failed (`what`
    // names it when it is not tracked: "Work.wait"). Records it and a
    // collective-error incident; returns the note for the exception.
    // Requires the GIL (the stack where it raised).
    std::string failed(Id id, const std::string& error, std::string_view what = "collective");
    // The issuing call or a wait raised something that is not a failure
    // (KeyboardInterrupt, SystemExit): its life ended there, no incident.
    void ended(Id id, const std::string& why);
    // The latest collective issued on this thread and still pending (what a
    // failing DTensor call was waiting for).
    std::optional<TrackedCollective> latestOnThisThread();

    // The monitor: asks held works whether they completed (without the GIL).
    // Returns whether anything still waits for its backend to say so.
    bool poll();
    // Pending longer than `ns` and not reported before; marks them reported.
    std::vector<TrackedCollective> overdue(int64_t nowNs, int64_t ns);
    // A normal end: asks the pending works until they completed or `budget`
    // ran out.
    void settle(std::chrono::milliseconds budget);
    // The rank's recording ends (`why`: "the process exited", "its rank got
    // SIGTERM"): what is still pending is recorded as pending, each with a
    // hang incident (`kind`), without Python. Safe from the abort path.
    void endAll(const std::string& why, IncidentKind kind);

    // The record of a collective a library ran below torch (NCCL, reported
    // by the profiler plugin) under no collective the tracker follows:
    // complete when reported.
    static CollectiveRecord libraryRecord(RankWriter& writer, std::string_view kind,
                                          const std::string& group, int64_t bytes, int64_t startNs,
                                          int64_t endNs, uint32_t thread, int64_t step);

    // Incidents and records written in the abort path and by the monitor carry
    // no Python: `stack` is the issuing frame or one found earlier.
    IncidentSeq recordIncident(const TrackedCollective& c, IncidentKind kind,
                               const std::string& error, StackId stack, const std::string& detail);

  private:
    void submit(const EndedCollective& e);

    Agent& m_agent;
    PendingCollectives m_pending;
    // The failures poll() found (an error the backend raised while a thread
    // waited) with the incident it recorded for each, newest last: a wait
    // that then raises for the same collective names it and points at that
    // incident instead of recording a second one under the wait's name.
    // failed() waits up to kAwaitAsyncFailure for a collective poll() ended
    // as failed and is still recording (a busy host can hold the monitor
    // thread that long); no lock is held while poll() ends collectives,
    // which may need the GIL.
    static constexpr size_t kAsyncFailuresKept = PendingCollectives::kFailedKept;
    static constexpr std::chrono::milliseconds kAwaitAsyncFailure{2000};
    std::mutex m_asyncFailed;
    std::condition_variable m_asyncFailureAdded;
    std::deque<std::pair<TrackedCollective, IncidentSeq>> m_asyncFailures;
    friend class CollectiveMonitor;
};

// The thread that asks pending works for completion (every kPollInterval
// while any waits for its backend, else every kIdleInterval; a work that
// completes on the device wakes it only when it was idle, so a busy run
// pays no thread switch per collective), that resolves the GPU durations
// of ops the DeviceTimer queued (every kPollInterval while any is queued),
// and, as the watchdog, reports a collective pending past `watchdogSeconds`
// (0: no watchdog) once, with the Python stacks of all threads, leaving the
// training alone.
class CollectiveMonitor {
  public:
    CollectiveMonitor(Agent& agent, double watchdogSeconds);
    ~CollectiveMonitor();  // stops and joins the thread (releasing the GIL meanwhile)
    CollectiveMonitor(const CollectiveMonitor&) = delete;
    CollectiveMonitor& operator=(const CollectiveMonitor&) = delete;
    // A work that completes on the device was handed over: poll from now on.
    void workPending();

    static constexpr std::chrono::milliseconds kPollInterval{20};
    static constexpr std::chrono::milliseconds kIdleInterval{200};

  private:
    void run();
    void reportHangs(const std::vector<TrackedCollective>& late);

    Agent& m_agent;
    double m_seconds;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false, m_woken = false;
    std::atomic<bool> m_polling{false};
    std::thread m_thread;
};

}  // namespace meshscope::capture
