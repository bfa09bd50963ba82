#pragma once

// "Where the time goes" dock (RunAnalysis::time, core/analysis/
// time_breakdown.h), tabbed:
// - Ranks: a heat map of ranks by steps (step time, time with a collective
//   in flight, time outside collectives, incidents), ranks furthest from
//   the median first, stragglers named above it, each rank's medians below;
// - Ops: op statistics (calls, total, mean, max, ranks, placements);
// - Slowest rank: the rank the others waited for, step by step.
// A click on a heat map cell or a row asks the timeline to show that rank
// at those steps (rankActivated).

#include <QTabWidget>
#include <QWidget>
#include <memory>
#include <optional>

#include "core/analysis/run_analysis.h"

class QComboBox;
class QLabel;
class QTableView;
class QSortFilterProxyModel;

namespace meshscope::ui {

class OpStatsModel;
class RankStepsModel;
class SlowestStepModel;

// Ranks (rows, overview order) by step columns, one colour per cell, drawn
// from one image the size of the grid: a 4,096-rank run paints as fast as
// a 2-rank one.
class RanksHeatMap : public QWidget {
    Q_OBJECT
  public:
    enum class Metric { StepTime, InFlight, Outside, Incidents };
    explicit RanksHeatMap(QWidget* parent = nullptr);
    void setAnalysis(std::shared_ptr<const RunAnalysis> analysis);
    void setMetric(Metric metric);
    Metric metric() const { return m_metric; }

    struct Cell {
        int rank = 0;
        int64_t firstStep = 0, lastStep = 0;
    };
    // The cell under a point of this widget, if any.
    std::optional<Cell> cellAt(QPoint point) const;
    // Where a rank's row and a step's column are drawn (tests).
    std::optional<QPoint> pointOf(int rank, int64_t step) const;
    // The cell's value as its tooltip says it.
    QString describe(const Cell& cell) const;
    // The lightest and darkest values ("12.1 ms", "40.3 ms").
    QString legend() const;
    QSize sizeHint() const override;

  signals:
    void cellActivated(int rank, qint64 firstStep, qint64 lastStep);

  protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

  private:
    void rebuild();
    int rowHeight() const;
    QRect gridRect() const;
    std::optional<double> valueOf(const StepCell& cell) const;

    std::shared_ptr<const RunAnalysis> m_analysis;
    Metric m_metric = Metric::Outside;
    QImage m_image;  // one pixel per cell
    double m_lo = 0, m_hi = 0;
    size_t m_scaleFrom = 0;  // the first column in the colour scale
};

class TimeDock : public QTabWidget {
    Q_OBJECT
  public:
    explicit TimeDock(QWidget* parent = nullptr);
    void setAnalysis(std::shared_ptr<const RunAnalysis> analysis);

    RanksHeatMap& heatMap() { return *m_map; }
    QTableView& opsTable() { return *m_opsTable; }
    QTableView& ranksTable() { return *m_ranksTable; }
    QTableView& slowestTable() { return *m_slowestTable; }
    QComboBox& metricBox() { return *m_metric; }
    QString stragglerText() const;

  signals:
    // Show `rank` at steps [firstStep, lastStep] (-1: the whole run).
    void rankActivated(int rank, qint64 firstStep, qint64 lastStep);

  private:
    QTableView* table(QSortFilterProxyModel* proxy, const char* name);

    RanksHeatMap* m_map = nullptr;
    QComboBox* m_metric = nullptr;
    QLabel* m_summary = nullptr;
    QLabel* m_legend = nullptr;
    OpStatsModel* m_ops = nullptr;
    RankStepsModel* m_ranks = nullptr;
    SlowestStepModel* m_slowest = nullptr;
    QTableView *m_opsTable = nullptr, *m_ranksTable = nullptr, *m_slowestTable = nullptr;
};

}  // namespace meshscope::ui
