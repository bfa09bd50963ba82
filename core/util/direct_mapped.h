#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace meshscope {

// A direct-mapped table of pointers in front of a node-based cache keyed by
// object address: one probe instead of a hash-node walk, for lookups on a
// hot path. A slot holds the key met last at its index; the value is a
// node of the cache behind it (nodes do not move), so the owner clears the
// table before it erases nodes.
template <typename Key, typename Value, size_t Slots>
class DirectMapped {
  public:
    Value* find(const Key* key) const {
        const auto& slot = m_slots[index(key)];
        return slot.first == key ? slot.second : nullptr;
    }
    void remember(const Key* key, Value* value) { m_slots[index(key)] = {key, value}; }
    void clear() { m_slots.fill({}); }

  private:
    // heap objects are at least 16-byte aligned: the low bits say nothing
    static size_t index(const Key* key) { return (reinterpret_cast<uintptr_t>(key) >> 4) % Slots; }
    std::array<std::pair<const Key*, Value*>, Slots> m_slots{};
};

}  // namespace meshscope
