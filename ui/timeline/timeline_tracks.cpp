#include "ui/timeline/timeline_tracks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "core/model/run_clock.h"

namespace meshscope::ui {

namespace {

constexpr float kLaneHeight = 17;
constexpr float kMinSpanPx = 3;  // narrower spans fold into one item
constexpr ImU32 kText = IM_COL32(30, 30, 30, 255);
constexpr ImU32 kMuted = IM_COL32(110, 110, 110, 255);
constexpr ImU32 kSelected = IM_COL32(255, 193, 7, 255);

// Draws text clipped to [x0, x1), if at least a few characters fit.
void clippedText(ImDrawList* dl, float x0, float x1, float y, ImU32 color, const std::string& s) {
    if (x1 - x0 < 14 || s.empty()) return;
    ImVec4 clip(x0, y, x1, y + kLaneHeight);
    dl->AddText(nullptr, 0, ImVec2(x0, y), color, s.data(), s.data() + s.size(), 0, &clip);
}

std::string shortOpName(const std::string& name) {
    auto colons = name.rfind("::");
    return colons == std::string::npos ? name : name.substr(colons + 2);
}

class RankHeaderTrack : public Track {
  public:
    explicit RankHeaderTrack(RankRef rank) : m_ref(rank) {}
    float height() const override { return 20; }
    void draw(DrawContext& ctx, float y) override;

  private:
    RankRef m_ref;
    const RankTimeline& rank() const { return *m_ref; }
};

void RankHeaderTrack::draw(DrawContext& ctx, float y) {
    ImDrawList* dl = ctx.draw;
    float right = ctx.left + float(ctx.view->width());
    ctx.opaqueRect(ImVec2(0, y), ImVec2(right, y + height()), IM_COL32(232, 236, 241, 255));
    std::string label = fmt::format("rank {}", rank().rank);
    dl->AddText(ImVec2(6, y + 3), kText, label.c_str());
    // live in green; how a rank ended badly in red (killed, died, STOPPED)
    bool live = rank().state == RankState::Live;
    std::string state = live                                 ? "live"
                        : !rank().endLabel.empty()           ? rank().endLabel
                        : rank().state == RankState::Stopped ? "STOPPED"
                                                             : "";
    if (state.size() > 60) state = state.substr(0, 57) + "...";  // the stops dock has it all
    if (!state.empty())
        dl->AddText(ImVec2(58, y + 3),
                    live ? IM_COL32(46, 125, 50, 255) : IM_COL32(198, 40, 40, 255), state.c_str());
    // Optimizer steps: the step() call as a band, labelled with its number.
    Projection p = ctx.projection(rank());
    float lastLabel = -1e9f, lastX1 = -1e9f;
    // Steps are in time order: start at the first one that ends in view, and
    // draw at most one band per pixel (13,000 steps on a 1,000 px canvas).
    int64_t t0 = p.toRaw(0);
    auto first = std::lower_bound(rank().steps.begin(), rank().steps.end(), t0,
                                  [](const StepBand& s, int64_t v) { return s.end < v; });
    // Touching bands are drawn as one bar (dense steps cost one rectangle);
    // labels go on top afterwards.
    float runX0 = 0, runX1 = -1;
    auto flush = [&] {
        if (runX1 >= runX0)
            dl->AddRectFilled(ImVec2(runX0, y + 2), ImVec2(runX1, y + height() - 2),
                              IM_COL32(149, 117, 205, 200));
    };
    std::vector<std::pair<float, int64_t>> labels;
    for (auto it = first; it != rank().steps.end(); ++it) {
        const StepBand& s = *it;
        float x0 = ctx.left + float(p.toPx(s.start)), x1 = ctx.left + float(p.toPx(s.end));
        if (x0 > right) break;
        if (x1 < ctx.left || x1 < lastX1 + 1) continue;
        lastX1 = x1;
        x0 = std::max(x0, ctx.left);
        x1 = std::max(x1, x0 + 1);
        if (runX1 >= runX0 && x0 <= runX1 + 1) {
            runX1 = std::max(runX1, x1);
        } else {
            flush();
            runX0 = x0;
            runX1 = x1;
        }
        if (x0 - lastLabel > 60) {
            labels.emplace_back(x0, s.step);
            lastLabel = x0;
        }
        if (!ctx.hover && ctx.mouseIn(x0 - 1, y, x1 + 1, y + height()))
            ctx.hover = Hover{{},
                              {fmt::format("rank {} optimizer step {}", rank().rank, s.step),
                               formatDuration(double(s.end) - double(s.start))},
                              rank().align.toAligned(s.start),
                              rank().align.toAligned(s.end)};
    }
    flush();
    for (const auto& [x, step] : labels) {
        std::string text = fmt::format("step {}", step);
        dl->AddText(ImVec2(x + 3, y + 3), IM_COL32(69, 39, 160, 255), text.c_str());
    }
}

class IncidentTrack : public Track {
  public:
    explicit IncidentTrack(RankRef rank) : m_ref(rank) {}
    float height() const override { return 16; }
    void draw(DrawContext& ctx, float y) override;

