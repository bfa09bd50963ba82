#pragma once

// "Where it stopped": one row per rank with its RankStop::state() (its last
// collective, the collective it hung or failed in, how it ended), from a
// whole RunAnalysis snapshot like the incidents table. The first thing to
// read about a hung or killed run.

#include <QAbstractTableModel>
#include <memory>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

class RankStopModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column { Rank, State, ColumnCount };
    enum Role {
        RankRole = Qt::UserRole + 1,
        StoppedInRole,  // int of the IncidentKind it stopped in; invalid: none
        TimeRole,       // qint64 rank-local ns of the pending collective, else of its last; -1
    };

    explicit RankStopModel(QObject* parent = nullptr);

    void setAnalysis(std::shared_ptr<const RunAnalysis> analysis);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    std::shared_ptr<const RunAnalysis> m_analysis;
};

}  // namespace meshscope::ui
