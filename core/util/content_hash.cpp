#include "core/util/content_hash.h"

#include <cstring>

namespace meshscope {
namespace {

// splitmix64 finalizer: full avalanche per 64-bit word.
uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace

void ContentHash::update(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t word;
        std::memcpy(&word, bytes + i, 8);
        m_state = mix(m_state ^ word) + 0x632BE59BD9B4E019ull;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, bytes + i, size - i);
    m_state = mix(m_state ^ tail ^ (uint64_t(size - i) << 56));
    m_length += size;
}

uint64_t ContentHash::digest() const {
    return mix(m_state ^ m_length);
}

}  // namespace meshscope
