#pragma once

// The small track types the timeline canvas stacks vertically (Tracy's
// TimelineItem idea): a rank header with its step bands, an incident lane
// (with where the rank stopped, when it did not end cleanly), a collective
// lane and one op lane per thread and depth. Each knows its
// height and draws itself with ImGui's draw list into a DrawContext, noting
// what lies under the mouse. The canvas owns layout, input and selection.

#include <imgui.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ui/timeline/timeline_data.h"
#include "ui/timeline/timeline_view.h"

namespace meshscope::ui {

struct TimelineSelection {
    enum class Kind : uint8_t { None, Op, Incident, Collective };
    Kind kind = Kind::None;
    int rank = -1;
    int64_t seq = 0;
    bool operator==(const TimelineSelection&) const = default;
};

// What is under the mouse after a frame: a selectable item and its tooltip.
struct Hover {
    TimelineSelection item;
    std::vector<std::string> lines;
    double zoomStart = 0, zoomEnd = 0;  // aligned range a double-click zooms to
};

struct DrawContext {
    ImDrawList* draw = nullptr;
    const TimelineView* view = nullptr;
    float left = 0;    // x of the time axis' pixel 0
    float gutter = 0;  // label column width (x in [0, gutter))
    ImVec2 mouse{-1, -1};
    TimelineSelection selection;
    std::optional<double> cursor;  // replay cursor, aligned ns
    std::optional<Hover> hover;
    std::vector<DrawItem> scratch;  // reused between lanes
    int64_t itemsDrawn = 0;
    bool mouseIn(float x0, float y0, float x1, float y1) const {
        return mouse.x >= x0 && mouse.x < x1 && mouse.y >= y0 && mouse.y < y1;
    }
    Projection projection(const RankTimeline& rank) const {
        return {&rank.align, view->start(), view->pxPerNs()};
    }
    // With `layered`, opaque rectangles go to channel 0 of `draw`, which the
    // canvas draws first as solid colour (ImGuiCanvas::beginOpaqueLayer), and
    // everything else to channel 1 on top. Tracks do not overlap, so only
    // the order inside one track changes: its bars go under its labels.
    bool layered = false;
    void opaqueRect(ImVec2 a, ImVec2 b, ImU32 color) {
        bool opaque = (color >> IM_COL32_A_SHIFT & 0xFF) == 0xFF;
        if (layered && opaque) draw->ChannelsSetCurrent(0);
        draw->AddRectFilled(a, b, color);
        if (layered && opaque) draw->ChannelsSetCurrent(1);
    }
};

class Track {
  public:
    virtual ~Track() = default;
    virtual float height() const = 0;
    virtual void draw(DrawContext& ctx, float y) = 0;
};

// Builds the tracks of rank `rank` of `data` (header, incidents,
// collectives, op lanes); they find their rank by its number (RankRef).
std::vector<std::unique_ptr<Track>> makeRankTracks(const TimelineData& data, int rank);

// Colours shared with the legend and the tests.
ImU32 markColor(IncidentState kind);
// A marker's colour: its state's for a mixed tensor, its kind's otherwise.
ImU32 markColor(const IncidentMark& mark);
ImU32 kindColor(IncidentKind kind);
ImU32 phaseColor(Phase phase);

// Human-readable duration ("1.25 ms") and byte counts ("4.0 MiB").
std::string formatDuration(double ns);
// A time axis label: as many decimals as telling apart ticks `resolution`
// ns apart needs ("644.67005 ms" for ticks 50 ns apart).
std::string formatTick(double ns, double resolution);
std::string formatBytes(int64_t bytes);

}  // namespace meshscope::ui
