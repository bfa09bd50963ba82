#include "ui/timeline/timeline_canvas.h"

#include <fmt/format.h>
#include <imgui.h>

#include <QImage>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace meshscope::ui {

namespace {

constexpr float kGutter = 130;  // label column
constexpr float kMinimap = 44;  // overview strip at the top
constexpr float kRuler = 20;    // time axis below it
constexpr float kRankGap = 6;   // space between ranks
constexpr double kZoomStep = 1.25;

// A "nice" tick spacing (1, 2 or 5 x 10^k ns) near `rough`.
double niceStep(double rough) {
    double p = std::pow(10.0, std::floor(std::log10(std::max(rough, 1.0))));
    for (double m : {1.0, 2.0, 5.0})
        if (m * p >= rough) return m * p;
    return 10 * p;
}

}  // namespace

TimelineCanvas::TimelineCanvas(QWidget* parent) : ImGuiCanvas(parent) {
    setMinimumSize(400, 200);
}

TimelineCanvas::~TimelineCanvas() {
    if (m_minimapTexture && context()) {
        makeCurrent();
        context()->functions()->glDeleteTextures(1, &m_minimapTexture);
        doneCurrent();
    }
}

void TimelineCanvas::initializeGL() {
    ImGuiCanvas::initializeGL();
    m_minimapTexture = 0;  // a new GL context: the old texture is gone with the old one
}

void TimelineCanvas::setData(std::shared_ptr<TimelineData> data) {
    m_data = std::move(data);
    m_selection = {};
    m_cursor.reset();
    m_hover.reset();
    m_scrollY = 0;
    relayout();
    fitFromFirstStep();
}

void TimelineCanvas::dataChanged() {
    relayout();
    if (m_follow && m_data) {
        auto [lo, hi] = m_data->alignedRange();
        double range = m_followRange > 0 ? m_followRange : kFollowWindowNs;
        if (m_followRange == 0 && hi - lo <= kFollowWindowNs)
            fitAll();
        else
            m_view.setRange(hi - range * 0.95, hi + range * 0.05);
    }
    update();
}

void TimelineCanvas::relayout() {
    m_tracks.clear();
    m_rankEnds.clear();
    m_incidentY.clear();
    m_rankTop.clear();
    m_laneY.clear();
    m_densityBins = 0;  // the overview is repainted on the next frame
    m_contentHeight = 0;
    m_laneCount = 0;
    if (!m_data) return;
    for (const RankTimeline& r : m_data->ranks) {
        auto tracks = makeRankTracks(*m_data, r.rank);
        m_rankTop[r.rank] = m_contentHeight;
        // makeRankTracks order: header, incidents, [collectives], lanes in laneOrder().
        m_incidentY[r.rank] = m_contentHeight + tracks[0]->height();
        float laneY = m_contentHeight;
        for (size_t i = 0; i + r.lanes.size() < tracks.size(); ++i)
            laneY += tracks[i]->height();
        for (size_t lane : r.laneOrder()) {
            m_laneY[{r.rank, lane}] = laneY;
            laneY += tracks[tracks.size() - r.lanes.size()]->height();
        }
        for (auto& t : tracks) {
            m_contentHeight += t->height();
            m_tracks.push_back(std::move(t));
        }
        m_rankEnds.insert(m_tracks.size() - 1);
        m_contentHeight += kRankGap;
        m_laneCount += r.lanes.size();
    }
}

void TimelineCanvas::fitAll() {
    if (!m_data) return;
    auto [lo, hi] = m_data->alignedRange();
    zoomToRange(lo, hi);
}

void TimelineCanvas::fitFromFirstStep() {
    if (!m_data) return;
    auto [lo, hi] = m_data->alignedRange();
    // the earliest start of a rank's first recorded step
    std::optional<double> first;
    for (const RankTimeline& r : m_data->ranks) {
        if (r.steps.empty()) continue;
        int64_t start = stepStart(r, r.steps.front().step);
        double a = r.align.toAligned(start);
        first = first ? std::min(*first, a) : a;
    }
    if (first && *first > lo && *first < hi)
        zoomToRange(*first, hi);
    else
        zoomToRange(lo, hi);
}

void TimelineCanvas::showRank(int rank, int64_t firstStep, int64_t lastStep) {
    if (!m_data) return;
    const RankTimeline* r = nullptr;
    for (const RankTimeline& candidate : m_data->ranks)
        if (candidate.rank == rank) r = &candidate;
    if (!r || r->empty()) return;
    int64_t begin = r->firstNs, end = r->lastNs;
    if (firstStep >= 0) {
        // to the end of the last step's optimizer.step()
        begin = stepStart(*r, firstStep);
        for (const StepBand& b : r->steps)
            if (b.step == lastStep) end = b.end;
    }
    if (end > begin) zoomToRange(r->align.toAligned(begin), r->align.toAligned(end));
    if (auto top = m_rankTop.find(rank); top != m_rankTop.end()) {
        m_scrollY = 0;
        scrollBy(top->second);
    }
    update();
}

