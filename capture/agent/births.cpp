#include "capture/agent/births.h"

#include <optional>
#include <span>

#include "capture/agent/agent.h"
#include "capture/agent/tracing.h"

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
    const std::string& label = Agent::threadPhaseLabel();
    Phase phase = agent.phase();
    Provenance p;
    p.createdAt = frame.stack;
    std::string where = frame.where();
    if (phase == Phase::Forward) {
        p.origin = OriginClass::CreatedInForward;
        p.evidence = "created by " + what + " inside " +
                     (label.empty() ? std::string("forward") : label) + where;
    } else if (phase == Phase::Optimizer) {
        p.origin = OriginClass::OptimizerState;
        p.evidence = "created by " + what + " in " +
                     (label.empty() ? std::string("an optimizer step") : label) + where;
    } else if (phase == Phase::Data) {
        p.origin = OriginClass::InputData;
        p.evidence = "created by " + what + " while loading data" +
                     (label.empty() ? "" : " (" + label + ")") + where;
    } else {
        p.origin = OriginClass::UserCode;
        p.evidence = "created by " + what + " in user code outside forward" + where;
    }
    return p;
}

}  // namespace meshscope::capture
