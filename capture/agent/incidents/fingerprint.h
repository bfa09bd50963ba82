#pragma once

// Content fingerprints of promoted tensors (docs/architecture.md, Promotions: verification
// without hangs): offline analysis compares them across ranks to prove a
// Replicate() promotion valid. The hash of the values runs as ATen ops on
// the tensor's own device, so a GPU tensor is never copied to the host; only
// the final 8 bytes cross. The same ops run on every device, so equal content
// gives equal fingerprints on CPU and GPU ranks alike. Runs for promotions
// only, never per op.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace meshscope::capture {

// Hash of a tensor's values, dtype and shape; equal on every rank and device
// that holds equal content (a non-contiguous tensor equals its contiguous
// copy). 0 for tensors without content: fake and meta tensors while
// torch.compile traces. A host tensor is hashed in one C++ pass; `atenOnly`
// (tests) computes the same value with the ATen ops a device runs.
uint64_t fingerprintTensor(const at::Tensor& tensor, bool atenOnly = false);

}  // namespace meshscope::capture
