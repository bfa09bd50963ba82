#pragma once

// How one rank's clock maps onto the timeline's common axis. Ranks record
// monotonic ns since their own clock origin; the timeline lines them up
// either by wall clock (a constant offset per rank) or by optimizer step (a
// monotone piecewise-linear map whose knots are the ends of the rank's
// optimizer steps, placed where the reference rank's steps end). Both
// directions are needed: spans are found by binary search in raw time and
// drawn in aligned time.

#include <cstdint>
#include <utility>
#include <vector>

namespace meshscope::ui {

class AlignMap {
  public:
    AlignMap() = default;
    // aligned = raw + delta
    static AlignMap offset(int64_t delta);
    // Knots (raw, aligned), both strictly increasing; slope 1 outside them.
    // Knots that would make the map non-monotone are dropped.
    static AlignMap piecewise(std::vector<std::pair<int64_t, int64_t>> knots, int64_t delta);

    double toAligned(int64_t raw) const;
    int64_t toRaw(double aligned) const;

  private:
    int64_t m_delta = 0;                               // used when there are no knots
    std::vector<std::pair<int64_t, int64_t>> m_knots;  // (raw, aligned)
};

}  // namespace meshscope::ui
