#pragma once

// Turns the plain operand of an incident into what the policy chose: a
// DTensor made with DTensor.from_local (Replicate() on every mesh dim, or
// Shard(batch dim) on the mesh's batch dim), or Python scalars. The promoted
// op then runs through DTensor's own dispatch, so redistributions and
// collectives happen as PyTorch decides. Every promoted tensor is
// fingerprinted (content hash) so offline analysis can prove a Replicate()
// promotion valid across ranks. Requires the GIL.

#include <Python.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "capture/agent/py_torch.h"
#include "core/store/records.h"

namespace meshscope::capture {

// Content hash of a tensor's values, dtype and shape; equal on every rank
// that holds equal content. (CPU: hashes the bytes; other devices: copies
// to the host first.)
uint64_t fingerprintTensor(const at::Tensor& tensor);

struct Promotion {
    PyRef value;             // replaces the plain operand; null on failure
    std::string placements;  // "[Replicate()]", "[Shard(0)]", "python float list"
    std::string error;       // why it failed
};

struct PromotionTarget {
    PyObject* mesh = nullptr;  // of the DTensor operand the plain one meets
    int meshNdim = 1;
    int batchMeshDim = 0;  // mesh dim that Shard(batch dim) applies to
    int shardDim = 0;      // tensor dim
};

Promotion promoteToDTensor(PyTorch& py, PyObject* plain, Action action,
                           const PromotionTarget& target);
Promotion scalarize(PyObject* plain, bool asList);

// The overload of the same op that takes Python scalars where `overload`
// takes a tensor ("Tensor" -> "Scalar"/"ScalarList"), or null.
PyRef scalarOverload(PyObject* overload, bool asList);

}  // namespace meshscope::capture
