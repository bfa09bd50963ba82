#include "capture/agent/incidents/births.h"

#include <optional>
#include <span>

#include "capture/agent/agent.h"
#include "capture/agent/incidents/origin_rules.h"
#include "capture/agent/interop/tracing.h"

namespace meshscope::capture {

namespace {

// While Dynamo traces, the user's code is not running as Python frames:
// the innermost frame Dynamo is tracing, or an empty frame.
UserFrame tracedFrame(RankWriter& writer) {
    UserFrame out;
    std::optional<TracedFrames> traced = tracedFrames(writer);
    if (!traced || traced->frames.empty()) return out;
    const Frame& f = traced->frames.front();
    out.file = traced->innermostFile;
    out.line = f.line;
    out.stack = writer.internStack(std::span<const Frame>(&f, 1));
    return out;
}

}  // namespace

Provenance birthProvenance(Agent& agent, const std::string& what, const at::Tensor* made) {
    UserFrame frame;
    if (made && made->defined() && made->key_set().has(c10::DispatchKey::Python))
        frame = tracedFrame(agent.writer());  // a fake tensor: made while Dynamo traces
    if (frame.file.empty()) frame = agent.frames().userFrame(agent.writer());
    // made in a module's own forward: that (innermost) module, not the root
    // whose call set the phase
    Phase phase = agent.phase();
    std::string_view label = Agent::threadPhaseLabel();
    std::string own;
    if (phase == Phase::Forward && frame.function.ends_with(".forward"))
        label = own = frame.function + "()";
    return birthOf(phase, label, what, frame.where(), frame.stack);
}

}  // namespace meshscope::capture
