#pragma once

// Replay: a cursor over the aligned timeline of all ranks that plays,
// pauses, and steps op by op or incident by incident across ranks. Each move
// names the item it landed on, so the inspector and the mesh drawing can
// follow the cursor and a user watches a plain tensor arrive (the incident)
// and be promoted (the reconciling op).

#include <QObject>
#include <QTimer>
#include <memory>
#include <optional>
#include <tuple>

#include "ui/timeline/timeline_data.h"
#include "ui/timeline/timeline_tracks.h"

namespace meshscope::ui {

// A position of the replay: aligned time, then rank and seq, so items that
// start at the same instant on several ranks are each visited in turn.
struct ReplayStop {
    double time = 0;  // aligned ns
    TimelineSelection item;
    auto key() const { return std::tuple(time, item.rank, item.seq); }
};

// The next op start or incident after (direction > 0) or before (direction
// < 0) position `from`, over every rank.
std::optional<ReplayStop> nextOp(const TimelineData& data, const ReplayStop& from, int direction);
std::optional<ReplayStop> nextIncident(const TimelineData& data, const ReplayStop& from,
                                       int direction);
// A position before every item at aligned time t (and after none).
ReplayStop stopAt(double t);

class ReplayController : public QObject {
    Q_OBJECT
  public:
    explicit ReplayController(QObject* parent = nullptr);

    void setData(std::shared_ptr<TimelineData> data);
    std::optional<double> cursor() const {
        return m_cursor ? std::optional<double>(m_cursor->time) : std::nullopt;
    }
    bool playing() const { return m_timer.isActive(); }
    // Ops advanced per tick while playing (1, 4, 16, ...).
    void setSpeed(int opsPerTick) { m_speed = std::max(opsPerTick, 1); }
    int speed() const { return m_speed; }

  public slots:
    void play();
    void pause();
    void togglePlay();
    void stepOp(int direction = 1);
    void stepIncident(int direction = 1);
    void moveTo(double aligned);  // e.g. from a click: no item
    void reset();

  signals:
    void cursorMoved(double aligned, const meshscope::ui::TimelineSelection& item);
    void playingChanged(bool playing);

  private:
    void tick();
    void land(const std::optional<ReplayStop>& stop);

    std::shared_ptr<TimelineData> m_data;
    std::optional<ReplayStop> m_cursor;
    QTimer m_timer;
    int m_speed = 1;
};

}  // namespace meshscope::ui