  private:
    void hoverMark(DrawContext& ctx, const IncidentMark& m);
    void drawStop(DrawContext& ctx, float y, const StopMark& stop);
    RankRef m_ref;
    const RankTimeline& rank() const { return *m_ref; }
};

void IncidentTrack::hoverMark(DrawContext& ctx, const IncidentMark& m) {
    std::vector<std::string> lines = {
        fmt::format("incident #{} on rank {}: {}", m.seq, rank().rank, rank().string(m.op)),
        m.kind == IncidentKind::MixedTensor
            ? fmt::format("{} -> {}", toString(m.action), toString(m.outcome))
            : std::string(incidentKindInfo(m.kind).title),
        fmt::format("step {}", m.step)};
    if (m.verdict != Verdict::NotChecked)
        lines.push_back(fmt::format("cross-rank: {}", toString(m.verdict)));
    double t = rank().align.toAligned(m.time);
    ctx.hover = Hover{{TimelineSelection::Kind::Incident, rank().rank, m.seq}, lines, t, t};
}

void IncidentTrack::draw(DrawContext& ctx, float y) {
    ImDrawList* dl = ctx.draw;
    dl->AddText(ImVec2(ctx.gutter - 66, y + 1), kMuted, "incidents");
    Projection p = ctx.projection(rank());
    int64_t t0 = p.toRaw(0), t1 = saturatingAdd(p.toRaw(ctx.view->width()), 1);
    auto it = std::lower_bound(rank().incidents.begin(), rank().incidents.end(), t0,
                               [](const IncidentMark& m, int64_t v) { return m.time < v; });
    // At most one marker per colour every few pixels (they are 10 px wide),
    // and no anti-aliased fringe: 100k incidents stay a few thousand quads.
    // Mixed tensors are coloured by state, other kinds by kind.
    std::array<float, kIncidentStates.size() + kIncidentKinds.size()> lastX;
    lastX.fill(-1e9f);
    if (rank().stop) drawStop(ctx, y, *rank().stop);  // under the marker it stopped at
    ImDrawListFlags flags = dl->Flags;
    dl->Flags &= ~ImDrawListFlags_AntiAliasedFill;
    for (; it != rank().incidents.end() && it->time < t1; ++it) {
        float x = ctx.left + float(p.toPx(it->time));
        size_t kind =
            it->kind == IncidentKind::MixedTensor
                ? size_t(markKind(*it))
                : kIncidentStates.size() + std::min(size_t(it->kind), kIncidentKinds.size() - 1);
        bool selected = ctx.selection ==
                        TimelineSelection{TimelineSelection::Kind::Incident, rank().rank, it->seq};
        if (x - lastX[kind] < 6 && !selected) continue;
        lastX[kind] = x;
        float cy = y + height() / 2;
        ImVec2 a(x, cy - 6), b(x + 5, cy), c(x, cy + 6), d(x - 5, cy);
        dl->AddQuadFilled(a, b, c, d, markColor(*it));
        if (selected) dl->AddQuad(a, b, c, d, kSelected, 2.5f);
        ++ctx.itemsDrawn;
        if (!ctx.hover && ctx.mouseIn(x - 5, y, x + 6, y + height())) hoverMark(ctx, *it);
    }
    dl->Flags = flags;
}

// Where the rank stopped: a flag just right of the time it stopped at (the
// marker of the incident it stopped in stays visible), in the colour of
// that incident's kind (grey at its last collective), labelled to its
// right; the hover gives its state line.
void IncidentTrack::drawStop(DrawContext& ctx, float y, const StopMark& stop) {
    ImDrawList* dl = ctx.draw;
    float x = ctx.left + float(ctx.projection(rank()).toPx(stop.time));
    float right = ctx.left + float(ctx.view->width());
    if (x < ctx.left - 8 || x > right) return;
    ImU32 color = stop.kind ? kindColor(*stop.kind) : kMuted;
    float pole = x + 6;
    dl->AddLine(ImVec2(pole, y), ImVec2(pole, y + height()), color, 2.0f);
    dl->AddTriangleFilled(ImVec2(pole, y), ImVec2(pole + 8, y + 3.5f), ImVec2(pole, y + 7), color);
    clippedText(dl, pole + 10, right, y + 1, color, stop.label);
    ++ctx.itemsDrawn;
    float textEnd = pole + 10 + ImGui::CalcTextSize(stop.label.c_str()).x;
    if (!ctx.hover && ctx.mouseIn(pole - 1, y, std::min(textEnd, right), y + height())) {
        double t = rank().align.toAligned(stop.time);
        ctx.hover =
            Hover{{}, {fmt::format("rank {} {}", rank().rank, stop.label), stop.state}, t, t};
    }
}

class CollectiveTrack : public Track {
  public:
    explicit CollectiveTrack(RankRef rank) : m_ref(rank) {}
    float height() const override { return 12; }
    void draw(DrawContext& ctx, float y) override;

