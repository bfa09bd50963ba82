#pragma once

// Where a plain tensor was born: the provenance the agent gives a tensor
// made by an aten factory or by a Python call that dispatches no op.

#include <string>

#include <ATen/core/Tensor.h>

#include "capture/agent/ops/tensor_table.h"

namespace meshscope::capture {

class Agent;

// The provenance of a tensor made now by `what` (an aten factory, or a
// Python call such as torch.frombuffer): its origin follows the phase
// (forward B, optimizer E, data loading D, anything else H) and its birth
// site is the current user frame (for a fake tensor `made` while Dynamo
// traces, the frame Dynamo is tracing).
Provenance birthProvenance(Agent& agent, const std::string& what, const at::Tensor* made = nullptr);

}  // namespace meshscope::capture