std::optional<float> TimelineCanvas::rankTop(int rank) const {
    auto it = m_rankTop.find(rank);
    if (it == m_rankTop.end()) return std::nullopt;
    return it->second;
}

void TimelineCanvas::zoomToRange(double start, double end) {
    double margin = std::max((end - start) * 0.02, 50.0);
    m_view.setRange(start - margin, end + margin);
    emit viewChanged();
    update();
}

void TimelineCanvas::setSelection(const TimelineSelection& selection, bool centre) {
    m_selection = selection;
    if (centre) {
        if (auto t = timeOf(selection); t && (*t < m_view.start() || *t > m_view.end())) {
            m_view.centreOn(*t);
            userMovedView();
        }
        // And scroll its rank into view.
        if (auto p = positionOf(selection); p && (p->y() < kMinimap + kRuler || p->y() > height()))
            scrollBy(float(p->y() - (kMinimap + kRuler) - 40));
    }
    update();
}

void TimelineCanvas::setReplayCursor(std::optional<double> aligned) {
    m_cursor = aligned;
    if (aligned && (*aligned < m_view.start() || *aligned > m_view.end())) {
        m_view.centreOn(*aligned);
        emit viewChanged();
    }
    update();
}

void TimelineCanvas::setFollowLive(bool follow) {
    if (m_follow == follow) return;
    m_follow = follow;
    m_followRange = 0;
    if (follow && m_data) {
        auto [lo, hi] = m_data->alignedRange();
        if (m_view.range() < hi - lo) m_followRange = m_view.range();
    }
    emit followLiveChanged(follow);
    if (follow) dataChanged();
}

std::optional<double> TimelineCanvas::timeOf(const TimelineSelection& item) const {
    if (!m_data) return std::nullopt;
    const RankTimeline* rank = nullptr;
    for (const RankTimeline& r : m_data->ranks)
        if (r.rank == item.rank) rank = &r;
    if (!rank) return std::nullopt;
    switch (item.kind) {
        case TimelineSelection::Kind::Incident:
            for (const IncidentMark& m : rank->incidents)
                if (m.seq == item.seq) return rank->align.toAligned(m.time);
            break;
        case TimelineSelection::Kind::Collective:
            for (const CollectiveSpan& c : rank->collectives)
                if (c.seq == item.seq) return rank->align.toAligned(c.start);
            break;
        case TimelineSelection::Kind::Op:
            for (const Lane& lane : rank->lanes) {
                // Spans of a lane are in seq order as well as start order.
                auto it = std::lower_bound(lane.spans.begin(), lane.spans.end(), item.seq,
                                           [](const Span& s, int64_t v) { return s.seq() < v; });
                if (it != lane.spans.end() && it->seq() == item.seq)
                    return rank->align.toAligned(it->start);
            }
            break;
        case TimelineSelection::Kind::None:
            break;
    }
    return std::nullopt;
}

std::optional<QPointF> TimelineCanvas::positionOf(const TimelineSelection& item) const {
    auto t = timeOf(item);
    if (!t || !m_data) return std::nullopt;
    float top = kMinimap + kRuler - m_scrollY;
    double x = kGutter + m_view.toPx(*t) + 1;
    if (item.kind == TimelineSelection::Kind::Incident) {
        auto it = m_incidentY.find(item.rank);
        if (it == m_incidentY.end()) return std::nullopt;
        return QPointF(x, top + it->second + 8);
    }
    if (item.kind != TimelineSelection::Kind::Op) return std::nullopt;
    for (const RankTimeline& r : m_data->ranks) {
        if (r.rank != item.rank) continue;
        for (size_t i = 0; i < r.lanes.size(); ++i) {
            const auto& spans = r.lanes[i].spans;
            auto s = std::lower_bound(spans.begin(), spans.end(), item.seq,
                                      [](const Span& a, int64_t v) { return a.seq() < v; });
            if (s != spans.end() && s->seq() == item.seq)
                return QPointF(x, top + m_laneY.at({r.rank, i}) + 8);
        }
    }
    return std::nullopt;
}

