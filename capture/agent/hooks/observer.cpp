#include "capture/agent/hooks/observer.h"

#include <ATen/record_function.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "capture/agent/agent.h"
#include "capture/agent/hooks/dispatch_hook.h"

namespace meshscope::capture {
namespace {

std::mutex g_mutex;
std::optional<at::CallbackHandle> g_handle;

struct OpContext : at::ObserverContext {
    int64_t startNs = 0;
    uint16_t depth = 0;
    uint64_t token = 0, previousToken = 0;  // CurrentOp's, for collective plugins
};

// Op names are mostly the dispatcher's own long-lived strings: cached per
// thread by pointer, checked by content (other RecordFunctions may reuse a
// pointer), and dropped when a new agent (a new rank file) attaches.
StringId internName(Agent& agent, const char* name) {
    struct Entry {
        std::string text;
        StringId id;
    };
    thread_local std::unordered_map<const char*, Entry> cache;
    thread_local uint64_t generation = 0;
    if (generation != agent.generation()) {
        cache.clear();
        generation = agent.generation();
    }
    auto it = cache.find(name);
    if (it == cache.end() || it->second.text != name) {
        if (cache.size() > 65536) cache.clear();
        it = cache.insert_or_assign(name, Entry{name, agent.writer().intern(name)}).first;
    }
    return it->second.id;
}

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
    Agent* agent = Agent::current();
    if (!agent) return nullptr;
    if (fn.scope() == at::RecordScope::USER_SCOPE) return nullptr;
    // The dispatcher hook records c10d collectives with their call site.
    if (dispatcherHookSeesOps() && std::strncmp(fn.name(), "c10d::", 6) == 0) return nullptr;
    auto ctx = std::make_unique<OpContext>();
    ctx->startNs = agent->writer().nowNs();
    ctx->depth = Agent::threadDepth()++;
    ctx->token = CurrentOp::enter(ctx->previousToken);
    return ctx;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* base) {
    auto* op = static_cast<OpContext*>(base);
    if (op) CurrentOp::leave(op->token, op->previousToken);
    Agent* agent = Agent::current();
    if (!agent || !op) return;
    RankWriter& w = agent->writer();
    uint16_t& depth = Agent::threadDepth();
    if (depth > 0) --depth;
    OpRecord rec;
    rec.startNs = op->startNs;
    rec.endNs = w.nowNs();
    rec.thread = Agent::threadIndex();
    rec.name = internName(*agent, fn.name());
    rec.phase = fn.scope() == at::RecordScope::BACKWARD_FUNCTION ? Phase::Backward : agent->phase();
    rec.step = agent->step();
    rec.depth = op->depth;
    OpSeq seq = w.submit(std::move(rec));
    if (op->token && seq) agent->collectives().opRecorded(op->token, seq);
}

}  // namespace

void installObserver() {
    std::lock_guard lock(g_mutex);
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
