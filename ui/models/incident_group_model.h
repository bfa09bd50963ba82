#pragma once

// "By call site": one row per incident group of a RunAnalysis (kind, op,
// origin and user call site), most frequent first, as the reports group
// them: how often, on which ranks, what the policy did and the fix. The
// per-incident table lists each occurrence; this is the list of places to
// change.

#include <QAbstractTableModel>
#include <memory>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

class IncidentGroupModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column { Count, Site, Op, What, Ranks, Handled, Fix, ColumnCount };
    enum Role {
        RankRole = Qt::UserRole + 1,  // int: the rank of the group's first incident
        SeqRole,                      // qint64: that incident's seq
        GroupRole,                    // int: the group's id
    };

    explicit IncidentGroupModel(QObject* parent = nullptr);

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
