#pragma once

// The agent's end of core/plugin_abi/collective_sink.h: plugins that see
// collectives below torch (plugins/nccl_profiler, loaded by NCCL) record
// them into the rank file through it, each tied to the op that issued it.
// A collective the agent recorded itself at torch's level (a c10d call such
// as dist.all_reduce, a functional collective) is not recorded twice: what
// the library ran under it adds its GPU time to that record.
// Recorded ops announce themselves on their thread with CurrentOp; a
// plugin reads that token when the library is called and hands it back with
// the finished collective. A collective that finishes before its op has
// been recorded waits for it (bounded). Until a plugin has asked for the
// sink, CurrentOp costs one relaxed load per op.

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <vector>

#include "core/plugin_abi/collective_sink.h"
#include "core/store/rank_writer.h"

namespace meshscope::capture {

class Agent;

class CollectiveBridge {
  public:
    explicit CollectiveBridge(Agent& agent) : m_agent(agent) {}

    // Ties the collectives issued under op `token` to the op's seq.
    void opRecorded(uint64_t token, OpSeq seq);
    // Fetches the table slot opRecorded(token, ...) will write: each op's
    // is the next of 64k, a line no core holds (OpFrame::prefetchRecord).
    void prefetchSlot(uint64_t token) const;
    // A collective the agent follows at torch's level (CollectiveTracker) was
    // issued as token `own`: the library calls under it give it their GPU
    // time instead of records of their own.
    void collectiveIssued(uint64_t own, CollectiveSeq seq);
    // Its record, once its life ended, issued under op `enclosing` (0: none
    // known): submitted once that op has its seq (rec.op).
    void agentCollective(CollectiveRecord rec, uint64_t enclosing);
    void record(const MeshscopeCollectiveEvent& event);
    void communicator(uint64_t hash, std::string_view name, int rank, int size, int nodes);
    void dropped(uint64_t total);
    // Records the collectives still waiting for their op, without it (detach).
    void flush();

    // Held shared by every sink call that reaches an agent; Agent::detach
    // holds it exclusively while it unpublishes the agent.
    static std::shared_mutex& lifetime();
    // Whether a plugin holds the sink (ops then carry tokens).
    static bool listening();

  private:
    struct Waiting {
        CollectiveRecord record;
        std::optional<DeviceTimeRecord> device;
        uint64_t token = 0;
    };
    // What a token stood for: an op, or a collective recorded at torch's level.
    struct Subject {
        OpSeq op;
        CollectiveSeq collective;
    };
    // A torch-level collective waiting for the op it ran inside.
    struct Enclosed {
        CollectiveRecord record;
        uint64_t enclosing = 0;
    };
    std::optional<Subject> recordedSubject(uint64_t token) const;
    // With m_mutex held:
    void resolved(uint64_t token, Subject subject);
    void submit(Waiting& waiting, const Subject& subject);
    void submit(Enclosed& enclosed, OpSeq op);

    // token -> seq of the latest ops; NCCL may report a collective many
    // (level "all": thousands of) ops after the one that issued it
    static constexpr size_t kRecentOps = size_t(1) << 16;
    static constexpr size_t kMaxWaiting = 1024;

    Agent& m_agent;
    std::mutex m_mutex;                                               // guards the tables below
    std::array<std::pair<uint64_t, Subject>, kRecentOps> m_recent{};  // at token % kRecentOps
    std::vector<Waiting> m_waiting;    // finished before their op was recorded
    std::vector<Enclosed> m_enclosed;  // recorded before their op was
};

// Names the recorded op running on this thread, for the collectives a plugin
// sees inside it; nests (the innermost op wins) and restores on exit.
class CurrentOp {
  public:
    CurrentOp() : m_token(enter(m_previous)) {}
    ~CurrentOp() { leave(m_token, m_previous); }
    CurrentOp(const CurrentOp&) = delete;
    CurrentOp& operator=(const CurrentOp&) = delete;
    // The op was recorded as `seq` (call at most once).
    void recorded(CollectiveBridge& bridge, OpSeq seq) const {
        if (m_token && seq) bridge.opRecorded(m_token, seq);
    }
    // This scope's token (0 while no plugin listens) and the one of the op
    // around it: a collective the agent follows itself (c10d calls,
    // functional collectives) is issued under `enclosing()` as `token()`.
    uint64_t token() const { return m_token; }
    uint64_t enclosing() const { return m_previous; }

    // The same, for hooks that cannot hold a scope (the RecordFunction
    // observer): enter() returns the token (0 while no plugin listens).
    static uint64_t enter(uint64_t& previous);
    static void leave(uint64_t token, uint64_t previous);

  private:
    uint64_t m_previous = 0;
    uint64_t m_token;
};

// Makes the extension's meshscope_collective_sink visible to
// dlsym(RTLD_DEFAULT): Python loads extension modules RTLD_LOCAL.
void exposeCollectiveSink();

}  // namespace meshscope::capture

// The sink of the attached agent (valid for the process: each call reaches
// whichever agent is attached then), or null when none is.
extern "C" __attribute__((visibility("default"))) const MeshscopeCollectiveSink*
meshscope_collective_sink(void);
