#pragma once

// Failures other than mixed tensors, as the agent sees them. An error that
// DTensor's dispatch, a redistribution or a collective raises becomes an
// incident (recorded and flushed before the exception propagates, with a
// note on the exception naming the incident and its fix). Collectives that
// do not complete are watched: PendingCollectives knows what each thread
// waits in, and the Watchdog writes a hang incident with the Python stacks
// of all the rank's threads once one has waited longer than its time,
// prints those stacks once, and leaves the training alone. Internal to the
// agent.

#include <Python.h>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/model/vocabulary.h"
#include "core/store/records.h"

namespace meshscope::capture {

class Agent;

// A collective issued and not known to be complete.
struct PendingCollective {
    uint64_t id = 0;
    std::string kind;   // "all_reduce"
    std::string group;  // "default_pg (2 ranks)"
    int64_t bytes = 0;
    int64_t startNs = 0;
    int64_t step = 0;
    uint32_t thread = 0;
    int64_t position = -1;  // in the rank's sequence of collectives
    StackId stack;          // the user frame that issued it
    std::string where;      // " at train.py:30", or ""
    // A c10d call's work: the collective is done once it completed or is
    // gone. Without one (functional collectives), end() says when.
    c10::weak_intrusive_ptr<c10d::Work> work{c10::intrusive_ptr<c10d::Work>()};
    bool hasWork = false;
    bool reported = false;  // a hang incident was written for it

    // "all_reduce on default_pg (2 ranks), 16 B, its collective #3"
    std::string describe() const;
};

class PendingCollectives {
  public:
    // Registers a collective about to be issued on this thread; gives
    // `entry` its id and the next position in the rank's sequence. Returns
    // the id.
    uint64_t begin(PendingCollective& entry);
    // Once known: the user frame that issued it, and the work a c10d call
    // returned (the entry then ends by itself once the work completed or is
    // gone).
    void attach(uint64_t id, StackId stack, const std::string& where,
                const c10::intrusive_ptr<c10d::Work>& work);
    void end(uint64_t id);

    // Functional collectives run inside a DTensor-level call (an op, a
    // redistribution, full_tensor()) and are waited for before it returns:
    // one opened while such a call runs on this thread stays pending until
    // the outermost call returns.
    static void enterScope();
    void leaveScope();
    static void abandonScope();  // leaveScope() when the agent is gone
    void endWithScope(uint64_t id);
    // The latest entry this thread's scope holds (the collective a failing
    // DTensor call was waiting for).
    std::optional<PendingCollective> latestScoped();

    // The entries pending longer than `ns`, not reported before; marks them
    // reported. Drops the entries whose work completed.
    std::vector<PendingCollective> overdue(int64_t nowNs, int64_t ns);
    // Every entry still pending (a rank ending), marking them reported.
    std::vector<PendingCollective> unreported();
    // The entry of a c10d work, if it is pending.
    std::optional<PendingCollective> forWork(const c10d::Work* work);

  private:
    // What a method lets go of while m_mutex is held: entries it removed and
    // strong references to works it took. Declared before the lock, so they
    // are released after it: the last reference to a Work (a weak one
    // counts: intrusive_ptr destroys at the last weak release) destroys its
    // output tensors, and torch takes the GIL to decref their Python
    // objects, which a thread waiting for m_mutex may hold.
    struct Released {
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        std::vector<PendingCollective> entries;
    };
    template <typename Pred>
    void removeIf(Pred pred, Released& released);  // with m_mutex held
    void prune(Released& released);                // with m_mutex held

    std::mutex m_mutex;
    std::vector<PendingCollective> m_entries;
    uint64_t m_nextId = 1;
    int64_t m_positions = 0;
};

// The watchdog thread (AgentConfig::watchdogSeconds; 0: none).
class Watchdog {
  public:
    Watchdog(Agent& agent, double seconds);
    ~Watchdog();  // stops and joins the thread (releasing the GIL meanwhile)
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

  private:
    void run();

    Agent& m_agent;
    double m_seconds;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false;
    std::thread m_thread;
};

// The Python stacks of all threads of this process, as `py-spy dump`
// prints them (innermost call last). Requires the GIL.
std::string threadStacks();

// Records a hang incident for `pending` (`why`: "pending for 30.0 s
// (watchdog: ...)") with `stacks` as its detail; returns its seq.
IncidentSeq recordHang(Agent& agent, const PendingCollective& pending, const std::string& why,
                       const std::string& stacks);

// Records every collective still pending as a hang incident (a rank ending
// while blocked: `why` says how), without stacks and without Python.
void recordStillPending(Agent& agent, const std::string& why);

// The note meshscope adds to a failure's exception: what was recorded,
// where, and the fix.
std::string failureNote(IncidentKind kind, const std::string& what, const std::string& where,
                        const std::string& error, const std::string& fixSummary,
                        const std::string& fixCode, IncidentSeq seq, const std::string& path);

// Whether the exception `value` was already recorded as an incident (an
// error passes through several hooks on its way out). Require the GIL.
bool alreadyRecorded(PyObject* value);
// Marks `value` recorded and adds meshscope's `note` to it (PEP 678).
void markRecorded(PyObject* value, const std::string& note);

// "NotImplementedError: Operator ... does not have a sharding strategy
// registered.": an exception as its type and message. Requires the GIL.
std::string exceptionText(PyObject* value);

}  // namespace meshscope::capture
