#include "ui/inspector/mesh_view.h"

#include <QEvent>
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "ui/inspector/op_detail.h"

namespace meshscope::ui {

namespace {

QString qs(const std::string& s) {
    return QString::fromStdString(s);
}

QColor mix(const QColor& a, const QColor& b, double t) {
    return QColor::fromRgbF(float(a.redF() * (1 - t) + b.redF() * t),
                            float(a.greenF() * (1 - t) + b.greenF() * t),
                            float(a.blueF() * (1 - t) + b.blueF() * t));
}

// Green for a promotion, red for a raise: darker shades on light themes,
// lighter ones on dark themes, so both stay readable on the Base colour.
QColor goodColor(const QPalette& pal) {
    return pal.color(QPalette::Base).lightness() < 128 ? QColor(0x81, 0xc7, 0x84)
                                                       : QColor(0x2e, 0x7d, 0x32);
}
QColor badColor(const QPalette& pal) {
    return pal.color(QPalette::Base).lightness() < 128 ? QColor(0xef, 0x9a, 0x9a)
                                                       : QColor(0xc6, 0x28, 0x28);
}

// Width to reserve for `text`: elidedText() compares the fractional width,
// so an integer advance rounded down would elide the very line it measured.
int textWidth(const QFont& font, const QString& text) {
    return int(std::ceil(QFontMetricsF(font).horizontalAdvance(text))) + 1;
}

QFont bold(QFont f) {
    f.setBold(true);
    return f;
}

// `text` cut to what a painted line can show: eliding and measuring a
// string costs time in proportion to its length, which a damaged file
// chooses. Only the painted copy is cut; Copy gets the whole text.
QString shown(const QString& text) {
    constexpr qsizetype kLongest = 200;
    return text.size() > kLongest ? text.left(kLongest) + QChar(0x2026) : text;
}
QString shown(const std::string& text) {
    return shown(QString::fromStdString(text.substr(0, 1000)));
}

QString plainLine(const OperandDetail& plain) {
    return qs(plain.label.empty() ? plain.shape : plain.label + " " + plain.shape);
}

QString plainNote(const OperandDetail& plain) {
    return (plain.dtype.empty() ? QStringLiteral("dtype ?") : qs(plain.dtype)) +
           QStringLiteral(", operand %1").arg(plain.index);
}

}  // namespace

MeshView::MeshView(QWidget* parent) : QWidget(parent) {
    QSizePolicy policy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    policy.setHeightForWidth(true);
    setSizePolicy(policy);
}

void MeshView::setIncident(const IncidentDetail& d) {
    m_picture = MeshPicture::ofIncident(d);
    m_empty = false;
    rebuild();
}

void MeshView::setOp(const OpDetail& op) {
    m_picture = MeshPicture::ofOp(op.mesh, op.rank, op.operands);
    m_empty = false;
    rebuild();
}

void MeshView::clear() {
    m_picture = {};
    m_empty = true;
    rebuild();
}

void MeshView::rebuild() {
    const MeshPicture& pic = m_picture;
    m_arrowLabel.clear();
    m_arrowNote.clear();
    m_plainText.clear();
    if (pic.plain) {
        const QString to = shown(pic.promotedPlacements);
        const QString action = qs(std::string(toString(pic.action)));
        if (pic.outcome == Outcome::Reconciled) {
            m_arrowLabel = to.isEmpty() ? action : QStringLiteral("promoted → ") + to;
            m_arrowNote = action;
        } else {
            m_arrowLabel = "raised";
            m_arrowNote = pic.outcome == Outcome::Failed && !to.isEmpty()
                              ? "promotion to " + to + " failed"
                              : action;
        }
        m_plainText = {"plain tensor", shown(plainLine(*pic.plain)), shown(plainNote(*pic.plain))};
    }
    rebuildCells();
    measure();
    relayout();
}

void MeshView::rebuildCells() {
    m_cells.clear();
    m_cellText.clear();
    m_here.clear();
    m_rowLabels.clear();
    m_columnLabels.clear();
    m_title.clear();
    m_columns = 1;
    m_meshCells = 0;
    MeshGrid grid = meshGrid(m_picture, kMaxCells);  // the layout the HTML report draws too
    if (grid.cells.empty()) return;
    m_columns = grid.columns;
    m_meshCells = grid.meshCells;
    for (MeshCell& cell : grid.cells) {
        if (cell.here) cell.lines.front() += " (here)";
        QStringList text;
        for (const std::string& line : cell.lines)
            text << shown(line);
        m_here.push_back(cell.here);
        m_cellText.push_back(std::move(text));
        m_cells.push_back(std::move(cell.lines));
    }
    for (const std::string& label : grid.rowLabels)
        m_rowLabels << shown(label);
    for (const std::string& label : grid.columnLabels)
        m_columnLabels << shown(label);
    m_title = shown(grid.title);
}

// Every length derives from the font (padding is half a line), so the
// drawing scales with high-DPI and user font sizes. Long texts are capped at
// a few dozen characters and elided when painted.
void MeshView::measure() {
    const QFont normal = font(), heavy = bold(font());
    const QFontMetrics fm(normal);
    const int chars = fm.averageCharWidth();
    Metrics& m = m_metrics;
    m = {};
    m.unit = std::max(4, fm.height() / 2);
    m.lineHeight = fm.lineSpacing();
    int cellW = textWidth(heavy, "rank 000 (here)");
    qsizetype lines = 1;
    for (const QStringList& cell : m_cellText) {
        lines = std::max(lines, cell.size());
        for (qsizetype i = 0; i < cell.size(); ++i)
            cellW = std::max(cellW, textWidth(i ? normal : heavy, cell[i]));
    }
    m.cell = {std::min(cellW, 48 * chars) + 2 * m.unit, int(lines) * m.lineHeight + m.unit};
    for (const QString& label : m_rowLabels)
        if (!label.isEmpty())
            m.rowHeader = std::max(m.rowHeader, textWidth(normal, label) + m.unit);
    m.rowHeader = std::min(m.rowHeader, 24 * chars);
    m.title = std::min(textWidth(normal, m_title), 60 * chars);
    if (!m_plainText.isEmpty()) {
        int w = textWidth(heavy, m_plainText[0]);
        for (qsizetype i = 1; i < m_plainText.size(); ++i)
            w = std::max(w, textWidth(normal, m_plainText[i]));
        m.plain = {std::min(w, 28 * chars) + 2 * m.unit, 3 * m.lineHeight + m.unit};
        int arrow = std::max(textWidth(normal, m_arrowLabel), textWidth(normal, m_arrowNote));
        m.arrowLabel = std::min(arrow, 40 * chars);
    }
}

void MeshView::relayout() {
    updateGeometry();
    update();
}

void MeshView::changeEvent(QEvent* event) {
    // Every size derives from the font: a new font (or DPI) means a new layout.
    if (event->type() == QEvent::FontChange) measure();
    if (event->type() == QEvent::FontChange || event->type() == QEvent::PaletteChange) relayout();
    QWidget::changeEvent(event);
}

QString MeshView::describe() const {
    if (m_cells.empty()) return m_empty ? QString() : noMeshText();
    QString text = m_title + "\n";
    if (m_picture.plain)
        text += "plain tensor " + plainLine(*m_picture.plain) + " (" + plainNote(*m_picture.plain) +
                "): " + m_arrowLabel + " (" + m_arrowNote + ")\n";
    for (const auto& lines : m_cells) {
        QStringList parts;
        for (size_t i = 1; i < lines.size(); ++i)
            parts << qs(lines[i]);
        text += qs(lines.front()) + ": " + parts.join("; ") + "\n";
    }
    return text;
}

QString MeshView::noMeshText() const {
    if (!m_picture.plain)
        return QStringLiteral("No device mesh recorded for this op (no DTensor operand).");
    return "No device mesh recorded for this incident: no DTensor operand was recorded with a "
           "mesh. Plain operand: " +
           m_plainText.value(1) + ", " + m_arrowLabel + ".";
}

// ---- layout ----------------------------------------------------------------

QSize MeshView::frameSize() const {
    const Metrics& m = m_metrics;
    const int rows = int(m_cells.size() / m_columns), cols = int(m_columns);
    int gridW = m.rowHeader + cols * m.cell.width() + (cols - 1) * m.unit;
    int h = m.unit / 2 + 2 * m.lineHeight + rows * m.cell.height() + (rows - 1) * m.unit + m.unit;
    return {2 * m.unit + std::max(gridW, m.title), h};
}

// The cells inside the frame: under the title and the column labels, right
// of the row labels.
void MeshView::placeGrid(Layout& l) const {
    const Metrics& m = m_metrics;
    l.grid = l.frame.topLeft() + QPoint(m.unit + m.rowHeader, m.unit / 2 + 2 * m.lineHeight);
}

// Plain operand left of the mesh, the arrow pointing right into it.
MeshView::Layout MeshView::besideLayout() const {
    const Metrics& m = m_metrics;
    const int u = m.unit;
    Layout l;
    const bool plain = m_picture.plain.has_value();
    int arrowW = plain ? std::max(m.arrowLabel + 2 * u, 5 * u) : 0;
    int frameX = plain ? u + m.plain.width() + arrowW : u;
    l.frame = QRect(QPoint(frameX, u), frameSize());
    placeGrid(l);
    if (plain) {
        // Level with the middle of the cells, not of the frame with its title.
        int middle = (l.grid.y() + l.frame.bottom()) / 2;
        l.plain = QRect(QPoint(u, std::max(u, middle - m.plain.height() / 2)), m.plain);
        int y = l.plain.center().y();
        l.arrow = QLine(l.plain.right() + 1, y, l.frame.left() - 1, y);
        l.arrowText =
            QRect(l.arrow.x1(), y - m.lineHeight - u / 4, arrowW, 2 * m.lineHeight + u / 2);
    }
    int bottom = std::max(l.frame.bottom(), plain ? l.plain.bottom() : 0);
    l.total = QSize(l.frame.right() + 1 + u, bottom + 1 + u);
    return l;
}

// Plain operand above the mesh, the arrow pointing down into it: for docks
// too narrow for the side-by-side drawing.
MeshView::Layout MeshView::stackedLayout() const {
    const Metrics& m = m_metrics;
    const int u = m.unit;
    Layout l;
    l.stacked = true;
    l.plain = QRect(QPoint(u, u), m.plain);
    int x = l.plain.left() + 2 * u;
    l.arrow = QLine(x, l.plain.bottom() + 1, x, l.plain.bottom() + 2 * m.lineHeight + u);
    l.arrowText = QRect(x + u, l.plain.bottom() + u / 2, m.arrowLabel + u, 2 * m.lineHeight);
    l.frame = QRect(QPoint(u, l.arrow.y2() + 1), frameSize());
    placeGrid(l);
    int right = std::max({l.plain.right(), l.arrowText.right(), l.frame.right()});
    l.total = QSize(right + 1 + u, l.frame.bottom() + 1 + u);
    return l;
}

MeshView::Layout MeshView::layoutFor(int width) const {
    Layout beside = besideLayout();
    if (!m_picture.plain || width >= beside.total.width()) return beside;
    return stackedLayout();
}

int MeshView::heightForWidth(int width) const {
    const int u = m_metrics.unit;
    if (!m_cells.empty()) return layoutFor(width).total.height();
    if (m_empty) return 2 * u;
    QFontMetrics fm(font());
    int textW = std::max(width - 2 * u, 10 * fm.averageCharWidth());
    return fm.boundingRect(QRect(0, 0, textW, 100000), Qt::TextWordWrap, noMeshText()).height() +
           2 * u;
}

QSize MeshView::sizeHint() const {
    if (m_cells.empty()) {
        int w = 40 * QFontMetrics(font()).averageCharWidth();
        return {w, heightForWidth(w)};
    }
    return besideLayout().total;
}

QSize MeshView::minimumSizeHint() const {
    const int u = m_metrics.unit;
    if (m_cells.empty()) return {20 * QFontMetrics(font()).averageCharWidth(), 2 * u};
    Layout narrowest = m_picture.plain ? stackedLayout() : besideLayout();
    return {narrowest.total.width(), 2 * u};
}

// ---- painting ---------------------------------------------------------------

void MeshView::paintEvent(QPaintEvent*) {
    if (m_empty) return;
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    if (m_cells.empty()) return paintNoMesh(p);
    const Layout l = layoutFor(width());
    const QSize cell = m_metrics.cell;
    const int gap = m_metrics.unit;
    paintFrame(p, l);
    paintHeaders(p, l);
    for (size_t c = 0; c < m_cells.size(); ++c) {
        int row = int(c / m_columns), col = int(c % m_columns);
        QPoint at = l.grid + QPoint(col * (cell.width() + gap), row * (cell.height() + gap));
        paintCell(p, c, QRect(at, cell));
    }
    if (m_picture.plain) {
        paintPlain(p, l);
        paintArrow(p, l);
    }
}

void MeshView::paintNoMesh(QPainter& p) {
    const int u = m_metrics.unit;
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(rect().adjusted(u, u, -u, -u), Qt::TextWordWrap, noMeshText());
}

void MeshView::paintFrame(QPainter& p, const Layout& l) {
    const Metrics& m = m_metrics;
    QFontMetrics fm(font());
    p.setPen(QPen(palette().color(QPalette::Mid), 1));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(QRectF(l.frame).adjusted(0.5, 0.5, -0.5, -0.5), m.unit / 2.0, m.unit / 2.0);
    p.setPen(palette().color(QPalette::PlaceholderText));
    QRect title(l.frame.left() + m.unit, l.frame.top() + m.unit / 2, l.frame.width() - 2 * m.unit,
                m.lineHeight);
    p.drawText(title, Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(m_title, Qt::ElideRight, title.width()));
}

// Dim names with coordinates: columns along the last mesh dim, rows along
// the others ("dp 1", or "pp 0, dp 1" on 3-D meshes).
void MeshView::paintHeaders(QPainter& p, const Layout& l) {
    const Metrics& m = m_metrics;
    QFontMetrics fm(font());
    p.setPen(palette().color(QPalette::PlaceholderText));
    const int stepX = m.cell.width() + m.unit, stepY = m.cell.height() + m.unit;
    for (int c = 0; c < int(m_columnLabels.size()); ++c) {
        QRect r(l.grid.x() + c * stepX, l.grid.y() - m.lineHeight, m.cell.width(), m.lineHeight);
        p.drawText(r, Qt::AlignCenter, fm.elidedText(m_columnLabels[c], Qt::ElideRight, r.width()));
    }
    if (m.rowHeader == 0) return;
    for (int r = 0; r < int(m_rowLabels.size()); ++r) {
        QRect box(l.grid.x() - m.rowHeader, l.grid.y() + r * stepY, m.rowHeader - m.unit,
                  m.cell.height());
        p.drawText(box, Qt::AlignRight | Qt::AlignVCenter,
                   fm.elidedText(m_rowLabels[r], Qt::ElideRight, box.width()));
    }
}

void MeshView::paintCell(QPainter& p, size_t cell, QRect r) {
    const Metrics& m = m_metrics;
    const QPalette& pal = palette();
    const bool here = m_here[cell];
    const QColor highlight = pal.color(QPalette::Highlight);
    p.setPen(QPen(here ? highlight : pal.color(QPalette::Mid), here ? 2 : 1));
    p.setBrush(here ? mix(pal.color(QPalette::Base), highlight, 0.18) : pal.color(QPalette::Base));
    p.drawRoundedRect(QRectF(r).adjusted(1, 1, -1, -1), m.unit / 2.0, m.unit / 2.0);
    const QStringList& lines = m_cellText[cell];
    // The last line is the promoted plain operand, when there is one.
    const bool promotedLine = m_picture.plain && !m_picture.promotedPlacements.empty();
    const QColor promotedColor =
        m_picture.outcome == Outcome::Reconciled ? goodColor(pal) : badColor(pal);
    QRect line(r.left() + m.unit, r.top() + m.unit / 2, r.width() - 2 * m.unit, m.lineHeight);
    for (qsizetype i = 0; i < lines.size(); ++i) {
        p.setFont(i == 0 ? bold(font()) : font());
        bool promoted = promotedLine && i + 1 == lines.size();
        p.setPen(promoted ? promotedColor : pal.color(QPalette::Text));
        QString text = QFontMetrics(p.font()).elidedText(lines[i], Qt::ElideRight, line.width());
        p.drawText(line, Qt::AlignLeft | Qt::AlignVCenter, text);
        line.translate(0, m.lineHeight);
    }
    p.setFont(font());
}

void MeshView::paintPlain(QPainter& p, const Layout& l) {
    const Metrics& m = m_metrics;
    const QPalette& pal = palette();
    const QColor red = badColor(pal);
    p.setPen(QPen(red, 1.5, Qt::DashLine));
    p.setBrush(mix(pal.color(QPalette::Base), red, 0.07));
    p.drawRoundedRect(QRectF(l.plain).adjusted(1, 1, -1, -1), m.unit / 2.0, m.unit / 2.0);
    QRect line(l.plain.left() + m.unit, l.plain.top() + m.unit / 2, l.plain.width() - 2 * m.unit,
               m.lineHeight);
    for (qsizetype i = 0; i < m_plainText.size(); ++i) {
        p.setFont(i == 0 ? bold(font()) : font());
        p.setPen(pal.color(i == 2 ? QPalette::PlaceholderText : QPalette::Text));
        p.drawText(line, Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetrics(p.font()).elidedText(m_plainText[i], Qt::ElideRight, line.width()));
        line.translate(0, m.lineHeight);
    }
    p.setFont(font());
}

void MeshView::paintArrow(QPainter& p, const Layout& l) {
    const Metrics& m = m_metrics;
    QFontMetrics fm(font());
    const QColor color =
        m_picture.outcome == Outcome::Reconciled ? goodColor(palette()) : badColor(palette());
    // The head is a triangle pointing along the line, sized from the font.
    const QPointF tip = l.arrow.p2(), from = l.arrow.p1();
    const QPointF dir = l.stacked ? QPointF(0, 1) : QPointF(1, 0);
    const QPointF side(-dir.y(), dir.x());
    const double len = m.unit, half = m.unit / 2.0;
    p.setPen(QPen(color, 2));
    p.drawLine(from, tip - dir * len);
    QPainterPath head;
    head.moveTo(tip);
    head.lineTo(tip - dir * len + side * half);
    head.lineTo(tip - dir * len - side * half);
    head.closeSubpath();
    p.fillPath(head, color);
    // Label above the line (beside it when stacked), the note under it.
    const int flags = (l.stacked ? Qt::AlignLeft : Qt::AlignHCenter) | Qt::AlignVCenter;
    QRect top = l.arrowText, bottom = l.arrowText;
    top.setHeight(m.lineHeight);
    bottom.setTop(bottom.bottom() - m.lineHeight + 1);
    p.drawText(top, flags, fm.elidedText(m_arrowLabel, Qt::ElideRight, top.width()));
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(bottom, flags, fm.elidedText(m_arrowNote, Qt::ElideRight, bottom.width()));
}

}  // namespace meshscope::ui
