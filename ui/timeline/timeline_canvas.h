#pragma once

// The multi-rank timeline: a minimap, a time ruler and, per rank, its header
// with optimizer steps, incident markers, collectives and op lanes (tracks
// from timeline_tracks.h), drawn with Dear ImGui. This class is the
// controller: layout, zoom/pan/scroll input, hover, selection, the replay
// cursor and following a live run. It reads TimelineData and never writes it.

#include <QPointF>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "ui/canvas/imgui_canvas.h"
#include "ui/timeline/timeline_tracks.h"

namespace meshscope::ui {

class TimelineCanvas : public ImGuiCanvas {
    Q_OBJECT
  public:
    explicit TimelineCanvas(QWidget* parent = nullptr);
    ~TimelineCanvas() override;

    // A new run: lays out its tracks and shows all of it.
    void setData(std::shared_ptr<TimelineData> data);
    const std::shared_ptr<TimelineData>& data() const { return m_data; }
    // The data grew (live run) or was re-aligned: relayout, follow if asked.
    void dataChanged();

    TimelineView& view() { return m_view; }
    void fitAll();
    // The view a run opens with: from the start of its first recorded step
    // (the set-up before it is one Home key away) to its end.
    void fitFromFirstStep();
    void zoomToRange(double start, double end);  // aligned ns, with a margin
    // Scrolls `rank`'s lanes to the top and shows steps [firstStep,
    // lastStep] of it (the whole rank when firstStep is negative).
    void showRank(int rank, int64_t firstStep, int64_t lastStep);
    // Content y of a rank's first track (tests).
    std::optional<float> rankTop(int rank) const;
    float scrollY() const { return m_scrollY; }

    TimelineSelection selection() const { return m_selection; }
    // Selects an item (from the table or the replay); centres it when asked.
    void setSelection(const TimelineSelection& selection, bool centre);
    void setReplayCursor(std::optional<double> aligned);
    std::optional<double> replayCursor() const { return m_cursor; }
    // Following keeps the newest data in view: the user's zoom when they
    // had zoomed into the run, else the whole run up to its last
    // kFollowWindowNs.
    void setFollowLive(bool follow);
    static constexpr double kFollowWindowNs = 2e9;
    bool followLive() const { return m_follow; }

    // Aligned time of an incident or op of a rank, when loaded.
    std::optional<double> timeOf(const TimelineSelection& item) const;
    // Where an incident marker or op span is drawn now, in widget pixels.
    std::optional<QPointF> positionOf(const TimelineSelection& item) const;
    // Items drawn in the last frame, and spans overlapping the view now.
    int64_t itemsDrawn() const { return m_itemsDrawn; }
    int64_t spansInView() const;

  signals:
    void selectionChanged(const meshscope::ui::TimelineSelection& selection);
    void followLiveChanged(bool follow);
    void viewChanged();

  protected:
    void drawFrame() override;
    void initializeGL() override;
    void resizeGL(int w, int h) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;

  private:
    void relayout();
    void drawMinimap(ImDrawList* dl, float width);
    void rebuildMinimap(int bins, double lo, double hi);
    void drawRuler(ImDrawList* dl, float y, float width);
    void drawTracks(DrawContext& ctx, float top, float bottom);
    void drawCursor(ImDrawList* dl, float top, float bottom);
    void showTooltip();
    void userMovedView();
    void scrollBy(float dy);
    bool inMinimap(QPointF pos) const;
    void centreFromMinimap(double x);

    std::shared_ptr<TimelineData> m_data;
    std::vector<std::unique_ptr<Track>> m_tracks;
    std::set<size_t> m_rankEnds;  // indices of the last track of each rank
    // Content y (before scrolling) of each rank's incident track and op lanes.
    std::map<int, float> m_incidentY;
    std::map<int, float> m_rankTop;
    std::map<std::pair<int, size_t>, float> m_laneY;
    TimelineView m_view;
    TimelineSelection m_selection;
    std::optional<double> m_cursor;
    std::optional<Hover> m_hover;   // from the last frame
    unsigned m_minimapTexture = 0;  // GL texture of the overview strip, 0 = none yet
    double m_densityStart = 0, m_densityEnd = 0;
    int m_densityBins = 0;
    float m_scrollY = 0, m_contentHeight = 0;
    int64_t m_itemsDrawn = 0;
    bool m_follow = false;
    double m_followRange = 0;  // 0: the whole run, up to kFollowWindowNs
    // Mouse drag state: panning the view or dragging in the minimap.
    std::optional<QPointF> m_pressAt, m_lastDrag;
    bool m_dragged = false, m_minimapDrag = false;
    size_t m_laneCount = 0;
};

}  // namespace meshscope::ui