  private:
    RankRef m_ref;
    const RankTimeline& rank() const { return *m_ref; }
};

// Completed collectives teal; failed red; pending when the recording ended
// (a hang, a kill) near black, its end marked; unwaited grey.
ImU32 stateColour(CollectiveState state) {
    switch (state) {
        case CollectiveState::Completed:
            return IM_COL32(0, 137, 123, 255);
        case CollectiveState::Failed:
            return IM_COL32(198, 40, 40, 255);
        case CollectiveState::Pending:
            return IM_COL32(33, 33, 33, 255);
        case CollectiveState::Unwaited:
        case CollectiveState::End:
            break;
    }
    return IM_COL32(144, 164, 174, 255);
}

void CollectiveTrack::draw(DrawContext& ctx, float y) {
    ImDrawList* dl = ctx.draw;
    dl->AddText(ImVec2(ctx.gutter - 78, y - 2), kMuted, "collectives");
    Projection p = ctx.projection(rank());
    int64_t t0 = p.toRaw(0), t1 = saturatingAdd(p.toRaw(ctx.view->width()), 1);
    auto it = std::lower_bound(rank().collectives.begin(), rank().collectives.end(),
                               saturatingSub(t0, rank().maxCollectiveDuration),
                               [](const CollectiveSpan& c, int64_t v) { return c.start < v; });
    float lastX = -1e9f;
    for (; it != rank().collectives.end() && it->start < t1; ++it) {
        if (it->end < t0) continue;
        float x0 = ctx.left + float(p.toPx(it->start)), x1 = ctx.left + float(p.toPx(it->end));
        x1 = std::max(x1, x0 + 1);
        if (x1 < lastX + 2) continue;  // within the previous one's pixels
        lastX = x1;
        bool selected = ctx.selection == TimelineSelection{TimelineSelection::Kind::Collective,
                                                           rank().rank, it->seq};
        ctx.opaqueRect(ImVec2(x0, y + 1), ImVec2(x1, y + height() - 1), stateColour(it->state));
        if (it->state == CollectiveState::Pending)  // open at its end: the wait goes on
            dl->AddLine(ImVec2(x1, y), ImVec2(x1, y + height()), IM_COL32(198, 40, 40, 255), 2.0f);
        if (selected) dl->AddRect(ImVec2(x0, y), ImVec2(x1, y + height()), kSelected, 0, 0, 2.0f);
        ++ctx.itemsDrawn;
        if (!ctx.hover && ctx.mouseIn(x0 - 1, y, x1 + 1, y + height()))
            ctx.hover = Hover{{TimelineSelection::Kind::Collective, rank().rank, it->seq},
                              {fmt::format("{} on rank {}", rank().string(it->kind), rank().rank),
                               fmt::format("{}, {} {}", formatBytes(it->bytes), toString(it->state),
                                           formatDuration(double(it->end - it->start))),
                               fmt::format("step {}", it->step)},
                              rank().align.toAligned(it->start),
                              rank().align.toAligned(it->end)};
    }
}

class OpLaneTrack : public Track {
  public:
    OpLaneTrack(RankRef rank, size_t lane) : m_ref(rank), m_lane(lane) {}
    float height() const override { return kLaneHeight; }
    void draw(DrawContext& ctx, float y) override;

