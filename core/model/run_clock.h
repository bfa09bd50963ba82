#pragma once

// The ranks' clocks on one axis. Each rank records monotonic ns since its own
// clock origin, and that origin's wall-clock time (ns since the epoch); a run
// starts at its earliest origin, and a rank's times move by its origin's
// distance from there. The HTML report's timeline, the Chrome trace export
// and the GUI's timeline all align ranks through this. Recorded numbers are
// untrusted: the arithmetic saturates instead of overflowing.

#include <cstdint>
#include <map>

namespace meshscope {

int64_t saturatingAdd(int64_t a, int64_t b);
int64_t saturatingSub(int64_t a, int64_t b);
// `v` rounded toward zero and clamped to int64 (NaN: 0); a plain cast of a
// double out of range is undefined.
int64_t saturatingCast(double v);

class RunClock {
  public:
    // A rank's clock origin on the wall clock.
    void addRank(int rank, int64_t originWallNs);
    // The earliest origin: the run's time zero on the wall clock (0 if none).
    int64_t base() const { return m_base; }
    // How far after base `rank`'s clock starts (0 for a rank not added).
    int64_t offset(int rank) const;
    // A rank-local time on the wall clock.
    int64_t wall(int rank, int64_t rankNs) const;

  private:
    std::map<int, int64_t> m_origins;
    int64_t m_base = 0;
};

}  // namespace meshscope
