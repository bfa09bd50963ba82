#include "capture/agent/ops/tensor_table.h"

#include <algorithm>
#include "core/util/hot_path.h"

namespace meshscope::capture {

MESHSCOPE_HOT TensorTable::Entry* TensorTable::find(const at::Tensor& tensor) {
    if (!tensor.defined()) return nullptr;
    const c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
    if (isSubclass(tensor) && !m_subclasses.mayContain(impl)) return nullptr;
    return live(impl);
}

MESHSCOPE_HOT TensorTable::Entry* TensorTable::live(const c10::TensorImpl* impl) {
    auto it = m_entries.find(impl);
    if (it == m_entries.end()) return nullptr;
    if (it->second.weak.expired()) {  // address reused by a new tensor
        erased(it->second);
        m_entries.erase(it);
        return nullptr;
    }
    return &it->second;
}

TensorTable::Entry& TensorTable::get(const at::Tensor& tensor, bool& isNew) {
    if (m_entries.size() >= m_sweepAt) sweep();
    const c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
    if (Entry* entry = live(impl)) {
        isNew = false;
        return *entry;
    }
    isNew = true;
    bool subclass = isSubclass(tensor);
    if (subclass) m_subclasses.add(impl);
    Entry entry{c10::weak_intrusive_ptr<c10::TensorImpl>(tensor.getIntrusivePtr()),
                m_newId(),
                nullptr,
                nullptr,
                false,
                subclass,
                nullptr};
    return m_entries.emplace(impl, std::move(entry)).first->second;
}

void TensorTable::erased(const Entry& entry) {
    if (entry.provenance) --m_withProvenance;
}

TensorTable::Entry* TensorTable::setProvenance(const at::Tensor& tensor, Provenance provenance) {
    return tensor.defined() ? setProvenance(tensor, intern(std::move(provenance))) : nullptr;
}

TensorTable::ProvenancePtr TensorTable::intern(Provenance provenance) {
    auto found = m_interned.find(keyOf(provenance));
    if (found != m_interned.end()) return found->second;
    if (m_interned.size() >= kMaxInterned) m_interned.clear();
    auto shared = std::make_shared<const Provenance>(std::move(provenance));
    ++m_provenanceRecords;
    m_interned.emplace(keyOf(*shared), shared);
    return shared;
}

MESHSCOPE_HOT TensorTable::Entry* TensorTable::setProvenance(const at::Tensor& tensor,
                                                             ProvenancePtr provenance) {
    if (!tensor.defined() || !provenance) return nullptr;
    bool isNew = false;
    Entry& entry = get(tensor, isNew);
    if (!entry.provenance) ++m_withProvenance;
    m_filters[m_activeFilter.load(std::memory_order_relaxed)].add(tensor.unsafeGetTensorImpl());
    entry.provenance = std::move(provenance);
    entry.derived.reset();
    entry.lastStep.reset();
    return &entry;
}

MESHSCOPE_HOT const Provenance* TensorTable::provenance(const at::Tensor& tensor) {
    Entry* entry = find(tensor);
    return entry ? entry->provenance.get() : nullptr;
}

const Provenance* TensorTable::lastStep(const at::Tensor& tensor) {
    Entry* entry = find(tensor);
    return entry ? entry->lastStep.get() : nullptr;
}

MESHSCOPE_HOT TensorTable::ProvenancePtr TensorTable::derivedProvenance(const at::Tensor& tensor) {
    if (!mayHaveProvenance(tensor)) return nullptr;  // proven untagged: no lookup
    Entry* entry = find(tensor);
    if (!entry || !entry->provenance) return nullptr;
    if (!entry->derived) {
        if (entry->provenance->derived) {
            entry->derived = entry->provenance;
        } else {
            Provenance derived = *entry->provenance;
            derived.derived = true;
            entry->derived = intern(std::move(derived));
        }
    }
    return entry->derived;
}

void TensorTable::sweep() {
    for (auto it = m_entries.begin(); it != m_entries.end();) {
        if (it->second.weak.expired()) {
            erased(it->second);
            it = m_entries.erase(it);
        } else {
            ++it;
        }
    }
    if (m_entries.size() >= kMaxEntries) {  // all alive: give up their identities
        clear();
    }
    m_sweepAt = std::max<size_t>(kSweepFloor, m_entries.size() * 2);
    rebuildFilter();
}

void TensorTable::rebuildFilter() {
    int idle = 1 - m_activeFilter.load(std::memory_order_relaxed);
    auto& next = m_filters[idle];
    next.clear();
    m_subclasses.clear();
    for (const auto& [impl, entry] : m_entries) {
        if (entry.provenance) next.add(impl);
        if (entry.subclass) m_subclasses.add(impl);
    }
    m_activeFilter.store(idle, std::memory_order_release);
}

void TensorTable::clear() {
    {  // the old nodes and buckets go back to the pool, then the pool to the heap
        decltype(m_entries) emptied(&m_pool);
        m_entries.swap(emptied);
    }
    m_pool.release();
    m_interned.clear();
    m_byPlace.clear();
    m_preexisting.clear();
    m_withProvenance = 0;
    rebuildFilter();
}

}  // namespace meshscope::capture
