#include "capture/agent/observer.h"

#include <ATen/record_function.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>

#include <cstring>
#include <mutex>
#include <optional>

#include "capture/agent/agent.h"

namespace meshscope::capture {
namespace {

std::mutex g_mutex;
std::optional<at::CallbackHandle> g_handle;
std::atomic<bool> g_recordAll{false};

bool startsWith(const char* name, const char* prefix) {
    return std::strncmp(name, prefix, std::strlen(prefix)) == 0;
}

// Collectives whose work runs after the call returns (gloo/nccl work spans).
bool isWorkSpan(const char* name) {
    return startsWith(name, "gloo:") || startsWith(name, "nccl:");
}

struct OpContext : at::ObserverContext {
    int64_t startNs = 0;
    uint16_t depth = 0;
};

struct CommContext : at::ObserverContext {
    CollectiveRecord record;
    bool workSpan = false;
};

thread_local std::optional<CollectiveRecord> t_pendingComm;  // from record_param_comms
thread_local bool t_commHandedToWork = false;

int64_t bytesPerElement(at::ScalarType type) {
    return type == at::ScalarType::Undefined ? 0 : int64_t(c10::elementSize(type));
}

std::unique_ptr<at::ObserverContext> onParamComms(Agent& agent) {
    auto* info = dynamic_cast<torch::ParamCommsDebugInfo*>(
        c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PARAM_COMMS_INFO));
    auto ctx = std::make_unique<CommContext>();
    RankWriter& w = agent.writer();
    ctx->record.startNs = w.nowNs();
    ctx->record.thread = Agent::threadIndex();
    ctx->record.step = agent.step();
    if (info) {
        ctx->record.kind = w.intern(info->getCollectiveName());
        ctx->record.group = w.intern(info->getProcessGroupName());
        int64_t elems = std::max(info->getInMessageNelems(), info->getOutMessageNelems());
        ctx->record.bytes = elems * bytesPerElement(info->getDType());
    } else {
        ctx->record.kind = w.intern("collective");
    }
    t_pendingComm = ctx->record;
    t_commHandedToWork = false;
    return ctx;
}

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
    Agent* agent = Agent::current();
    if (!agent) return nullptr;
    const char* name = fn.name();
    if (at::kParamCommsCallName == name) return onParamComms(*agent);
    if (isWorkSpan(name) && t_pendingComm) {
        auto ctx = std::make_unique<CommContext>();
        ctx->record = *t_pendingComm;
        ctx->record.startNs = agent->writer().nowNs();
        ctx->workSpan = true;
        t_commHandedToWork = true;
        return ctx;
    }
    if (!g_recordAll.load(std::memory_order_relaxed) || fn.scope() == at::RecordScope::USER_SCOPE)
        return nullptr;
    auto ctx = std::make_unique<OpContext>();
    ctx->startNs = agent->writer().nowNs();
    ctx->depth = Agent::threadDepth()++;
    return ctx;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* base) {
    Agent* agent = Agent::current();
    if (!agent || !base) return;
    RankWriter& w = agent->writer();
    if (auto* comm = dynamic_cast<CommContext*>(base)) {
        bool paramComms = !comm->workSpan;
        if (paramComms) t_pendingComm.reset();
        // The work span, when one follows, carries the real duration.
        if (paramComms && t_commHandedToWork) return;
        comm->record.endNs = w.nowNs();
        w.submit(std::move(comm->record));
        return;
    }
    auto* op = static_cast<OpContext*>(base);
    uint16_t& depth = Agent::threadDepth();
    if (depth > 0) --depth;
    OpRecord rec;
    rec.startNs = op->startNs;
    rec.endNs = w.nowNs();
    rec.thread = Agent::threadIndex();
    rec.name = w.intern(fn.name());
    rec.phase = fn.scope() == at::RecordScope::BACKWARD_FUNCTION ? Phase::Backward : agent->phase();
    rec.step = agent->step();
    rec.depth = op->depth;
    w.submit(std::move(rec));
}

}  // namespace

void installObserver(Level level) {
    std::lock_guard lock(g_mutex);
    g_recordAll.store(level == Level::All);
    if (g_handle) return;
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&onStart, &onEnd).needsInputs(false).needsOutputs(false));
}

void removeObserver() {
    std::lock_guard lock(g_mutex);
    if (!g_handle) return;
    at::removeCallback(*g_handle);
    g_handle.reset();
}

}  // namespace meshscope::capture
