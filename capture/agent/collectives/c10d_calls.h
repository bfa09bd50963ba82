#pragma once

// Direct c10d collectives (dist.all_reduce, broadcast, barrier, send, ...)
// as the dispatcher hook sees them: torch.distributed's Python API and
// ProcessGroup methods dispatch the `c10d::` ops. Only the calls a program
// makes itself reach the hook: the c10d calls inside functional
// collectives and DTensor ops run with the hook's key excluded, so nothing
// is counted twice. No Python, no GIL.

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshscope::capture {

// Whether `schema` is a c10d op (one string compare per plain op).
inline bool isC10dOp(const c10::FunctionSchema& schema) {
    const std::string& name = schema.name();
    return name.size() > 6 && name.compare(0, 6, "c10d::") == 0;
}

// What a c10d call says about its collective, read from its boxed arguments
// before it runs.
struct C10dFacts {
    std::string_view kind;  // "all_reduce", "broadcast", "barrier", ...
    int64_t bytes = 0;      // the data it sends (0 for a barrier)
    std::string group;      // "default_pg (2 ranks)", "mesh_tp (1 rank)"; "" when not found
    // Whether its work is complete once wait() returned: gloo's is (and some
    // of gloo's works never report is_completed()); NCCL's completes on the
    // device after wait() returned, and an unknown backend is asked too.
    bool completesOnWait = false;
    // The device of the tensors it sends (none for a barrier).
    std::optional<c10::Device> device;
};
C10dFacts c10dFacts(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args);
// Only C10dFacts::completesOnWait, cached per process group and device: what
// a functional collective's c10d call (WorkCapture) needs, without the rest.
bool completesOnWait(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args);

}  // namespace meshscope::capture
