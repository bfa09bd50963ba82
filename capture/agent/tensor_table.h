#pragma once

// Identity and provenance of the tensors the agent has seen. Keyed by
// TensorImpl address and validated by a weak reference, so a freed tensor's
// address reused by a new one is never mistaken for it. Provenance (where a
// plain tensor came from: a DataLoader batch, to_local(), optimizer state, a
// factory op inside forward) is attached by the adapters and the dispatch
// hook and read when a mixed-tensor incident must be classified. Bounded:
// dead entries are swept as the table grows, and past kMaxEntries it is
// cleared (provenance lost, counted).

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <atomic>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

#include "core/store/records.h"

namespace meshscope::capture {

struct Provenance {
    OriginClass origin = OriginClass::Unknown;
    std::string evidence;  // "created by DataLoader batch #12"
    StackId createdAt;
    bool derived = false;  // inherited from an input of the op that made this tensor
};

class TensorTable {
  public:
    // Hands out the ids of new entries (the rank writer's counter).
    explicit TensorTable(std::function<TensorId()> newId) : m_newId(std::move(newId)) {}

    static constexpr size_t kMaxEntries = size_t(1) << 20;
    // Dead entries pin their TensorImpl (a small object amid the large tensor
    // buffers, which fragments the heap): sweep them once the table doubles
    // past this floor.
    static constexpr size_t kSweepFloor = size_t(1) << 10;

    // Shared, not copied: every tensor derived from one tagged tensor (the
    // activations computed from a to_local() output) holds the same one.
    using ProvenancePtr = std::shared_ptr<const Provenance>;

    struct Entry {
        c10::weak_intrusive_ptr<c10::TensorImpl> weak;
        TensorId id;
        ProvenancePtr provenance;
        ProvenancePtr derived;  // `provenance` marked derived, made on first use
        bool recorded = false;  // its TensorRecord was submitted
        bool subclass = false;  // a DTensor (or another tensor subclass)
    };

    // The live entry for this tensor, or nullptr.
    Entry* find(const at::Tensor& tensor);
    // The live entry, creating one (with `isNew` set) when there is none.
    Entry& get(const at::Tensor& tensor, bool& isNew);

    void setProvenance(const at::Tensor& tensor, Provenance provenance);
    void setProvenance(const at::Tensor& tensor, ProvenancePtr provenance);
    const Provenance* provenance(const at::Tensor& tensor);
    // The provenance of a tensor computed from this one, or null.
    ProvenancePtr derivedProvenance(const at::Tensor& tensor);
    // Read without the GIL by the dispatcher hook's plain-op fast path.
    bool hasProvenance() const { return m_withProvenance.load(std::memory_order_relaxed) > 0; }

    size_t size() const { return m_entries.size(); }
    uint64_t clearedEntries() const { return m_cleared; }
    void clear();
    // Drops the entries of dead tensors (the agent calls it at every step's
    // end, when a step's temporaries have died).
    void sweep();

  private:
    std::function<TensorId()> m_newId;
    std::unordered_map<const c10::TensorImpl*, Entry> m_entries;
    size_t m_sweepAt = kSweepFloor;
    std::atomic<size_t> m_withProvenance{0};
    // Entries of tensor subclasses (DTensors): none in a usual run (only
    // plain tensors get a provenance or an identity), so the lookup of a
    // DTensor operand is skipped.
    size_t m_subclassEntries = 0;
    static bool isSubclass(const at::Tensor& t) {
        return t.key_set().has(c10::DispatchKey::Python);
    }
    // The entry at this address if its tensor is alive (a dead one is dropped).
    Entry* live(const c10::TensorImpl* impl);
    void erased(const Entry& entry);
    uint64_t m_cleared = 0;
};

}  // namespace meshscope::capture
