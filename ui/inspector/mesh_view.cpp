#include "ui/inspector/mesh_view.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>

#include "core/report/html_writer.h"
#include "ui/inspector/op_detail.h"

namespace meshscope::ui {

namespace {

constexpr int kPad = 8;

QString qs(const std::string& s) {
    return QString::fromStdString(s);
}

std::vector<int64_t> meshShapeOf(const MeshPicture& pic) {
    if (pic.mesh && !pic.mesh->shape.empty()) return pic.mesh->shape;
    return {};
}

// Row-major coordinate of cell `c` on a mesh of `shape`.
std::vector<int64_t> coordinateOf(size_t c, const std::vector<int64_t>& shape) {
    std::vector<int64_t> coord(shape.size());
    int64_t rest = int64_t(c);
    for (size_t k = shape.size(); k-- > 0;) {
        int64_t n = std::max<int64_t>(shape[k], 1);
        coord[k] = rest % n;
        rest /= n;
    }
    return coord;
}

}  // namespace

MeshView::MeshView(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Minimum);
}

void MeshView::setIncident(const IncidentDetail& d) {
    m_picture = {};
    m_picture.mesh = d.mesh;
    m_picture.rank = d.rank;
    for (const OperandDetail& o : d.operands) {
        if (o.plain && !m_picture.plain)
            m_picture.plain = o;
        else if (!o.plain && !o.scalar && !o.placements.empty())
            m_picture.dtensors.push_back(o);
    }
    m_picture.promotedPlacements = d.promotedPlacements;
    m_picture.reconciled = d.outcome == Outcome::Reconciled;
    m_picture.action =
        d.outcome == Outcome::Reconciled ? std::string(toString(d.action)) : "raised";
    m_empty = false;
    setMinimumSize(sizeHint());  // larger than the dock: the scroll area scrolls
    updateGeometry();
    update();
}

void MeshView::setOp(const OpDetail& op) {
    m_picture = {};
    m_picture.mesh = op.mesh;
    m_picture.rank = op.rank;
    for (const OperandDetail& o : op.operands)
        if (!o.scalar && !o.placements.empty()) m_picture.dtensors.push_back(o);
    m_empty = false;
    setMinimumSize(sizeHint());  // larger than the dock: the scroll area scrolls
    updateGeometry();
    update();
}

void MeshView::clear() {
    m_picture = {};
    m_empty = true;
    setMinimumSize(sizeHint());  // larger than the dock: the scroll area scrolls
    updateGeometry();
    update();
}

size_t MeshView::cellCount() const {
    size_t n = 1;
    for (int64_t s : meshShapeOf(m_picture))
        n *= size_t(std::max<int64_t>(s, 1));
    return m_picture.mesh ? n : 0;
}

std::vector<std::string> MeshView::cellLines(size_t cell) const {
    std::vector<std::string> lines;
    const auto shape = meshShapeOf(m_picture);
    const auto& ranks = m_picture.mesh->ranks;
    int64_t rank = cell < ranks.size() ? ranks[cell] : int64_t(cell);
    lines.push_back("rank " + std::to_string(rank) + (rank == m_picture.rank ? " (here)" : ""));
    auto coord = coordinateOf(cell, shape);
    for (const OperandDetail& o : m_picture.dtensors)
        lines.push_back((o.output ? "out" : "op") + std::to_string(o.index) + " " +
                        describeLocalPiece(o.shape, o.placements, shape, coord));
    if (m_picture.plain && !m_picture.promotedPlacements.empty())
        lines.push_back(
            "op" + std::to_string(m_picture.plain->index) + " " +
            describeLocalPiece(m_picture.plain->shape, m_picture.promotedPlacements, shape, coord));
    return lines;
}

QSize MeshView::cellSize() const {
    QFontMetrics fm(font());
    int w = fm.horizontalAdvance("rank 00 (here)");
    size_t lines = 1;
    for (size_t c = 0; c < cellCount(); ++c) {
        auto text = cellLines(c);
        lines = std::max(lines, text.size());
        for (const std::string& s : text)
            w = std::max(w, fm.horizontalAdvance(qs(s)));
    }
    return {w + 2 * kPad, int(lines) * fm.lineSpacing() + 2 * kPad};
}

int MeshView::plainWidth() const {
    if (!m_picture.plain) return 0;
    QFontMetrics fm(font());
    const OperandDetail& p = *m_picture.plain;
    int w = std::max({fm.horizontalAdvance("plain torch.Tensor"),
                      fm.horizontalAdvance(qs(p.dtype + " " + p.shape)),
                      fm.horizontalAdvance(qs(p.label))});
    return std::min(w, 260) + 2 * kPad + 4;
}

int MeshView::arrowWidth() const {
    QFontMetrics fm(font());
    int label = std::max(fm.horizontalAdvance(qs(m_picture.action)),
                         fm.horizontalAdvance(qs(m_picture.promotedPlacements)));
    return std::clamp(label + 24, 80, 240);
}

