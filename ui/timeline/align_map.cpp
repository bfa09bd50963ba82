#include "ui/timeline/align_map.h"

#include <algorithm>
#include <cmath>

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
        m.m_delta = m.m_knots[0].second - m.m_knots[0].first;
        m.m_knots.clear();
    }
    return m;
}

double AlignMap::toAligned(int64_t raw) const {
    if (m_knots.empty()) return double(raw) + double(m_delta);
    if (raw <= m_knots.front().first)
        return double(m_knots.front().second) - double(m_knots.front().first - raw);
    if (raw >= m_knots.back().first)
        return double(m_knots.back().second) + double(raw - m_knots.back().first);
    auto hi = std::upper_bound(m_knots.begin(), m_knots.end(), raw,
                               [](int64_t v, const auto& k) { return v < k.first; });
    auto lo = hi - 1;
    double f = double(raw - lo->first) / double(hi->first - lo->first);
    return double(lo->second) + f * double(hi->second - lo->second);
}

int64_t AlignMap::toRaw(double aligned) const {
    if (m_knots.empty()) return int64_t(std::floor(aligned - double(m_delta)));
    if (aligned <= double(m_knots.front().second))
        return m_knots.front().first - int64_t(std::ceil(double(m_knots.front().second) - aligned));
    if (aligned >= double(m_knots.back().second))
        return m_knots.back().first + int64_t(std::floor(aligned - double(m_knots.back().second)));
    auto hi = std::upper_bound(m_knots.begin(), m_knots.end(), aligned,
                               [](double v, const auto& k) { return v < double(k.second); });
    auto lo = hi - 1;
    double f = (aligned - double(lo->second)) / double(hi->second - lo->second);
    return lo->first + int64_t(std::floor(f * double(hi->first - lo->first)));
}

}  // namespace meshscope::ui
