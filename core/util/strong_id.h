#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace meshscope {

// A typed integer id. Row ids never cross module boundaries as raw integers:
// a StringId cannot be passed where a TensorId is expected.
template <typename Tag>
class StrongId {
  public:
    constexpr StrongId() = default;
    constexpr explicit StrongId(int64_t value) : m_value(value) {}

    constexpr int64_t value() const { return m_value; }
    constexpr bool valid() const { return m_value > 0; }
    constexpr explicit operator bool() const { return valid(); }
    constexpr auto operator<=>(const StrongId&) const = default;

  private:
    int64_t m_value = 0;  // 0 = none; valid ids start at 1
};

using StringId = StrongId<struct StringTag>;
using StackId = StrongId<struct StackTag>;
using MeshId = StrongId<struct MeshTag>;
using TensorId = StrongId<struct TensorTag>;
using OpSeq = StrongId<struct OpTag>;
using IncidentSeq = StrongId<struct IncidentTag>;
using CollectiveSeq = StrongId<struct CollectiveTag>;

}  // namespace meshscope

template <typename Tag>
struct std::hash<meshscope::StrongId<Tag>> {
    size_t operator()(const meshscope::StrongId<Tag>& id) const noexcept {
        return std::hash<int64_t>{}(id.value());
    }
};