QSize MeshView::sizeHint() const {
    QFontMetrics fm(font());
    if (m_empty || !m_picture.mesh) return {300, 3 * fm.lineSpacing()};
    auto shape = meshShapeOf(m_picture);
    int cols = shape.empty() ? 1 : int(std::max<int64_t>(shape.back(), 1));
    int rows = int(cellCount()) / std::max(cols, 1);
    QSize cell = cellSize();
    int left = m_picture.plain ? plainWidth() + arrowWidth() : 0;
    int gridH = rows * (cell.height() + kPad);
    int plainH = m_picture.plain ? 5 * fm.lineSpacing() : 0;
    return {left + cols * (cell.width() + kPad) + kPad,
            fm.lineSpacing() * 2 + std::max(gridH, plainH) + kPad};
}

QSize MeshView::minimumSizeHint() const {
    QFontMetrics fm(font());
    return {200, 3 * fm.lineSpacing()};
}

void MeshView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    QFontMetrics fm(font());
    const QColor text = palette().color(QPalette::WindowText);
    if (m_empty) return;
    if (!m_picture.mesh) {
        p.setPen(text);
        p.drawText(rect().adjusted(kPad, kPad, -kPad, -kPad), Qt::TextWordWrap,
                   "No device mesh recorded for this item (no DTensor operand).");
        return;
    }
    std::string title = "device mesh (";
    for (size_t k = 0; k < m_picture.mesh->shape.size(); ++k)
        title += (k ? ", " : "") +
                 (k < m_picture.mesh->dimNames.size() ? m_picture.mesh->dimNames[k]
                                                      : "dim" + std::to_string(k)) +
                 "=" + std::to_string(m_picture.mesh->shape[k]);
    title += ") on " + m_picture.mesh->deviceType;
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(kPad, fm.ascent() + 2, qs(title));
    int top = fm.lineSpacing() + 8;
    int gridX = kPad;
    if (m_picture.plain) {
        paintPlain(p, top);
        gridX = plainWidth() + arrowWidth();
        paintArrow(p, plainWidth() + 4, gridX - 6, top + 2 * fm.lineSpacing());
    }
    auto shape = meshShapeOf(m_picture);
    int cols = shape.empty() ? 1 : int(std::max<int64_t>(shape.back(), 1));
    QSize cell = cellSize();
    for (size_t c = 0; c < cellCount(); ++c) {
        int row = int(c) / cols, col = int(c) % cols;
        paintCell(p, c,
                  QRect(gridX + col * (cell.width() + kPad), top + row * (cell.height() + kPad),
                        cell.width(), cell.height()));
    }
}

void MeshView::paintPlain(QPainter& p, int top) {
    QFontMetrics fm(font());
    const OperandDetail& plain = *m_picture.plain;
    QRect box(2, top, plainWidth(), 4 * fm.lineSpacing() + kPad);
    p.setPen(QPen(QColor("#d32f2f"), 1.5, Qt::DashLine));
    p.setBrush(QColor("#fff6f6"));
    p.drawRoundedRect(box, 4, 4);
    p.setPen(QColor("#1a1a1a"));
    QStringList lines = {"plain torch.Tensor", qs(plain.dtype + " " + plain.shape), qs(plain.label),
                         QStringLiteral("operand %1").arg(plain.index)};
    int y = box.top() + kPad / 2 + fm.ascent();
    for (const QString& line : lines) {
        p.drawText(box.left() + kPad, y,
                   fm.elidedText(line, Qt::ElideRight, box.width() - 2 * kPad));
        y += fm.lineSpacing();
    }
}

void MeshView::paintArrow(QPainter& p, int x0, int x1, int y) {
    QColor color(m_picture.reconciled ? "#2e7d32" : "#d32f2f");
    p.setPen(QPen(color, 2));
    p.drawLine(x0, y, x1 - 8, y);
    QPainterPath head;
    head.moveTo(x1, y);
    head.lineTo(x1 - 9, y - 5);
    head.lineTo(x1 - 9, y + 5);
    head.closeSubpath();
    p.fillPath(head, color);
    QFontMetrics fm(font());
    QString label = qs(m_picture.action);
    p.drawText(QRect(x0, y - fm.lineSpacing() - 2, x1 - x0, fm.lineSpacing()), Qt::AlignCenter,
               fm.elidedText(label, Qt::ElideRight, x1 - x0));
    if (!m_picture.promotedPlacements.empty())
        p.drawText(QRect(x0, y + 4, x1 - x0, fm.lineSpacing()), Qt::AlignCenter,
                   fm.elidedText(qs(m_picture.promotedPlacements), Qt::ElideRight, x1 - x0));
}

void MeshView::paintCell(QPainter& p, size_t cell, QRect r) {
    QFontMetrics fm(font());
    auto lines = cellLines(cell);
    bool here = lines.front().find("(here)") != std::string::npos;
    p.setPen(QPen(QColor("#8a94a6"), here ? 2 : 1));
    p.setBrush(here ? QColor("#eef4ff") : QColor("#ffffff"));
    p.drawRoundedRect(r, 4, 4);
    int y = r.top() + kPad / 2 + fm.ascent();
    for (size_t i = 0; i < lines.size(); ++i) {
        bool promoted =
            m_picture.plain && !m_picture.promotedPlacements.empty() && i + 1 == lines.size();
        p.setPen(promoted ? QColor(m_picture.reconciled ? "#1b5e20" : "#a31515")
                          : QColor("#1a1a1a"));
        QFont f = font();
        f.setBold(i == 0);
        p.setFont(f);
        p.drawText(r.left() + kPad, y, qs(lines[i]));
        y += fm.lineSpacing();
    }
    p.setFont(font());
}

}  // namespace meshscope::ui
