#pragma once

// The capture agent of one torchrun worker: owns the rank's RankWriter, the
// reconciliation policy and the per-process state the hooks share (tensor
// table, Python-object caches, step and phase). One Agent exists between
// meshscope.attach() and meshscope.detach(); the dispatch hook, the
// RecordFunction observer and the Python adapters all reach it through
// Agent::current(). Everything that touches Python objects runs with the GIL
// held, which also serializes access to the tables.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/agent/agent_memory.h"
#include "capture/agent/collectives/collective_bridge.h"
#include "capture/agent/collectives/collective_tracker.h"
#include "capture/agent/incidents/failures.h"
#include "capture/agent/incidents/promotion.h"
#include "capture/agent/interop/frames.h"
#include "capture/agent/interop/torch_types.h"
#include "capture/agent/ops/device_timer.h"
#include "capture/agent/ops/tensor_descriptions.h"
#include "capture/agent/ops/tensor_table.h"
#include "core/model/settings.h"
#include "core/policy/policy.h"
#include "core/store/rank_writer.h"

namespace meshscope::capture {

// What is recorded: DTensor-level ops from the dispatch hook, or in addition
// every aten op from the RecordFunction observer.
enum class Level : uint8_t { DTensor, All };

struct AgentConfig {
    std::filesystem::path runDir;
    Policy policy = Policy::named("observe");
    std::string policyName = "observe";  // as given: a mode or a file path
    Level level = Level::DTensor;
    int rank = 0;
    int worldSize = 1;
    int localRank = 0;
    std::string runId;  // shared by all ranks of a run; empty: from the manifest
    // What the ranks of this job share and no other job does (the run id
    // under `meshscope record`): the run folder is claimed for it, and a
    // folder another job claimed is refused (RunTaken). Empty: not checked.
    std::string job;
    std::string backend;
    std::string torchVersion;
    std::string deviceType = "cpu";
    std::vector<std::string> command;
    // "train.py:40" where meshscope.attach() was called; empty when
    // `meshscope record` attached the agent as the interpreter started.
    std::string attachedAt;
    WriterOptions writer;
    // GPU durations of ops (CUDA events) on every Nth step: 1 every step,
    // 0 never. Each timed op costs two event records on the training
    // thread; the default samples (MESHSCOPE_DEVICE_TIMING, README).
    int64_t deviceTimingEvery = kDefaultDeviceTimingEvery;
    static constexpr int64_t kDefaultDeviceTimingEvery = defaultNumber(setting("device_timing"));
    // Seconds a collective may stay pending before the watchdog writes the
    // rank's Python stacks (MESHSCOPE_WATCHDOG_S; 0: no watchdog). The
    // default is the heartbeat timeout of PyTorch's NCCL watchdog
    // (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC), under the process groups' 10 min.
    double watchdogSeconds = kDefaultWatchdogSeconds;
    static constexpr double kDefaultWatchdogSeconds = double(defaultNumber(setting("watchdog_s")));
};

class Agent {
  public:
    // The agent and the tables inside it (its caches' direct-mapped fronts)
    // live in the agent's own memory: read on every op (agent_memory.h).
    static void* operator new(size_t size) {
        return agentMemory()->allocate(size, alignof(std::max_align_t));
    }
    static void operator delete(void* p, size_t size) {
        agentMemory()->deallocate(p, size, alignof(std::max_align_t));
    }

    // Creates the rank file and starts recording. A rank file that cannot be
    // made (a full disk, a folder it may not write) leaves the agent running
    // without one: its policy works as on every other rank, and everything
    // it would record is counted as dropped (writer().notRecording() says
    // why). Throws RunTaken for a folder another job records into, and
    // PolicyError; the caller turns either into a clear Python error.
    static Agent& attach(AgentConfig config);
    // Flushes and closes the rank file. Safe to call when not attached.
    static void detach();
    // nullptr when not attached (hooks then pass everything through).
    static Agent* current() { return s_current.load(std::memory_order_acquire); }
    // The agent a dying process speaks through (crash_guard): the attached
    // one, or the one detach() is closing.
    static Agent* forLastWords() {
        Agent* agent = current();
        return agent ? agent : s_closing.load(std::memory_order_acquire);
    }

