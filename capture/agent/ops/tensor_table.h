#pragma once

// Identity and provenance of the tensors the agent has seen. Keyed by
// TensorImpl address and validated by a weak reference, so a freed tensor's
// address reused by a new one is never mistaken for it. Provenance (where a
// plain tensor came from: a DataLoader batch, to_local(), optimizer state, a
// factory op inside forward) is attached by the adapters and the dispatch
// hook and read when a mixed-tensor incident must be classified. Bounded:
// dead entries are swept as the table grows, and past kMaxEntries it is
// cleared (provenance lost, counted).
//
// Memory: the entries of one step's tensors live until the step's end, amid
// the training's tensor buffers on the training thread's heap. Their nodes
// come from a pool of the table's own, and provenance records are shared by
// content (a training loop tags the same kind of tensor at the same place
// every step): in steady state the table allocates nothing from the heap
// that outlives the op. (The tensor-parallel MLP of the overhead benchmark:
// 122 agent allocations a step on the training thread before, 70 after,
// all of these freed before the call that made them returns.)

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <array>
#include <atomic>

#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <string_view>
#include <unordered_map>

#include "capture/agent/agent_memory.h"
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
        // The plain op that made this tensor from a tagged one (a chain's
        // last step: evidence = the op, createdAt = its user frame), or null.
        ProvenancePtr lastStep;
    };

    // The live entry for this tensor, or nullptr.
    Entry* find(const at::Tensor& tensor);
    // The live entry, creating one (with `isNew` set) when there is none.
    Entry& get(const at::Tensor& tensor, bool& isNew);

    // Stores the shared record of this content (made once); the tensor's
    // entry, or nullptr for an undefined tensor.
    Entry* setProvenance(const at::Tensor& tensor, Provenance provenance);
    Entry* setProvenance(const at::Tensor& tensor, ProvenancePtr provenance);
    // The one shared record of this content.
    ProvenancePtr intern(Provenance provenance);
    const Provenance* provenance(const at::Tensor& tensor);
    // The last step of the chain that made this tensor (see Entry), or null.
    const Provenance* lastStep(const at::Tensor& tensor);
    // Provenance records an adapter keeps by a key of its own (the user
    // stack and layout of a to_local() call), so that a call made every step
    // formats nothing; forgotten with the table.
    struct PlaceKey {
        StackId stack;
        StringId layout;  // or the op of a chain's last step
        int kind = 0;     // to_local() 0, full_tensor() 1, kLastStepPlace
        bool operator==(const PlaceKey&) const = default;
    };
    static constexpr int kLastStepPlace = 2;
    ProvenancePtr byPlace(const PlaceKey& key) const {
        auto it = m_byPlace.find(key);
        return it == m_byPlace.end() ? nullptr : it->second;
    }
    void rememberPlace(const PlaceKey& key, ProvenancePtr provenance) {
        if (m_byPlace.size() >= kMaxInterned) m_byPlace.clear();
        m_byPlace.emplace(key, std::move(provenance));
    }
    // The provenance of a tensor computed from this one, or null.
    ProvenancePtr derivedProvenance(const at::Tensor& tensor);
    // Read without the GIL by the dispatcher hook's plain-op fast path.
    bool hasProvenance() const { return m_withProvenance.load(std::memory_order_relaxed) > 0; }
    // Whether this tensor may have a provenance, read without the GIL: false
    // proves it has none (most plain ops of a step touch no tagged tensor,
    // and then skip the GIL and the table altogether); true may be wrong.
    bool mayHaveProvenance(const at::Tensor& tensor) const {
        return m_filters[m_activeFilter.load(std::memory_order_acquire)].mayContain(
            tensor.unsafeGetTensorImpl());
    }

    // The tensors alive when the Python API attached the agent: a plain
    // tensor with no birth was made before attach() only if it is one of
    // them. Each is held weakly, so its address is not reused meanwhile.
    static constexpr size_t kMaxPreexisting = size_t(1) << 20;
    void markPreexisting(const at::Tensor& tensor) {
        if (tensor.defined() && m_preexisting.size() < kMaxPreexisting)
            m_preexisting.emplace(
                tensor.unsafeGetTensorImpl(),
                c10::weak_intrusive_ptr<c10::TensorImpl>(tensor.getIntrusivePtr()));
    }
    bool preexisting(const at::Tensor& tensor) const {
        return m_preexisting.contains(tensor.unsafeGetTensorImpl());
    }

    size_t size() const { return m_entries.size(); }
    // Provenance records made so far (intern() hands out existing ones).
    uint64_t provenanceRecords() const { return m_provenanceRecords; }
    void clear();
    // Drops the entries of dead tensors (the agent calls it at every step's
    // end, when a step's temporaries have died).
    void sweep();

  private:
    // A bit per hashed TensorImpl address (2^LogBits bits): false from
    // mayContain() proves an address was never added since the last clear().
    template <int LogBits>
    class AddressFilter {
      public:
        void add(const void* p) {
            size_t b = bit(p);
            m_words[b / 64].fetch_or(uint64_t(1) << (b % 64), std::memory_order_relaxed);
        }
        bool mayContain(const void* p) const {
            size_t b = bit(p);
            return m_words[b / 64].load(std::memory_order_relaxed) & (uint64_t(1) << (b % 64));
        }
        void clear() {
            for (auto& w : m_words)
                w.store(0, std::memory_order_relaxed);
        }

      private:
        static size_t bit(const void* p) {
            return size_t((reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull >>
                          (64 - LogBits));
        }
        std::array<std::atomic<uint64_t>, (size_t(1) << LogBits) / 64> m_words{};
    };
    // Set when an entry gets a provenance (2 KiB each). Two of them: sweep()
    // rebuilds the idle one from the live entries and then makes it the
    // active one, so a reader on another thread never sees a half-built
    // filter.
    std::array<AddressFilter<14>, 2> m_filters;
    std::atomic<int> m_activeFilter{0};
    void rebuildFilter();

    std::function<TensorId()> m_newId;
    std::pmr::unsynchronized_pool_resource m_pool{agentMemory()};  // before m_entries: outlives it
    std::pmr::unordered_map<const c10::TensorImpl*, Entry> m_entries{&m_pool};
    // Provenance records by content; the key's text views the record's own.
    struct ProvenanceKey {
        OriginClass origin;
        StackId createdAt;
        bool derived;
        std::string_view evidence;
        bool operator==(const ProvenanceKey&) const = default;
    };
    struct ProvenanceKeyHash {
        size_t operator()(const ProvenanceKey& k) const noexcept {
            return std::hash<std::string_view>{}(k.evidence) ^
                   (std::hash<StackId>{}(k.createdAt) * 31 + size_t(k.origin) * 2 + k.derived);
        }
    };
    static ProvenanceKey keyOf(const Provenance& p) {
        return {p.origin, p.createdAt, p.derived, p.evidence};
    }
    static constexpr size_t kMaxInterned = 4096;  // then forgotten (records stay shared)
    std::unordered_map<ProvenanceKey, ProvenancePtr, ProvenanceKeyHash> m_interned;
    struct PlaceKeyHash {
        size_t operator()(const PlaceKey& k) const noexcept {
            return std::hash<StackId>{}(k.stack) * 31 + std::hash<StringId>{}(k.layout) * 7 +
                   size_t(k.kind);
        }
    };
    std::unordered_map<PlaceKey, ProvenancePtr, PlaceKeyHash> m_byPlace;
    std::unordered_map<const c10::TensorImpl*, c10::weak_intrusive_ptr<c10::TensorImpl>>
        m_preexisting;
    size_t m_sweepAt = kSweepFloor;
    std::atomic<size_t> m_withProvenance{0};
    // A bit per hashed address of a subclass entry (a tensor with the Python
    // key). DTensors almost never have an entry (only plain tensors get a
    // provenance or an identity), but a tensor-parallel step tags the
    // AsyncCollectiveTensor its to_local() returns, which is a subclass too:
    // a count of subclass entries would send every DTensor operand to the
    // table, a bucket that is cold by the next op. With no bit set, the
    // lookup is skipped. Bits are set as entries are made and rebuilt from
    // the live entries by sweep(); a stale bit costs one lookup. Used with
    // the table (under the GIL): one filter, rebuilt in place.
    AddressFilter<10> m_subclasses;  // 128 bytes
    static bool isSubclass(const at::Tensor& t) {
        return t.key_set().has(c10::DispatchKey::Python);
    }
    // The entry at this address if its tensor is alive (a dead one is dropped).
    Entry* live(const c10::TensorImpl* impl);
    void erased(const Entry& entry);
    uint64_t m_provenanceRecords = 0;
};

}  // namespace meshscope::capture
