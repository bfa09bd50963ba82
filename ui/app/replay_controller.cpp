#include "ui/app/replay_controller.h"

#include <algorithm>
#include <limits>

namespace meshscope::ui {

namespace {

constexpr int kTickMs = 120;

// Keeps the better of two stops: the nearer one in the stepping direction.
void consider(std::optional<ReplayStop>& best, const ReplayStop& candidate, int direction) {
    if (!best || (direction > 0 ? candidate.key() < best->key() : candidate.key() > best->key()))
        best = candidate;
}

// The first item of one rank's time-sorted `items` beyond `from` in the
// stepping direction. Items are sorted by raw time and, at equal times, by
// seq, so the first one past `from` is this rank's best.
template <typename Vec, typename Make>
void scan(const Vec& items, const AlignMap& align, const ReplayStop& from, int direction, Make make,
          std::optional<ReplayStop>& best) {
    if (items.empty()) return;
    int64_t raw = align.toRaw(from.time);
    auto timeOf = [](const auto& x) {
        if constexpr (requires { x.start; })
            return x.start;
        else
            return x.time;
    };
    if (direction > 0) {
        auto it = std::lower_bound(items.begin(), items.end(), raw - 1,
                                   [&](const auto& x, int64_t v) { return timeOf(x) < v; });
        for (; it != items.end(); ++it) {
            ReplayStop s = make(*it);
            if (s.key() > from.key()) return consider(best, s, direction);
        }
        return;
    }
    auto it = std::upper_bound(items.begin(), items.end(), raw + 1,
                               [&](int64_t v, const auto& x) { return v < timeOf(x); });
    while (it != items.begin()) {
        --it;
        ReplayStop s = make(*it);
        if (s.key() < from.key()) return consider(best, s, direction);
    }
}

// Where a step starts: the cursor, or just before the run's first item.
ReplayStop startOf(const TimelineData& data, const std::optional<ReplayStop>& cursor) {
    return cursor ? *cursor : stopAt(data.alignedRange().first - 1);
}

}  // namespace

ReplayStop stopAt(double t) {
    return {t,
            {TimelineSelection::Kind::None, std::numeric_limits<int>::min(),
             std::numeric_limits<int64_t>::min()}};
}

std::optional<ReplayStop> nextOp(const TimelineData& data, const ReplayStop& from, int direction) {
    std::optional<ReplayStop> best;
    for (const RankTimeline& r : data.ranks)
        for (const Lane& lane : r.lanes)
            scan(
                lane.spans, r.align, from, direction,
                [&](const Span& s) {
                    return ReplayStop{r.align.toAligned(s.start),
                                      {TimelineSelection::Kind::Op, r.rank, s.seq()}};
                },
                best);
    return best;
}

std::optional<ReplayStop> nextIncident(const TimelineData& data, const ReplayStop& from,
                                       int direction) {
    std::optional<ReplayStop> best;
    for (const RankTimeline& r : data.ranks)
        scan(
            r.incidents, r.align, from, direction,
            [&](const IncidentMark& m) {
                return ReplayStop{r.align.toAligned(m.time),
                                  {TimelineSelection::Kind::Incident, r.rank, m.seq}};
            },
            best);
    return best;
}

ReplayController::ReplayController(QObject* parent) : QObject(parent) {
    m_timer.setInterval(kTickMs);
    connect(&m_timer, &QTimer::timeout, this, &ReplayController::tick);
}

void ReplayController::setData(std::shared_ptr<TimelineData> data) {
    pause();
    m_data = std::move(data);
    m_cursor.reset();
}

void ReplayController::reset() {
    pause();
    m_cursor.reset();
}

void ReplayController::play() {
    if (!m_data || m_timer.isActive()) return;
    m_timer.start();
    emit playingChanged(true);
}

void ReplayController::pause() {
    if (!m_timer.isActive()) return;
    m_timer.stop();
    emit playingChanged(false);
}

void ReplayController::togglePlay() {
    playing() ? pause() : play();
}

void ReplayController::stepOp(int direction) {
    if (!m_data) return;
    land(nextOp(*m_data, startOf(*m_data, m_cursor), direction));
}

void ReplayController::stepIncident(int direction) {
    if (!m_data) return;
    land(nextIncident(*m_data, startOf(*m_data, m_cursor), direction));
}

void ReplayController::moveTo(double aligned) {
    m_cursor = stopAt(aligned);
    emit cursorMoved(aligned, {});
}

void ReplayController::land(const std::optional<ReplayStop>& stop) {
    if (!stop) return;
    m_cursor = stop;
    emit cursorMoved(stop->time, stop->item);
}

void ReplayController::tick() {
    std::optional<ReplayStop> stop;
    ReplayStop t = startOf(*m_data, m_cursor);
    for (int i = 0; i < m_speed; ++i) {
        // An incident between here and the next op is never skipped.
        auto op = nextOp(*m_data, t, 1);
        auto inc = nextIncident(*m_data, t, 1);
        bool incidentFirst = inc && (!op || inc->time <= op->time);
        auto next = incidentFirst ? inc : op;
        if (!next) break;
        stop = next;
        t = *next;
        if (incidentFirst) break;  // playing stops on every incident
    }
    if (!stop) {
        pause();
        return;
    }
    land(stop);
}

}  // namespace meshscope::ui