  private:
    struct Piece {
        float x0, x1;  // pixels
        ImU32 color;
    };
    // Where an item goes and its colour (notes the hover); draws nothing.
    Piece place(DrawContext& ctx, const Lane& lane, const DrawItem& item, float y);
    // Outline of a promoted or selected op, and its name where it fits.
    void drawOverlay(DrawContext& ctx, const Span& span, const Piece& piece, float y);
    RankRef m_ref;
    const RankTimeline& rank() const { return *m_ref; }
    size_t m_lane;
};

void OpLaneTrack::draw(DrawContext& ctx, float y) {
    const Lane& lane = rank().lanes[m_lane];
    if (lane.depth == 0) {
        std::string label = rank().threadName(lane.thread);
        clippedText(ctx.draw, 16, ctx.gutter - 4, y + 1, kMuted, label);
    }
    visibleItems(lane, ctx.projection(rank()), ctx.view->width(), kMinSpanPx, ctx.scratch);
    // Neighbouring items of one colour that touch are drawn as one bar: the
    // same pixels, but a dense lane costs a few rectangles instead of one
    // per 3 px (software GL pays per primitive). Outlines and labels go on
    // top afterwards.
    Piece run{0, -1, 0};
    auto flush = [&] {
        if (run.x1 >= run.x0)
            ctx.opaqueRect(ImVec2(run.x0, y + 1), ImVec2(run.x1, y + kLaneHeight - 1), run.color);
        run.x1 = -1;
    };
    std::vector<std::pair<const DrawItem*, Piece>> overlays;
    for (const DrawItem& item : ctx.scratch) {
        Piece piece = place(ctx, lane, item, y);
        if (run.x1 >= run.x0 && piece.color == run.color && piece.x0 <= run.x1 + 1) {
            run.x1 = std::max(run.x1, piece.x1);
        } else {
            flush();
            run = piece;
        }
        if (item.count != 1) continue;  // a fold is drawn from its summary: no span is read
        const Span& span = lane.spans[item.first];
        bool selected = ctx.selection ==
                        TimelineSelection{TimelineSelection::Kind::Op, rank().rank, span.seq()};
        if (span.reconciles() || selected || piece.x1 - piece.x0 >= 14)
            overlays.emplace_back(&item, piece);
    }
    flush();
    for (const auto& [item, piece] : overlays)
        drawOverlay(ctx, lane.spans[item->first], piece, y);
}

OpLaneTrack::Piece OpLaneTrack::place(DrawContext& ctx, const Lane& lane, const DrawItem& item,
                                      float y) {
    Projection p = ctx.projection(rank());
    float x0 = ctx.left + float(p.toPx(item.start)), x1 = ctx.left + float(p.toPx(item.end));
    x0 = std::max(x0, ctx.left - 2);
    x1 = std::min(std::max(x1, x0 + 1), ctx.left + float(ctx.view->width()) + 2);
    ++ctx.itemsDrawn;
    bool hovered = !ctx.hover && ctx.mouseIn(x0, y, x1 + 1, y + kLaneHeight);
    if (item.count > 1) {  // folded: a grey bar with the count
        if (hovered)
            ctx.hover = Hover{{},
                              {fmt::format("{} ops folded (zoom in to see them)", item.count),
                               formatDuration(double(item.end) - double(item.start))},
                              rank().align.toAligned(item.start),
                              rank().align.toAligned(item.end)};
        return {x0, x1, IM_COL32(158, 158, 158, 255)};
    }
    const Span& first = lane.spans[item.first];
    if (hovered) {
        std::vector<std::string> lines = {
            rank().string(first.name()),
            fmt::format("{} on rank {}, {}",
                        formatDuration(double(first.end()) - double(first.start)), rank().rank,
                        rank().threadName(lane.thread)),
            fmt::format("{} phase, op #{}", toString(first.phase()), first.seq())};
        if (first.reconciles())
            lines.push_back("promoted op: it reconciled a mixed-tensor incident");
        ctx.hover = Hover{{TimelineSelection::Kind::Op, rank().rank, first.seq()},
                          lines,
                          rank().align.toAligned(first.start),
                          rank().align.toAligned(first.end())};
    }
    return {x0, x1, phaseColor(first.phase())};
}

void OpLaneTrack::drawOverlay(DrawContext& ctx, const Span& span, const Piece& piece, float y) {
    ImDrawList* dl = ctx.draw;
    float x0 = piece.x0, x1 = piece.x1;
    if (span.reconciles())
        dl->AddRect(ImVec2(x0, y + 1), ImVec2(x1, y + kLaneHeight - 1),
                    markColor(IncidentState::Promoted), 0, 0, 2.0f);
    if (ctx.selection == TimelineSelection{TimelineSelection::Kind::Op, rank().rank, span.seq()})
        dl->AddRect(ImVec2(x0, y), ImVec2(x1, y + kLaneHeight), kSelected, 0, 0, 2.5f);
    clippedText(dl, x0 + 2, x1 - 1, y + 1, IM_COL32(255, 255, 255, 255),
                shortOpName(rank().string(span.name())));
}

}  // namespace

std::vector<std::unique_ptr<Track>> makeRankTracks(const TimelineData& data, int rank) {
    std::vector<std::unique_ptr<Track>> tracks;
    RankRef ref(data, rank);
    tracks.push_back(std::make_unique<RankHeaderTrack>(ref));
    tracks.push_back(std::make_unique<IncidentTrack>(ref));
    if (!ref->collectives.empty()) tracks.push_back(std::make_unique<CollectiveTrack>(ref));
    for (size_t lane : ref->laneOrder())
        tracks.push_back(std::make_unique<OpLaneTrack>(ref, lane));
    return tracks;
}

namespace {

ImU32 rgbColor(uint32_t rgb) {
    return IM_COL32((rgb >> 16) & 0xff, (rgb >> 8) & 0xff, rgb & 0xff, 255);
}

}  // namespace

ImU32 markColor(IncidentState kind) {
    return rgbColor(incidentStateInfo(kind).rgb);
}

ImU32 kindColor(IncidentKind kind) {
    return rgbColor(incidentKindInfo(kind).rgb);
}

ImU32 markColor(const IncidentMark& mark) {
    return mark.kind == IncidentKind::MixedTensor ? markColor(markKind(mark))
                                                  : kindColor(mark.kind);
}

ImU32 phaseColor(Phase phase) {
    switch (phase) {
        case Phase::Forward:
            return IM_COL32(30, 136, 229, 255);
        case Phase::Backward:
            return IM_COL32(245, 124, 0, 255);
        case Phase::Optimizer:
            return IM_COL32(126, 87, 194, 255);
        case Phase::Data:
            return IM_COL32(0, 150, 136, 255);
        case Phase::Other:
        case Phase::End:
            break;
    }
    return IM_COL32(120, 144, 156, 255);
}

namespace {

// The unit a time of `ns` reads best in: ns below 1 us, then us, ms, s.
std::pair<double, const char*> timeUnit(double ns) {
    double a = std::fabs(ns);
    return a < 1e3   ? std::pair{1.0, "ns"}
           : a < 1e6 ? std::pair{1e3, "us"}
           : a < 1e9 ? std::pair{1e6, "ms"}
                     : std::pair{1e9, "s"};
}

}  // namespace

std::string formatDuration(double ns) {
    auto [unit, name] = timeUnit(ns);
    int digits = unit == 1.0 ? 0 : unit == 1e9 ? 3 : 2;
    return fmt::format("{:.{}f} {}", ns / unit, digits, name);
}

std::string formatTick(double ns, double resolution) {
    // The origin reads "0 ms" on a ms axis.
    auto [unit, name] = timeUnit(std::max(std::fabs(ns), resolution));
    double digits = std::ceil(-std::log10(std::max(resolution, 1.0) / unit) - 1e-9);
    return fmt::format("{:.{}f} {}", ns / unit, std::clamp(int(digits), 0, 9), name);
}

std::string formatBytes(int64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", double(bytes) / 1024);
    if (bytes < int64_t(1) << 30) return fmt::format("{:.1f} MiB", double(bytes) / (1 << 20));
    return fmt::format("{:.2f} GiB", double(bytes) / double(int64_t(1) << 30));
}

}  // namespace meshscope::ui
