#pragma once

// RecordFunction observer (at::addGlobalCallback): the aten-level view under
// the DTensor-level ops. At level "all" it records every aten op with its
// nesting depth, on every thread (autograd threads included). At both levels
// it records collectives: c10d's record_param_comms span carries the
// collective's name, process group and element counts (ParamCommsDebugInfo,
// no input boxing needed), and gloo/nccl work spans give its duration.
// Callbacks never take the GIL and never throw into the dispatcher.

namespace meshscope::capture {

enum class Level : unsigned char;

void installObserver(Level level);
void removeObserver();

}  // namespace meshscope::capture
