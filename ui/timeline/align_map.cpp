#include "ui/timeline/align_map.h"

#include <algorithm>
#include <cmath>

#include "core/model/run_clock.h"

namespace meshscope::ui {

AlignMap AlignMap::offset(int64_t delta) {
    AlignMap m;
    m.m_delta = delta;
    return m;
}

AlignMap AlignMap::piecewise(std::vector<std::pair<int64_t, int64_t>> knots, int64_t delta) {
    AlignMap m;
    m.m_delta = delta;
    std::sort(knots.begin(), knots.end());
    for (const auto& k : knots)
        if (m.m_knots.empty() ||
            (k.first > m.m_knots.back().first && k.second > m.m_knots.back().second))
            m.m_knots.push_back(k);
    // One knot is just an offset.
    if (m.m_knots.size() == 1) {
        m.m_delta = saturatingSub(m.m_knots[0].second, m.m_knots[0].first);
        m.m_knots.clear();
    }
    return m;
}

// Differences of recorded times are taken in double: they may span the whole
// int64 range, where an int64 difference would overflow.
double AlignMap::toAligned(int64_t raw) const {
    if (m_knots.empty()) return double(raw) + double(m_delta);
    if (raw <= m_knots.front().first)
        return double(m_knots.front().second) - (double(m_knots.front().first) - double(raw));
    if (raw >= m_knots.back().first)
        return double(m_knots.back().second) + (double(raw) - double(m_knots.back().first));
    auto hi = std::upper_bound(m_knots.begin(), m_knots.end(), raw,
                               [](int64_t v, const auto& k) { return v < k.first; });
    auto lo = hi - 1;
    double f = (double(raw) - double(lo->first)) / (double(hi->first) - double(lo->first));
    return double(lo->second) + f * (double(hi->second) - double(lo->second));
}

int64_t AlignMap::toRaw(double aligned) const {
    if (m_knots.empty()) return saturatingCast(std::floor(aligned - double(m_delta)));
    if (aligned <= double(m_knots.front().second))
        return saturatingSub(m_knots.front().first,
                             saturatingCast(std::ceil(double(m_knots.front().second) - aligned)));
    if (aligned >= double(m_knots.back().second))
        return saturatingAdd(m_knots.back().first,
                             saturatingCast(std::floor(aligned - double(m_knots.back().second))));
    auto hi = std::upper_bound(m_knots.begin(), m_knots.end(), aligned,
                               [](double v, const auto& k) { return v < double(k.second); });
    auto lo = hi - 1;
    double f = (aligned - double(lo->second)) / (double(hi->second) - double(lo->second));
    return saturatingAdd(lo->first,
                         saturatingCast(std::floor(f * (double(hi->first) - double(lo->first)))));
}

}  // namespace meshscope::ui
