#pragma once

// 64-bit content hash for fingerprints of promoted tensors: equal bytes (and
// equal dtype/shape tags mixed in by the caller) give equal hashes on every
// rank and every run. Not cryptographic; collisions are 2^-64 accidents.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace meshscope {

class ContentHash {
  public:
    void update(const void* data, size_t size);
    void update(std::string_view text) { update(text.data(), text.size()); }
    uint64_t digest() const;

  private:
    uint64_t m_state = 0x9E3779B97F4A7C15ull;
    uint64_t m_length = 0;
};

}  // namespace meshscope
