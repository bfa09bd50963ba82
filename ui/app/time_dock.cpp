#include "ui/app/time_dock.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>
#include <array>
#include <cmath>

#include "ui/models/time_models.h"

namespace meshscope::ui {
namespace {

// Light (short, few) to dark (long, many): the HTML report's scale.
constexpr std::array<QRgb, 8> kHeat = {0xfff7ec, 0xfee8c8, 0xfdd49e, 0xfdbb84,
                                       0xfc8d59, 0xef6548, 0xd7301f, 0x990000};
constexpr QRgb kNoStep = 0xe3e7ee;
constexpr int kLabelWidth = 64;
constexpr int kAxisHeight = 16;  // step numbers above the grid

}  // namespace

RanksHeatMap::RanksHeatMap(QWidget* parent) : QWidget(parent) {
    setObjectName("ranksHeatMap");
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void RanksHeatMap::setAnalysis(std::shared_ptr<const RunAnalysis> analysis) {
    m_analysis = std::move(analysis);
    rebuild();
}

void RanksHeatMap::setMetric(Metric metric) {
    m_metric = metric;
    rebuild();
}

std::optional<double> RanksHeatMap::valueOf(const StepCell& c) const {
    if (m_metric == Metric::Incidents) {
        if (c.steps == 0 && c.incidents == 0) return std::nullopt;
        return double(c.incidents);
    }
    if (c.steps == 0) return std::nullopt;
    int64_t ns = m_metric == Metric::StepTime   ? c.wallNs
                 : m_metric == Metric::InFlight ? c.collectiveNs
                                                : c.outsideNs();
    return double(ns) / double(c.steps);
}

void RanksHeatMap::rebuild() {
    m_image = {};
    const TimeBreakdown* t = m_analysis ? &m_analysis->time : nullptr;
    if (t && !t->columns.empty() && !t->ranks.empty()) {
        // the first column (set-up, warm-up) stays out of a time scale when
        // there are others: it would make every later step look alike
        m_scaleFrom = m_metric != Metric::Incidents && t->columns.size() > 1 ? 1 : 0;
        // durations scale from 0: a few percent of noise must not look like
        // a hot spot
        m_lo = m_metric == Metric::Incidents ? INFINITY : 0.0, m_hi = -INFINITY;
        for (const RankSteps& r : t->ranks)
            for (size_t c = m_scaleFrom; c < r.cells.size(); ++c)
                if (auto v = valueOf(r.cells[c]))
                    m_lo = std::min(m_lo, *v), m_hi = std::max(m_hi, *v);
        m_image = QImage(int(t->columns.size()), int(t->ranks.size()), QImage::Format_RGB32);
        for (size_t y = 0; y < t->ranks.size(); ++y) {
            auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(int(y)));
            const RankSteps& r = t->ranks[y];
            for (size_t x = 0; x < t->columns.size(); ++x) {
                std::optional<double> v = x < r.cells.size() ? valueOf(r.cells[x]) : std::nullopt;
                if (!v) {
                    line[x] = kNoStep | 0xff000000;
                    continue;
                }
                double f = m_hi <= m_lo ? 0
                           : m_metric == Metric::Incidents
                               ? std::log1p(*v - m_lo) / std::log1p(m_hi - m_lo)
                               : (*v - m_lo) / (m_hi - m_lo);
                size_t bin = std::min(kHeat.size() - 1,
                                      size_t(std::clamp(f, 0.0, 1.0) * double(kHeat.size())));
                line[x] = kHeat[bin] | 0xff000000;
            }
        }
    }
    updateGeometry();
    update();
}

int RanksHeatMap::rowHeight() const {
    int ranks = m_image.isNull() ? 0 : m_image.height();
    return ranks <= 64 ? 16 : ranks <= 512 ? 6 : 3;
}

QRect RanksHeatMap::gridRect() const {
    if (m_image.isNull()) return {};
    int columns = m_image.width();
    int cell = std::clamp((width() - kLabelWidth - 8) / std::max(1, columns), 1, 64);
    return {kLabelWidth, kAxisHeight, cell * columns, rowHeight() * m_image.height()};
}

QSize RanksHeatMap::sizeHint() const {
    int rows = m_image.isNull() ? 0 : m_image.height();
    return {480, std::max(40, kAxisHeight + rows * rowHeight() + 4)};
}

std::optional<RanksHeatMap::Cell> RanksHeatMap::cellAt(QPoint p) const {
    QRect g = gridRect();
    if (g.isEmpty() || !g.contains(p)) return std::nullopt;
    const TimeBreakdown& t = m_analysis->time;
    size_t row = size_t((p.y() - g.top()) / rowHeight());
    size_t column = size_t((p.x() - g.left()) * m_image.width() / g.width());
    if (row >= t.ranks.size() || column >= t.columns.size()) return std::nullopt;
    return Cell{t.ranks[row].rank, t.columns[column].firstStep, t.columns[column].lastStep};
}

std::optional<QPoint> RanksHeatMap::pointOf(int rank, int64_t step) const {
    QRect g = gridRect();
    if (g.isEmpty()) return std::nullopt;
    const TimeBreakdown& t = m_analysis->time;
    for (size_t row = 0; row < t.ranks.size(); ++row) {
        if (t.ranks[row].rank != rank) continue;
        for (size_t c = 0; c < t.columns.size(); ++c)
            if (step >= t.columns[c].firstStep && step <= t.columns[c].lastStep) {
                int cell = g.width() / m_image.width();
                return QPoint(g.left() + int(c) * cell + cell / 2,
                              g.top() + int(row) * rowHeight() + rowHeight() / 2);
            }
    }
    return std::nullopt;
}

QString RanksHeatMap::describe(const Cell& cell) const {
    if (!m_analysis) return {};
    const TimeBreakdown& t = m_analysis->time;
    for (const RankSteps& r : t.ranks) {
        if (r.rank != cell.rank) continue;
        for (size_t c = 0; c < t.columns.size() && c < r.cells.size(); ++c) {
            if (t.columns[c].firstStep != cell.firstStep) continue;
            const StepCell& s = r.cells[c];
            QString steps =
                cell.firstStep == cell.lastStep
                    ? QStringLiteral("step %1").arg(cell.firstStep)
                    : QStringLiteral("steps %1-%2").arg(cell.firstStep).arg(cell.lastStep);
            if (s.steps == 0)
                return QStringLiteral("rank %1, %2: no step recorded%3")
                    .arg(cell.rank)
                    .arg(steps, s.incidents ? QStringLiteral("; %1 incident(s)").arg(s.incidents)
                                            : QString());
            double n = double(s.steps);
            QString text = QStringLiteral(
                               "rank %1, %2: step %3, outside collectives %4, a collective in "
                               "flight %5; %6 incident(s)")
                               .arg(cell.rank)
                               .arg(steps, durationText(int64_t(double(s.wallNs) / n)),
                                    durationText(int64_t(double(s.outsideNs()) / n)),
                                    durationText(int64_t(double(s.collectiveNs) / n)))
                               .arg(s.incidents);
            if (s.slowest > 0)
                text += QStringLiteral("; the slowest rank in %1 of %2 step(s)")
                            .arg(s.slowest)
                            .arg(s.steps);
            return text + (s.steps > 1 ? QStringLiteral(" (means a step)") : QString());
        }
    }
    return {};
}

QString RanksHeatMap::legend() const {
    if (m_image.isNull() || m_lo > m_hi) return QStringLiteral("no steps recorded");
    QString lo =
        m_metric == Metric::Incidents ? QString::number(m_lo) : durationText(int64_t(m_lo));
    QString hi =
        m_metric == Metric::Incidents ? QString::number(m_hi) : durationText(int64_t(m_hi));
    QString text = QStringLiteral("light %1 to dark %2; grey: no step").arg(lo, hi);
    if (m_scaleFrom > 0) text += QStringLiteral("; the first column (set-up) is not in the scale");
    if (m_analysis->time.stepsPerColumn > 1)
        text += QStringLiteral("; %1 steps a column").arg(m_analysis->time.stepsPerColumn);
    return text;
}

void RanksHeatMap::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (m_image.isNull()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect().adjusted(8, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft,
                   m_analysis ? QStringLiteral("No optimizer step recorded: no steps to compare")
                              : QStringLiteral("No run analysed yet"));
        return;
    }
    QRect g = gridRect();
    p.drawImage(g, m_image);  // scaled without smoothing: one block per cell
    const TimeBreakdown& t = m_analysis->time;
    // step numbers above the grid: the first column's, then every column
    // whose label fits after the last one drawn
    p.setPen(palette().color(QPalette::PlaceholderText));
    QFontMetrics metrics(font());
    int cell = g.width() / m_image.width();
    int freeFrom = 0;
    for (size_t c = 0; c < t.columns.size(); ++c) {
        QString label = c == 0 ? QStringLiteral("step %1").arg(t.columns[c].firstStep)
                               : QString::number(t.columns[c].firstStep);
        int x = g.left() + int(c) * cell;
        if (x < freeFrom) continue;
        p.drawText(QPoint(x + 1, kAxisHeight - 4), label);
        freeFrom = x + metrics.horizontalAdvance(label) + 12;
    }
    int h = rowHeight();
    if (h < 12) return;
    p.setPen(palette().color(QPalette::Text));
    for (size_t row = 0; row < t.ranks.size(); ++row)
        p.drawText(QRect(2, g.top() + int(row) * h, kLabelWidth - 6, h),
                   Qt::AlignVCenter | Qt::AlignRight,
                   QStringLiteral("rank %1").arg(t.ranks[row].rank));
}

