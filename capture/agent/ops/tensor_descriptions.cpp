#include "capture/agent/ops/tensor_descriptions.h"

#include <algorithm>

#include "core/util/hot_path.h"

namespace meshscope::capture {

bool TensorDescriptions::Entry::matches(const Key& key) const {
    return dtype == key.dtype && device == key.device && dtensor == key.dtensor &&
           mesh == key.mesh && placements == key.placements &&
           std::equal(sizes.begin(), sizes.end(), key.sizes.begin(), key.sizes.end());
}

MESHSCOPE_HOT uint64_t TensorDescriptions::hash(const Key& key) {
    uint64_t h = 0xCBF29CE484222325ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001B3ull; };
    mix(uint64_t(key.dtype));
    mix(uint64_t(key.device.type()) << 8 | uint8_t(key.device.index()));
    mix(key.dtensor);
    mix(uint64_t(key.mesh.value()));
    mix(uint64_t(key.placements.value()));
    for (int64_t size : key.sizes)
        mix(uint64_t(size));
    return h;
}

MESHSCOPE_HOT TensorId TensorDescriptions::find(const Key& key) const {
    auto it = m_byHash.find(hash(key));
    if (it == m_byHash.end()) return {};
    for (const Entry& e : it->second)
        if (e.matches(key)) return e.id;
    return {};
}

void TensorDescriptions::add(const Key& key, TensorId id) {
    if (m_count >= kMaxDescriptions) clear();
    m_byHash[hash(key)].push_back(
        {key.dtype, key.device, key.dtensor, key.mesh, key.placements, key.sizes.vec(), id});
    ++m_count;
}

void TensorDescriptions::clear() {
    m_byHash.clear();
    m_count = 0;
}

}  // namespace meshscope::capture
