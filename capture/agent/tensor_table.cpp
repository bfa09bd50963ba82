#include "capture/agent/tensor_table.h"

#include <algorithm>

namespace meshscope::capture {

TensorTable::Entry* TensorTable::find(const at::Tensor& tensor) {
    if (!tensor.defined()) return nullptr;
    auto it = m_entries.find(tensor.unsafeGetTensorImpl());
    if (it == m_entries.end()) return nullptr;
    if (it->second.weak.expired()) {  // address reused by a new tensor
        if (it->second.provenance) --m_withProvenance;
        m_entries.erase(it);
        return nullptr;
    }
    return &it->second;
}

TensorTable::Entry& TensorTable::get(const at::Tensor& tensor, bool& isNew) {
    if (Entry* live = find(tensor)) {
        isNew = false;
        return *live;
    }
    if (m_entries.size() >= m_sweepAt) sweep();
    isNew = true;
    Entry entry{c10::weak_intrusive_ptr<c10::TensorImpl>(tensor.getIntrusivePtr()), m_newId(),
                std::nullopt};
    return m_entries.insert_or_assign(tensor.unsafeGetTensorImpl(), std::move(entry)).first->second;
}

void TensorTable::setProvenance(const at::Tensor& tensor, Provenance provenance) {
    if (!tensor.defined()) return;
    bool isNew = false;
    Entry& entry = get(tensor, isNew);
    if (!entry.provenance) ++m_withProvenance;
    entry.provenance = std::move(provenance);
}

const Provenance* TensorTable::provenance(const at::Tensor& tensor) {
    Entry* entry = find(tensor);
    return entry && entry->provenance ? &*entry->provenance : nullptr;
}

void TensorTable::sweep() {
    for (auto it = m_entries.begin(); it != m_entries.end();) {
        if (it->second.weak.expired()) {
            if (it->second.provenance) --m_withProvenance;
            it = m_entries.erase(it);
        } else {
            ++it;
        }
    }
    if (m_entries.size() >= kMaxEntries) {  // all alive: give up their identities
        m_cleared += m_entries.size();
        clear();
    }
    m_sweepAt = std::max<size_t>(kSweepFloor, m_entries.size() * 2);
}

void TensorTable::clear() {
    m_entries.clear();
    m_withProvenance = 0;
}

}  // namespace meshscope::capture
