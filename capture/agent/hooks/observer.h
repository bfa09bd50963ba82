#pragma once

// RecordFunction observer (at::addGlobalCallback) for level "all": the
// aten-level view under the DTensor-level ops, every op with its nesting
// depth, on every thread (autograd threads included). Not installed at level
// "dtensor", where it would only cost time. Callbacks never take the GIL and
// never throw into the dispatcher.

namespace meshscope::capture {

void installObserver();
void removeObserver();

}  // namespace meshscope::capture
