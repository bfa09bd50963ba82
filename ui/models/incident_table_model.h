#pragma once

// The incidents table: one row per incident of every rank, from a whole
// RunAnalysis snapshot (replaced, never patched, when a live run's analysis
// is redone). The Kind column tells mixed tensors from failures (no
// sharding strategy, DTensor errors, collective failures and hangs), which
// have no origin class. Columns and roles follow hotspot's model habit; the filter
// proxy reads the roles, not the analysis.

#include <QAbstractTableModel>
#include <QHash>
#include <QIcon>
#include <array>
#include <memory>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

class IncidentTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column {
        Rank,
        Step,
        TimeMs,
        Op,
        Kind,
        Origin,
        Action,
        Outcome,
        Verdict,
        Location,
        Evidence,
        ColumnCount
    };
    enum Role {
        RankRole = Qt::UserRole + 1,
        SeqRole,            // qint64 IncidentSeq value
        IncidentIndexRole,  // index into RunAnalysis::incidents
        SortRole,           // numbers for numeric columns, text otherwise
        OriginRole,         // char of the OriginClass
        ActionRole,         // int of the Action
        FileRole,           // file of the call site
        StepRole,           // qint64 step
        OpRole,             // QString op name
        KindRole,           // int of the IncidentKind
    };

    explicit IncidentTableModel(QObject* parent = nullptr);

    void setAnalysis(std::shared_ptr<const RunAnalysis> analysis);
    std::shared_ptr<const RunAnalysis> analysis() const { return m_analysis; }
    // Row of an incident, invalid when it is not in the snapshot.
    QModelIndex indexOf(int rank, int64_t seq) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    QVariant display(const IncidentRef& ref, int column) const;
    QVariant sortValue(const IncidentRef& ref, int column) const;
    const IncidentGroup* groupOf(const IncidentRef& ref) const;

    std::shared_ptr<const RunAnalysis> m_analysis;
    QHash<QPair<int, qint64>, int> m_rows;
    std::array<QIcon, kIncidentStates.size()> m_cues;
    std::array<QIcon, kIncidentKinds.size()> m_kindCues;  // failures: their kind's colour
};

}  // namespace meshscope::ui