    ~Agent();

    RankWriter& writer() { return *m_writer; }
    // Distinct for every attach in this process (caches keyed by it).
    uint64_t generation() const { return m_generation; }
    // The attached agent's generation, 0 while none is: one atomic load, no
    // lock (the NCCL plugin asks on every event).
    static uint64_t attachedGeneration() {
        return s_attachedGeneration.load(std::memory_order_acquire);
    }
    const AgentConfig& config() const { return m_config; }
    TorchTypes& torch() { return m_torch; }
    TensorTable& tensors() { return m_tensors; }
    TensorDescriptions& descriptions() { return m_descriptions; }
    FrameCache& frames() { return m_frames; }
    PromotionCache& promotions() { return m_promotions; }
    CollectiveBridge& collectives() { return m_collectives; }
    CollectiveTracker& tracker() { return m_tracker; }
    CollectiveMonitor* monitor() { return m_monitor.get(); }  // null once detaching
    DeviceTimer& deviceTimes() { return *m_deviceTimes; }

    // Optimizer steps completed so far (the step new records belong to).
    int64_t step() const { return m_step.load(std::memory_order_relaxed); }
    void setStep(int64_t step) { m_step.store(step, std::memory_order_relaxed); }
    // Ends a step: also releases the dead tensors the step left in the table.
    // Requires the GIL.
    int64_t advanceStep();
    // Whether ops of `step` get GPU durations (AgentConfig::deviceTimingEvery).
    bool timesDevicesAt(int64_t step) const;

    // Phase of the calling thread: Backward inside an autograd graph task,
    // otherwise what the Python adapters last set on this thread.
    Phase phase() const;
    // Sets the calling thread's phase and what it is ("torch.optim.Adam.step()",
    // "DataLoader batch #3"); returns the previous phase.
    static Phase setThreadPhase(Phase phase, std::string label = {});
    static const std::string& threadPhaseLabel();
    // Nesting depth of recorded ops on this thread (shared by hook and observer).
    static uint16_t& threadDepth();
    static void enterLoadStateDict(bool inside);
    static bool insideLoadStateDict();

    // Small per-process thread index for records.
    static uint32_t threadIndex();

    // Dispatch-hook statistics, for tests and the overhead benchmark.
    struct Counters {
        std::atomic<uint64_t> ops{0}, incidents{0}, reconciled{0}, agentErrors{0};
        // plain ops that took the provenance path after their op
        // (OpRecorder::afterPlainOp, either hook): births, and ops on an
        // input that may carry a provenance
        std::atomic<uint64_t> provenanceOps{0};
    };
    Counters& counters() { return m_counters; }

    // Reports a problem of the agent itself once per kind on stderr; the
    // training goes on.
    void warnOnce(const std::string& kind, const std::string& message);

    // The agent's own failure (an exception it caught): counted in
    // counters().agentErrors and reported once per kind.
    void ownError(const std::string& kind, const std::string& message) {
        m_counters.agentErrors.fetch_add(1);
        warnOnce(kind, message);
    }

  private:
    explicit Agent(AgentConfig config);
    void recordMeta();

    static std::atomic<Agent*> s_current;
    static std::atomic<Agent*> s_closing;  // being deleted by detach()
    static std::atomic<uint64_t> s_attachedGeneration;

    AgentConfig m_config;
    std::unique_ptr<RankWriter> m_writer;
    TorchTypes m_torch;
    TensorTable m_tensors;
    TensorDescriptions m_descriptions;
    FrameCache m_frames;
    PromotionCache m_promotions;
    CollectiveBridge m_collectives{*this};
    std::unique_ptr<DeviceTimer> m_deviceTimes;  // needs m_writer
    CollectiveTracker m_tracker{*this};
    std::unique_ptr<CollectiveMonitor> m_monitor;  // needs m_writer; stopped first
    std::atomic<int64_t> m_step{0};
    uint64_t m_generation = 0;
    Counters m_counters;
    std::mutex m_warnMutex;
    std::vector<std::string> m_warned;
};

}  // namespace meshscope::capture
