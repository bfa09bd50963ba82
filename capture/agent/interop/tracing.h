#pragma once

// What the agent asks Dynamo while torch.compile traces (meshscope/_tracing.py):
// the user frames being traced (the real Python stack is Dynamo's own), the
// real tensor behind a fake one, and the traced code's name for a tensor.
// Requires the GIL.

#include <Python.h>

#include <optional>
#include <string>
#include <vector>

#include "capture/agent/interop/torch_types.h"
#include "core/store/records.h"

namespace meshscope {
class RankWriter;
}

namespace meshscope::capture {

struct TracedFrames {
    std::vector<Frame> frames;  // innermost first
    std::string innermostFile;
};

// The frames Dynamo is tracing, or nullopt when it is not tracing.
std::optional<TracedFrames> tracedFrames(RankWriter& writer);

// The real tensor a fake one was made from, or null (one made inside the
// traced code has none).
PyRef realTensorOf(PyObject* fake);

// The traced code's local that holds `fake`, or "".
std::string tracedLocalHolding(PyObject* fake);

}  // namespace meshscope::capture
