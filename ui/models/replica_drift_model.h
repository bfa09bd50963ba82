#pragma once

// "Replicas": the replica check across ranks and steps (RunAnalysis::replicas,
// core/analysis/replica_drift.h). One row per tensor that ranks must hold
// equal (a parameter, its gradient or an optimizer state, per replica key),
// drifting ones first; after the descriptive columns, one column per sampled
// step (the first kMaxStepColumns) whose cell says whether the ranks agreed
// there. A drifting row's tooltip gives the likely cause and the fix.

#include <QAbstractTableModel>
#include <memory>
#include <vector>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

class ReplicaDriftModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column { Name, Role, Key, Ranks, FirstDiffers, FirstStepColumn };
    enum DataRole {
        DriftingRole = Qt::UserRole + 1,  // bool: this tensor's ranks differ somewhere
        AgreesRole,                       // step cells: bool, invalid where not sampled
    };
    static constexpr int kMaxStepColumns = 64;

    explicit ReplicaDriftModel(QObject* parent = nullptr);

    void setAnalysis(std::shared_ptr<const RunAnalysis> analysis);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    int stepColumns() const;
    const ReplicaDrift* driftOf(const ReplicaSeries& s) const;
    QVariant stepCell(const ReplicaSeries& s, int64_t step, int role) const;

    std::shared_ptr<const RunAnalysis> m_analysis;
    std::vector<const ReplicaSeries*> m_rows;  // drifting first, then by name
};

}  // namespace meshscope::ui