void RanksHeatMap::mousePressEvent(QMouseEvent* event) {
    if (auto cell = cellAt(event->position().toPoint()))
        emit cellActivated(cell->rank, cell->firstStep, cell->lastStep);
}

bool RanksHeatMap::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        if (auto cell = cellAt(help->pos()))
            QToolTip::showText(help->globalPos(), describe(*cell), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

// ---- the dock ----

TimeDock::TimeDock(QWidget* parent) : QTabWidget(parent) {
    setObjectName("timeTabs");
    auto* ranksPage = new QWidget(this);
    auto* layout = new QVBoxLayout(ranksPage);
    layout->setContentsMargins(2, 2, 2, 2);
    auto* bar = new QHBoxLayout;
    m_metric = new QComboBox(ranksPage);
    m_metric->setObjectName("heatMetric");
    m_metric->addItem("Time outside collectives", int(RanksHeatMap::Metric::Outside));
    m_metric->addItem("Step time", int(RanksHeatMap::Metric::StepTime));
    m_metric->addItem("Time with a collective in flight", int(RanksHeatMap::Metric::InFlight));
    m_metric->addItem("Incidents", int(RanksHeatMap::Metric::Incidents));
    m_legend = new QLabel(ranksPage);
    bar->addWidget(new QLabel("Colour:", ranksPage));
    bar->addWidget(m_metric);
    bar->addWidget(m_legend, 1);
    layout->addLayout(bar);
    m_summary = new QLabel(ranksPage);
    m_summary->setObjectName("stragglerText");
    m_summary->setWordWrap(true);
    m_summary->setTextFormat(Qt::PlainText);
    layout->addWidget(m_summary);
    // side by side: the dock is wide and short under the timeline
    auto* split = new QSplitter(Qt::Horizontal, ranksPage);
    auto* scroll = new QScrollArea(split);
    m_map = new RanksHeatMap(scroll);
    scroll->setWidget(m_map);
    scroll->setWidgetResizable(true);
    m_ranks = new RankStepsModel(this);
    auto* ranksProxy = new QSortFilterProxyModel(this);
    ranksProxy->setSourceModel(m_ranks);
    m_ranksTable = table(ranksProxy, "rankStepsTable");
    split->addWidget(scroll);
    split->addWidget(m_ranksTable);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    layout->addWidget(split, 1);
    addTab(ranksPage, "Ranks");

    m_ops = new OpStatsModel(this);
    auto* opsProxy = new QSortFilterProxyModel(this);
    opsProxy->setSourceModel(m_ops);
    m_opsTable = table(opsProxy, "opStatsTable");
    addTab(m_opsTable, "Ops");

    m_slowest = new SlowestStepModel(this);
    auto* slowestProxy = new QSortFilterProxyModel(this);
    slowestProxy->setSourceModel(m_slowest);
    m_slowestTable = table(slowestProxy, "slowestTable");
    addTab(m_slowestTable, "Slowest rank per step");

    connect(m_metric, &QComboBox::currentIndexChanged, this, [this] {
        m_map->setMetric(RanksHeatMap::Metric(m_metric->currentData().toInt()));
        m_legend->setText(m_map->legend());
    });
    connect(m_map, &RanksHeatMap::cellActivated, this, &TimeDock::rankActivated);
    auto activate = [this](const QModelIndex& index) {
        int rank = index.data(TimeTableModel::RankRole).toInt();
        qint64 step = index.data(TimeTableModel::StepRole).toLongLong();
        if (rank >= 0) emit rankActivated(rank, step, step);
    };
    for (QTableView* t : {m_ranksTable, m_slowestTable}) {
        connect(t, &QTableView::activated, this, activate);
        connect(t, &QTableView::clicked, this, activate);
    }
}

QTableView* TimeDock::table(QSortFilterProxyModel* proxy, const char* name) {
    proxy->setSortRole(TimeTableModel::SortRole);
    auto* view = new QTableView(this);
    view->setObjectName(name);
    view->setModel(proxy);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->verticalHeader()->hide();
    view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
    view->horizontalHeader()->setStretchLastSection(true);
    view->setSortingEnabled(true);
    return view;
}

void TimeDock::setAnalysis(std::shared_ptr<const RunAnalysis> analysis) {
    m_map->setAnalysis(analysis);
    m_ops->setAnalysis(analysis);
    m_ranks->setAnalysis(analysis);
    m_slowest->setAnalysis(analysis);
    // the models' own order: ops by total time, ranks outliers first, steps in order
    for (QTableView* t : {m_opsTable, m_ranksTable, m_slowestTable}) {
        t->sortByColumn(-1, Qt::AscendingOrder);
        t->resizeColumnsToContents();
    }
    m_legend->setText(m_map->legend());
    QStringList lines;
    if (analysis)
        for (const Finding& f : stragglerFindings(analysis->time))
            lines << QStringLiteral("Straggler: ") + QString::fromStdString(f.message);
    m_summary->setText(lines.join('\n'));
    m_summary->setVisible(!lines.isEmpty());
}

QString TimeDock::stragglerText() const {
    return m_summary->text();
}

}  // namespace meshscope::ui
