#include "ui/timeline/timeline_view.h"

#include <algorithm>

namespace meshscope::ui {

void TimelineView::setWidth(double px) {
    m_width = std::max(px, 1.0);
}

void TimelineView::setRange(double start, double end) {
    if (!(end - start >= kMinRangeNs)) {
        double mid = (start + end) / 2;
        start = mid - kMinRangeNs / 2;
        end = mid + kMinRangeNs / 2;
    }
    m_start = start;
    m_end = end;
}

void TimelineView::zoomAt(double px, double factor) {
    if (!(factor > 0)) return;
    double anchor = toAligned(px);
    double newRange = std::max(range() / factor, kMinRangeNs);
    double f = px / m_width;
    setRange(anchor - f * newRange, anchor + (1 - f) * newRange);
}

void TimelineView::panPx(double dx) {
    double dt = dx / pxPerNs();
    m_start -= dt;
    m_end -= dt;
}

void TimelineView::centreOn(double aligned) {
    double half = range() / 2;
    setRange(aligned - half, aligned + half);
}

}  // namespace meshscope::ui
