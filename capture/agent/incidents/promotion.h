#pragma once

// Turns the plain operand of an incident into what the policy chose: a
// DTensor made with DTensor.from_local (Replicate() on every mesh dim, or
// Shard(batch dim) on the mesh's batch dim), or Python scalars. The promoted
// op then runs through DTensor's own dispatch, so redistributions and
// collectives happen as PyTorch decides. Every promoted tensor is
// fingerprinted (capture/agent/incidents/fingerprint.h) so offline analysis can prove a Replicate()
// promotion valid across ranks. Requires the GIL.

#include <Python.h>
#include <atomic>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "capture/agent/interop/torch_types.h"
#include "core/store/records.h"

namespace meshscope::capture {

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

Promotion promoteToDTensor(TorchTypes& types, PyObject* plain, Action action,
                           const PromotionTarget& target);
Promotion scalarize(PyObject* plain, bool asList);

// `dtensor` redistributed to Replicate() on every dim of `mesh` (the same
// global tensor): a new reference, or null with the Python error set.
PyRef redistributeReplicated(TorchTypes& types, PyObject* dtensor, PyObject* mesh, int meshNdim);

// Promotions made so far, by the plain tensor they promoted: a plain tensor
// used twice is promoted once. Under the TorchDispatchMode (below autograd)
// backward receives the plain tensors autograd saved in forward (an index
// tensor, a transposed input); they are replaced by the same DTensor forward
// used, so forward and backward agree on one global tensor. Sharded
// promotions are also known by their DTensor, for the dispatcher hook's
// Replicate() retry. Entries die with their tensors (swept on insert), so
// the cache holds only live promotions.
class PromotionCache {
  public:
    // The DTensor `plain` was promoted to (borrowed), or nullptr.
    PyObject* find(const at::Tensor& plain);
    void insert(const at::Tensor& plain, PyObject* promoted, bool sharded);
    // Whether `dtensor` is a live promotion laid out with Shard().
    bool isShardedPromotion(const at::Tensor& dtensor) const;
    // Read without the GIL: any sharded promotion ever made in this attach.
    bool anySharded() const { return m_anySharded.load(std::memory_order_relaxed); }
    void clear() {
        m_entries.clear();
        m_sharded.clear();
    }
    size_t size() const { return m_entries.size(); }

  private:
    struct Entry {
        c10::weak_intrusive_ptr<c10::TensorImpl> weak;
        PyRef promoted;
    };
    std::unordered_map<const c10::TensorImpl*, Entry> m_entries;
    std::unordered_map<const c10::TensorImpl*, c10::weak_intrusive_ptr<c10::TensorImpl>> m_sharded;
    std::atomic<bool> m_anySharded{false};
};

// The overload of the same op that takes Python scalars where `overload`
// takes a tensor ("Tensor" -> "Scalar"/"ScalarList"), or null.
PyRef scalarOverload(PyObject* overload, bool asList);

}  // namespace meshscope::capture