int64_t TimelineCanvas::spansInView() const {
    if (!m_data) return 0;
    int64_t n = 0;
    for (const RankTimeline& r : m_data->ranks) {
        int64_t t0 = r.align.toRaw(m_view.start()), t1 = r.align.toRaw(m_view.end());
        for (const Lane& lane : r.lanes) {
            size_t lo = lane.spans.firstEndingAt(t0);
            n += int64_t(lane.spans.firstStartingAt(lo, t1) - lo);
        }
    }
    return n;
}

void TimelineCanvas::resizeGL(int w, int h) {
    ImGuiCanvas::resizeGL(w, h);
    m_view.setWidth(std::max(double(w) - kGutter, 1.0));
    scrollBy(0);
}

void TimelineCanvas::drawFrame() {
    ImGuiIO& io = ImGui::GetIO();
    m_view.setWidth(std::max(double(io.DisplaySize.x) - kGutter, 1.0));
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(io.DisplaySize);
    ImGui::Begin("##timeline", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                     ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBackground |
                     ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollWithMouse);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    float width = io.DisplaySize.x, height = io.DisplaySize.y;
    if (!m_data || m_data->ranks.empty()) {
        dl->AddText(ImVec2(20, 20), IM_COL32(90, 90, 90, 255),
                    "No run open. File > Open run... or drop a run directory here.");
        ImGui::End();
        return;
    }
    DrawContext ctx;
    ctx.draw = dl;
    ctx.view = &m_view;
    ctx.left = kGutter;
    ctx.gutter = kGutter;
    ctx.mouse = io.MousePos;
    ctx.selection = m_selection;
    ctx.cursor = m_cursor;
    drawMinimap(dl, width);
    drawRuler(dl, kMinimap, width);
    drawTracks(ctx, kMinimap + kRuler, height);
    drawCursor(dl, kMinimap + kRuler, height);
    m_itemsDrawn = ctx.itemsDrawn;
    m_hover = std::move(ctx.hover);
    ImGui::End();
    showTooltip();
}

void TimelineCanvas::drawTracks(DrawContext& ctx, float top, float bottom) {
    ImDrawList* dl = ctx.draw;
    dl->PushClipRect(ImVec2(0, top), ImVec2(ctx.left + float(m_view.width()), bottom));
    dl->ChannelsSplit(2);  // 0: opaque bars, drawn first; 1: the rest
    dl->ChannelsSetCurrent(0);
    beginOpaqueLayer(dl);
    dl->ChannelsSetCurrent(1);
    ctx.layered = true;
    float y = top - m_scrollY;
    for (size_t i = 0; i < m_tracks.size(); ++i) {
        Track& t = *m_tracks[i];
        if (y + t.height() >= top && y <= bottom) t.draw(ctx, y);
        y += t.height();
        if (m_rankEnds.count(i)) y += kRankGap;
    }
    ctx.layered = false;
    dl->ChannelsSetCurrent(0);
    endOpaqueLayer(dl);
    dl->ChannelsMerge();
    // Gutter separator.
    dl->AddLine(ImVec2(kGutter - 1, top), ImVec2(kGutter - 1, bottom),
                IM_COL32(200, 200, 200, 255));
    dl->PopClipRect();
}

// The overview strip: op density per rank, incident ticks. It changes only
// with the data, so it is painted once into an image and uploaded as one
// texture; a frame then costs one quad for it instead of thousands.
void TimelineCanvas::rebuildMinimap(int bins, double lo, double hi) {
    QImage image(bins, int(kMinimap), QImage::Format_RGBA8888);
    image.fill(QColor(245, 245, 245));
    std::vector<std::vector<uint32_t>> rows;
    for (const RankTimeline& r : m_data->ranks)
        rows.push_back(density(r, lo, hi, bins));
    float rowH = (kMinimap - 6) / float(std::max<size_t>(rows.size(), 1));
    const QRgb bar = qRgb(96, 125, 139);
    for (size_t r = 0; r < rows.size(); ++r) {
        uint32_t peak = std::max<uint32_t>(1, *std::max_element(rows[r].begin(), rows[r].end()));
        int y1 = int(3 + rowH * float(r + 1));
        for (int b = 0; b < bins; ++b) {
            uint32_t n = rows[r][size_t(b)];
            if (n == 0) continue;
            int h = int(std::round(std::max(1.0f, (rowH - 1) * float(n) / float(peak))));
            for (int y = std::max(0, y1 - h); y < y1; ++y)
                image.setPixel(b, y, bar);
        }
    }
    for (const RankTimeline& r : m_data->ranks)
        for (const IncidentMark& m : r.incidents) {
            int x =
                std::clamp(int((r.align.toAligned(m.time) - lo) / (hi - lo) * bins), 0, bins - 1);
            ImU32 c = markColor(m);
            for (int y = int(kMinimap) - 8; y < int(kMinimap) - 1; ++y)
                image.setPixel(x, y, qRgb(c & 0xff, (c >> 8) & 0xff, (c >> 16) & 0xff));
        }
    QOpenGLFunctions* gl = context()->functions();
    if (!m_minimapTexture) gl->glGenTextures(1, &m_minimapTexture);
    gl->glBindTexture(GL_TEXTURE_2D, m_minimapTexture);
    gl->glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    gl->glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    gl->glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    gl->glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, bins, int(kMinimap), 0, GL_RGBA, GL_UNSIGNED_BYTE,
                     image.constBits());
    m_densityBins = bins;
    m_densityStart = lo;
    m_densityEnd = hi;
}

