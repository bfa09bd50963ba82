#include "capture/agent/agent.h"

#include <torch/csrc/autograd/graph_task.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <iostream>

#include "capture/agent/interop/launcher_status.h"
#include "core/store/run_directory.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"
#include "core/util/hot_path.h"

namespace meshscope::capture {
namespace {

thread_local Phase t_phase = Phase::Other;
thread_local std::string t_phaseLabel;
thread_local int t_loadStateDict = 0;
thread_local uint16_t t_depth = 0;
// Longest detach waits for the GPU to finish the ops it still times.
constexpr std::chrono::milliseconds kDrainDeviceTimes{2000};
// Longest detach asks pending collectives whether they completed.
constexpr std::chrono::milliseconds kSettleCollectives{5000};
std::atomic<uint32_t> g_nextThread{0};
std::atomic<uint64_t> g_generation{0};

}  // namespace

// Agent::operator new hands out max_align_t-aligned blocks.
static_assert(alignof(Agent) <= alignof(std::max_align_t));

std::atomic<Agent*> Agent::s_current{nullptr};
std::atomic<Agent*> Agent::s_closing{nullptr};
std::atomic<uint64_t> Agent::s_attachedGeneration{0};

Agent& Agent::attach(AgentConfig config) {
    detach();
    auto* agent = new Agent(std::move(config));
    s_current.store(agent, std::memory_order_release);
    s_attachedGeneration.store(agent->generation(), std::memory_order_release);
    return *agent;
}

void Agent::detach() {
    Agent* agent = nullptr;
    {
        // Waits out the plugin calls (NCCL's threads) that are using the agent.
        std::unique_lock lock(CollectiveBridge::lifetime());
        agent = s_current.exchange(nullptr, std::memory_order_acq_rel);
        s_attachedGeneration.store(0, std::memory_order_release);
    }
    s_closing.store(agent, std::memory_order_release);
    delete agent;  // settles its collectives, flushes and closes the rank file
    s_closing.store(nullptr, std::memory_order_release);
}

Agent::Agent(AgentConfig config)
    : m_config(std::move(config)), m_tensors([this] { return m_writer->newTensorId(); }) {
    Manifest initial;
    initial.runId = m_config.runId.empty() ? newRunId() : m_config.runId;
    initial.created = isoTimestampUtc();
    initial.worldSize = m_config.worldSize;
    initial.schemaVersion = schema::kSchemaVersion;
    initial.command = m_config.command;
    initial.torchVersion = m_config.torchVersion;
    initial.job = m_config.job;
    try {
        m_writer = createRankWriter(m_config.runDir, initial, m_config.rank, m_config.writer);
    } catch (const RunTaken&) {
        throw;
    } catch (const StoreError& e) {
        // The training must not depend on free disk space: the policy
        // still runs, and nothing is kept.
        m_writer = RankWriter::createUnrecorded(e.what(), m_config.writer);
    }
    tellLauncherAttached(m_config.rank, m_writer->path().string(), m_writer->notRecording());
    m_deviceTimes = std::make_unique<DeviceTimer>(
        *m_writer, [this](const std::string& why) { warnOnce("device-timer", why); });
    m_generation = ++g_generation;
    m_deviceTimes->setActive(timesDevicesAt(std::max<int64_t>(0, step())));
    m_torch.load();
    recordMeta();
    m_monitor = std::make_unique<CollectiveMonitor>(*this, m_config.watchdogSeconds);
}

Agent::~Agent() {
    m_monitor.reset();
    if (m_writer) {
        // a normal end: what the backend has not yet said is complete gets
        // a moment to complete before it is called stuck
        m_tracker.settle(kSettleCollectives);
        m_tracker.endAll("its agent detached (the process ended or detach() was called)",
                         IncidentKind::CollectiveHang);
        m_collectives.flush();
        m_deviceTimes->drain(kDrainDeviceTimes);
        if (uint64_t lost = m_deviceTimes->dropped())
            m_writer->submit(Record{MetaRecord{"device_timer.dropped", std::to_string(lost)}});
        m_writer->submit(Record{
            MetaRecord{"agent.counters",
                       "ops=" + std::to_string(m_counters.ops.load()) +
                           " incidents=" + std::to_string(m_counters.incidents.load()) +
                           " reconciled=" + std::to_string(m_counters.reconciled.load()) +
                           " agent_errors=" + std::to_string(m_counters.agentErrors.load())}});
        m_writer->close();
        tellLauncherClosed(m_config.rank, m_writer->stats());
    }
    m_promotions.clear();
    m_torch.clear();
    m_frames.clear();
}

void Agent::recordMeta() {
    auto meta = [this](std::string key, std::string value) {
        m_writer->submit(Record{MetaRecord{std::move(key), std::move(value)}});
    };
    meta("torch.version", m_config.torchVersion);
    meta("world_size", std::to_string(m_config.worldSize));
    meta("local_rank", std::to_string(m_config.localRank));
    meta("backend", m_config.backend);
    meta("device_type", m_config.deviceType);
    meta("watchdog_s", fmt::format("{:g}", m_config.watchdogSeconds));
    meta("policy", m_config.policyName);
    meta("level", m_config.level == Level::All ? "all" : "dtensor");
    int64_t every = m_config.deviceTimingEvery;
    meta("device_timing", every <= 0   ? "off"
                          : every == 1 ? "every step"
                                       : "every " + std::to_string(every) + " steps");
    std::string command;
    for (const auto& part : m_config.command)
        command += (command.empty() ? "" : " ") + part;
    meta("command", command);
}

MESHSCOPE_HOT Phase Agent::phase() const {
    if (torch::autograd::get_current_graph_task_id() != -1) return Phase::Backward;
    return t_phase;
}

int64_t Agent::advanceStep() {
    m_tensors.sweep();
    m_torch.trim();
    int64_t step = m_step.fetch_add(1, std::memory_order_relaxed) + 1;
    m_deviceTimes->setActive(timesDevicesAt(step));
    return step;
}

bool Agent::timesDevicesAt(int64_t step) const {
    int64_t every = m_config.deviceTimingEvery;
    return every > 0 && step % every == 0;
}

Phase Agent::setThreadPhase(Phase phase, std::string label) {
    Phase previous = t_phase;
    t_phase = phase;
    t_phaseLabel = std::move(label);
    return previous;
}

const std::string& Agent::threadPhaseLabel() {
    return t_phaseLabel;
}

void Agent::enterLoadStateDict(bool inside) {
    t_loadStateDict += inside ? 1 : -1;
}

bool Agent::insideLoadStateDict() {
    return t_loadStateDict > 0;
}

MESHSCOPE_HOT uint16_t& Agent::threadDepth() {
    return t_depth;
}

MESHSCOPE_HOT uint32_t Agent::threadIndex() {
    // The first op of a thread names it in the rank's meta ("thread.3" =
    // "pt_autograd_0"), once, so timelines and traces can label the track.
    thread_local uint32_t index = [] {
        uint32_t i = g_nextThread.fetch_add(1, std::memory_order_relaxed);
        if (Agent* agent = current()) {
            char name[64] = {};
            bool main = ::getpid() == static_cast<pid_t>(::syscall(SYS_gettid));
            if (main || pthread_getname_np(pthread_self(), name, sizeof name) != 0 || !name[0])
                std::snprintf(name, sizeof name, "%s", main ? "MainThread" : "thread");
            agent->writer().submit(Record{MetaRecord{threadMetaKey(uint32_t(i)), name}});
        }
        return i;
    }();
    return index;
}

void Agent::warnOnce(const std::string& kind, const std::string& message) {
    std::lock_guard lock(m_warnMutex);
    if (std::find(m_warned.begin(), m_warned.end(), kind) != m_warned.end()) return;
    m_warned.push_back(kind);
    std::cerr << message << " (reported once; training continues)" << std::endl;
}

}  // namespace meshscope::capture
