#pragma once

// "Where the time goes" as tables (RunAnalysis::time, core/analysis/
// time_breakdown.h), from a whole RunAnalysis snapshot like the incidents
// table:
// - OpStatsModel: one row per op or collective, with its calls, total, mean
//   and longest host time, ranks and the placements of its inputs;
// - RankStepsModel: one row per rank in overview order (outliers first),
//   with its median step, time outside collectives and with one in flight,
//   and how often it was the slowest rank;
// - SlowestStepModel: one row per step with the rank the others waited for.
// Every column sorts by its value (SortRole) behind a QSortFilterProxyModel.

#include <QAbstractTableModel>
#include <memory>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

// "12.3 ms": a duration as the reports write it (meshscope::formatDuration;
// the timeline's own formatDuration writes fixed digits).
QString durationText(int64_t ns);

class TimeTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum DataRole {
        SortRole = Qt::UserRole + 1,  // the cell's value as a number or text
        RankRole,                     // the row's rank (-1 for ops)
        StepRole,                     // the row's step (-1 when it has none)
    };
    explicit TimeTableModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
    void setAnalysis(std::shared_ptr<const RunAnalysis> analysis);
    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  protected:
    const TimeBreakdown* time() const { return m_analysis ? &m_analysis->time : nullptr; }
    virtual int rows(const TimeBreakdown& time) const = 0;
    // The display text and the sort value of a cell.
    virtual QVariant text(const TimeBreakdown& time, int row, int column) const = 0;
    virtual QVariant value(const TimeBreakdown& time, int row, int column) const = 0;
    virtual QVariant tooltip(const TimeBreakdown&, int, int) const { return {}; }
    virtual int rankOf(const TimeBreakdown&, int) const { return -1; }
    virtual qint64 stepOf(const TimeBreakdown&, int) const { return -1; }
    virtual const char* title(int column) const = 0;
    virtual bool numeric(int column) const = 0;

  private:
    std::shared_ptr<const RunAnalysis> m_analysis;
};

class OpStatsModel : public TimeTableModel {
    Q_OBJECT
  public:
    enum Column { Op, Calls, Total, Mean, Max, Ranks, Placements, ColumnCount };
    using TimeTableModel::TimeTableModel;
    int columnCount(const QModelIndex& parent = {}) const override;

  protected:
    int rows(const TimeBreakdown& time) const override;
    QVariant text(const TimeBreakdown& time, int row, int column) const override;
    QVariant value(const TimeBreakdown& time, int row, int column) const override;
    QVariant tooltip(const TimeBreakdown& time, int row, int column) const override;
    const char* title(int column) const override;
    bool numeric(int column) const override { return column != Op && column != Placements; }
};

class RankStepsModel : public TimeTableModel {
    Q_OBJECT
  public:
    enum Column { Rank, Steps, Step, Outside, InFlight, SlowestIn, Incidents, ColumnCount };
    using TimeTableModel::TimeTableModel;
    int columnCount(const QModelIndex& parent = {}) const override;

  protected:
    int rows(const TimeBreakdown& time) const override;
    QVariant text(const TimeBreakdown& time, int row, int column) const override;
    QVariant value(const TimeBreakdown& time, int row, int column) const override;
    int rankOf(const TimeBreakdown& time, int row) const override;
    const char* title(int column) const override;
    bool numeric(int) const override { return true; }
};

class SlowestStepModel : public TimeTableModel {
    Q_OBJECT
  public:
    enum Column { Step, Rank, Outside, Others, Ratio, ColumnCount };
    using TimeTableModel::TimeTableModel;
    int columnCount(const QModelIndex& parent = {}) const override;

  protected:
    int rows(const TimeBreakdown& time) const override;
    QVariant text(const TimeBreakdown& time, int row, int column) const override;
    QVariant value(const TimeBreakdown& time, int row, int column) const override;
    int rankOf(const TimeBreakdown& time, int row) const override;
    qint64 stepOf(const TimeBreakdown& time, int row) const override;
    const char* title(int column) const override;
    bool numeric(int) const override { return true; }
};

}  // namespace meshscope::ui