void TimelineCanvas::drawMinimap(ImDrawList* dl, float width) {
    auto [lo, hi] = m_data->alignedRange();
    if (hi <= lo) hi = lo + 1;
    int bins = std::max(1, int(width - kGutter));
    if (!m_minimapTexture || bins != m_densityBins || lo != m_densityStart || hi != m_densityEnd)
        rebuildMinimap(bins, lo, hi);
    dl->AddRectFilled(ImVec2(0, 0), ImVec2(width, kMinimap), IM_COL32(245, 245, 245, 255));
    dl->AddText(ImVec2(6, 4), IM_COL32(90, 90, 90, 255), "overview");
    dl->AddImage(ImTextureID(intptr_t(m_minimapTexture)), ImVec2(kGutter, 0),
                 ImVec2(kGutter + float(bins), kMinimap));
    double scale = double(bins) / (hi - lo);
    float v0 = kGutter + float((m_view.start() - lo) * scale);
    float v1 = kGutter + float((m_view.end() - lo) * scale);
    v0 = std::clamp(v0, kGutter, width);
    v1 = std::clamp(std::max(v1, v0 + 2), kGutter, width);
    dl->AddRectFilled(ImVec2(v0, 1), ImVec2(v1, kMinimap - 1), IM_COL32(33, 150, 243, 40));
    dl->AddRect(ImVec2(v0, 1), ImVec2(v1, kMinimap - 1), IM_COL32(33, 150, 243, 255));
}

void TimelineCanvas::drawRuler(ImDrawList* dl, float y, float width) {
    dl->AddRectFilled(ImVec2(0, y), ImVec2(width, y + kRuler), IM_COL32(250, 250, 250, 255));
    dl->AddLine(ImVec2(0, y + kRuler - 1), ImVec2(width, y + kRuler - 1),
                IM_COL32(200, 200, 200, 255));
    double origin = m_data->alignedRange().first;
    double step = niceStep(m_view.range() / std::max(1.0, m_view.width() / 110));
    double first = std::ceil((m_view.start() - origin) / step) * step + origin;
    std::string align = m_data->alignMode == AlignMode::Step ? "by step" : "wall clock";
    dl->AddText(ImVec2(6, y + 3), IM_COL32(90, 90, 90, 255), align.c_str());
    for (double t = first; t <= m_view.end(); t += step) {
        float x = kGutter + float(m_view.toPx(t));
        dl->AddLine(ImVec2(x, y + kRuler - 6), ImVec2(x, y + kRuler - 1),
                    IM_COL32(120, 120, 120, 255));
        std::string label = "+" + formatTick(t - origin, step);
        dl->AddText(ImVec2(x + 2, y + 2), IM_COL32(60, 60, 60, 255), label.c_str());
    }
}

void TimelineCanvas::drawCursor(ImDrawList* dl, float top, float bottom) {
    if (!m_cursor) return;
    float x = kGutter + float(m_view.toPx(*m_cursor));
    if (x < kGutter || x > kGutter + float(m_view.width())) return;
    dl->AddLine(ImVec2(x, top), ImVec2(x, bottom), IM_COL32(255, 111, 0, 255), 2.0f);
    dl->AddTriangleFilled(ImVec2(x - 6, top), ImVec2(x + 6, top), ImVec2(x, top + 8),
                          IM_COL32(255, 111, 0, 255));
}

void TimelineCanvas::showTooltip() {
    if (!m_hover || m_dragged) return;
    ImGui::BeginTooltip();
    for (const std::string& line : m_hover->lines)
        ImGui::TextUnformatted(line.c_str());
    ImGui::EndTooltip();
}

void TimelineCanvas::userMovedView() {
    if (m_follow) {
        m_follow = false;
        emit followLiveChanged(false);
    }
    emit viewChanged();
}

