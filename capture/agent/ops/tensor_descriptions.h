#pragma once

// Tensor records shared by every tensor that looks the same. Most operands
// the hook records are short-lived tensors nothing else refers to
// (activations, gradients, optimizer temporaries). Giving each its own
// identity would pin its TensorImpl in the TensorTable until a sweep, and
// those pinned small objects split the allocator's free chunks between the
// large tensor buffers: the heap then grows and page-faults fresh memory on
// every step (measured: about 2,000 faults a step on the benchmark MLP).
// Such tensors are recorded by what they are (dtype, device, global shape,
// mesh and placements, which also fix the local shape on this rank) and
// share one TensorRecord. Tensors whose identity matters (a provenance, an
// incident's plain operand) keep their own entry in the TensorTable.
// Bounded: cleared past kMaxDescriptions (ids already written stay valid).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/store/records.h"

namespace meshscope::capture {

class TensorDescriptions {
  public:
    static constexpr size_t kMaxDescriptions = size_t(1) << 16;

    struct Key {
        c10::ScalarType dtype;
        c10::Device device;
        bool dtensor;
        MeshId mesh;          // none for plain tensors
        StringId placements;  // none for plain tensors
        c10::IntArrayRef sizes;
    };

    // The id recorded for tensors described by `key`, or none.
    TensorId find(const Key& key) const;
    void add(const Key& key, TensorId id);
    size_t size() const { return m_count; }
    void clear();

  private:
    struct Entry {
        c10::ScalarType dtype;
        c10::Device device;
        bool dtensor;
        MeshId mesh;
        StringId placements;
        std::vector<int64_t> sizes;
        TensorId id;
        bool matches(const Key& key) const;
    };
    static uint64_t hash(const Key& key);

    std::unordered_map<uint64_t, std::vector<Entry>> m_byHash;
    size_t m_count = 0;
};

}  // namespace meshscope::capture
