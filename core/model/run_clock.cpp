#include "core/model/run_clock.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace meshscope {

int64_t saturatingAdd(int64_t a, int64_t b) {
    int64_t out = 0;
    if (!__builtin_add_overflow(a, b, &out)) return out;
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

int64_t saturatingSub(int64_t a, int64_t b) {
    int64_t out = 0;
    if (!__builtin_sub_overflow(a, b, &out)) return out;
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

int64_t saturatingCast(double v) {
    if (std::isnan(v)) return 0;
    // 2^63 is exactly representable; every double below it converts.
    if (v >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
    if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
    return int64_t(v);
}

void RunClock::addRank(int rank, int64_t originWallNs) {
    m_base = m_origins.empty() ? originWallNs : std::min(m_base, originWallNs);
    m_origins[rank] = originWallNs;
}

int64_t RunClock::offset(int rank) const {
    auto it = m_origins.find(rank);
    return it == m_origins.end() ? 0 : saturatingSub(it->second, m_base);
}

int64_t RunClock::wall(int rank, int64_t rankNs) const {
    auto it = m_origins.find(rank);
    return saturatingAdd(it == m_origins.end() ? m_base : it->second, rankNs);
}

}  // namespace meshscope