void TimelineCanvas::scrollBy(float dy) {
    float visible = float(height()) - kMinimap - kRuler;
    m_scrollY = std::clamp(m_scrollY + dy, 0.0f, std::max(0.0f, m_contentHeight - visible));
}

bool TimelineCanvas::inMinimap(QPointF pos) const {
    return pos.y() < kMinimap && pos.x() >= kGutter;
}

void TimelineCanvas::centreFromMinimap(double x) {
    if (!m_data) return;
    auto [lo, hi] = m_data->alignedRange();
    double t = lo + (x - kGutter) / std::max(1.0, m_view.width()) * (hi - lo);
    m_view.centreOn(t);
    userMovedView();
}

void TimelineCanvas::mousePressEvent(QMouseEvent* event) {
    ImGuiCanvas::mousePressEvent(event);
    if (event->button() != Qt::LeftButton) return;
    m_pressAt = m_lastDrag = event->position();
    m_dragged = false;
    m_minimapDrag = inMinimap(event->position());
    if (m_minimapDrag) centreFromMinimap(event->position().x());
}

void TimelineCanvas::mouseMoveEvent(QMouseEvent* event) {
    ImGuiCanvas::mouseMoveEvent(event);
    if (!m_pressAt || !(event->buttons() & Qt::LeftButton)) return;
    QPointF d = event->position() - *m_lastDrag;
    m_lastDrag = event->position();
    if ((event->position() - *m_pressAt).manhattanLength() > 3) m_dragged = true;
    if (m_minimapDrag) {
        centreFromMinimap(event->position().x());
    } else if (m_dragged) {
        m_view.panPx(d.x());
        scrollBy(-float(d.y()));
        userMovedView();
    }
}

void TimelineCanvas::mouseReleaseEvent(QMouseEvent* event) {
    ImGuiCanvas::mouseReleaseEvent(event);
    if (event->button() != Qt::LeftButton || !m_pressAt) return;
    bool click = !m_dragged && !m_minimapDrag;
    m_pressAt.reset();
    m_dragged = m_minimapDrag = false;
    if (!click) return;
    TimelineSelection hit = m_hover ? m_hover->item : TimelineSelection{};
    if (hit.kind == TimelineSelection::Kind::None) return;
    m_selection = hit;
    emit selectionChanged(hit);
    update();
}

void TimelineCanvas::mouseDoubleClickEvent(QMouseEvent* event) {
    if (!m_hover || m_hover->zoomEnd <= m_hover->zoomStart) return;
    zoomToRange(m_hover->zoomStart, m_hover->zoomEnd);
    userMovedView();
    event->accept();
}

void TimelineCanvas::wheelEvent(QWheelEvent* event) {
    ImGuiCanvas::wheelEvent(event);
    double steps = event->angleDelta().y() / 120.0;
    double horizontal = event->angleDelta().x() / 120.0;
    if (event->modifiers() & Qt::ShiftModifier) {
        m_view.panPx(steps * m_view.width() * 0.1);
    } else if (event->modifiers() & Qt::ControlModifier) {
        scrollBy(float(-steps * 60));
    } else {
        double x = event->position().x() - kGutter;
        m_view.zoomAt(std::clamp(x, 0.0, m_view.width()), std::pow(kZoomStep, steps));
        if (horizontal != 0) m_view.panPx(horizontal * m_view.width() * 0.1);
    }
    userMovedView();
    event->accept();
}

void TimelineCanvas::keyPressEvent(QKeyEvent* event) {
    ImGuiCanvas::keyPressEvent(event);
    double w = m_view.width();
    switch (event->key()) {
        case Qt::Key_Left:
        case Qt::Key_A:
            m_view.panPx(w * 0.1);
            break;
        case Qt::Key_Right:
        case Qt::Key_D:
            m_view.panPx(-w * 0.1);
            break;
        case Qt::Key_Plus:
        case Qt::Key_Equal:
        case Qt::Key_W:
            m_view.zoomAt(w / 2, kZoomStep);
            break;
        case Qt::Key_Minus:
        case Qt::Key_S:
            m_view.zoomAt(w / 2, 1 / kZoomStep);
            break;
        case Qt::Key_Up:
            scrollBy(-40);
            break;
        case Qt::Key_Down:
            scrollBy(40);
            break;
        case Qt::Key_Home:
        case Qt::Key_0:
            fitAll();
            break;
        case Qt::Key_Escape:
            m_selection = {};
            emit selectionChanged(m_selection);
            update();
            return;
        default:
            return;
    }
    userMovedView();
    update();
}

}  // namespace meshscope::ui
