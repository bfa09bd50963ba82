#include "ui/models/rank_stop_model.h"

#include <QColor>

namespace meshscope::ui {

RankStopModel::RankStopModel(QObject* parent) : QAbstractTableModel(parent) {}

void RankStopModel::setAnalysis(std::shared_ptr<const RunAnalysis> analysis) {
    beginResetModel();
    m_analysis = std::move(analysis);
    endResetModel();
}

int RankStopModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || !m_analysis ? 0 : int(m_analysis->stops.size());
}

int RankStopModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RankStopModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || !m_analysis || index.row() >= rowCount()) return {};
    const RankStop& s = m_analysis->stops[size_t(index.row())];
    switch (role) {
        case Qt::DisplayRole:
            return index.column() == Rank ? QVariant(s.rank)
                                          : QVariant(QString::fromStdString(s.state()));
        case Qt::ToolTipRole:
            return index.column() == State ? QVariant(QString::fromStdString(s.state()))
                                           : QVariant();
        case Qt::ForegroundRole:  // the kind it stopped in, as its timeline marker
            return index.column() == State && s.stoppedIn
                       ? QVariant(QColor(QRgb(incidentKindInfo(*s.stoppedIn).rgb)))
                       : QVariant();
        case Qt::TextAlignmentRole:
            return index.column() == Rank ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                          : QVariant();
        case RankRole:
            return s.rank;
        case StoppedInRole:
            return s.stoppedIn ? QVariant(int(*s.stoppedIn)) : QVariant();
        case TimeRole:
            return qint64(s.stoppedIn && s.pendingNs >= 0 ? s.pendingNs : s.lastCollectiveNs);
    }
    return {};
}

QVariant RankStopModel::headerData(int section, Qt::Orientation orientation, int role) const {
    static const char* kTitles[ColumnCount] = {"Rank", "Where it stopped"};
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 ||
        section >= ColumnCount)
        return QAbstractTableModel::headerData(section, orientation, role);
    return QString(kTitles[section]);
}

}  // namespace meshscope::ui
