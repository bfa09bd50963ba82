#pragma once

// The visible window of the timeline: which aligned time range maps onto
// the canvas width, and the zoom/pan arithmetic that wheel, drag, keys and
// the minimap share. Qt-free.

#include <cstdint>

namespace meshscope::ui {

class TimelineView {
  public:
    static constexpr double kMinRangeNs = 200.0;  // deepest zoom: 200 ns across the canvas

    void setWidth(double px);
    double width() const { return m_width; }
    double start() const { return m_start; }  // aligned ns at the left edge
    double end() const { return m_end; }
    double range() const { return m_end - m_start; }
    double pxPerNs() const { return m_width / range(); }

    double toPx(double aligned) const { return (aligned - m_start) * pxPerNs(); }
    double toAligned(double px) const { return m_start + px / pxPerNs(); }

    void setRange(double start, double end);
    // Zoom by `factor` (> 1 zooms in) keeping the time under `px` in place.
    void zoomAt(double px, double factor);
    void panPx(double dx);
    // Move so `aligned` is at the centre, keeping the range.
    void centreOn(double aligned);

  private:
    double m_width = 1000;
    double m_start = 0, m_end = 1e9;
};

}  // namespace meshscope::ui
