#include "ui/models/time_models.h"

namespace meshscope::ui {
QString durationText(int64_t ns) {
    return QString::fromStdString(meshscope::formatDuration(ns));
}

void TimeTableModel::setAnalysis(std::shared_ptr<const RunAnalysis> analysis) {
    beginResetModel();
    m_analysis = std::move(analysis);
    endResetModel();
}

int TimeTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || !time() ? 0 : rows(*time());
}

QVariant TimeTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || !time() || index.row() >= rowCount()) return {};
    const TimeBreakdown& t = *time();
    switch (role) {
        case Qt::DisplayRole:
            return text(t, index.row(), index.column());
        case SortRole:
            return value(t, index.row(), index.column());
        case Qt::ToolTipRole:
            return tooltip(t, index.row(), index.column());
        case Qt::TextAlignmentRole:
            return numeric(index.column()) ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                           : QVariant();
        case RankRole:
            return rankOf(t, index.row());
        case StepRole:
            return stepOf(t, index.row());
    }
    return {};
}

QVariant TimeTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 ||
        section >= columnCount())
        return QAbstractTableModel::headerData(section, orientation, role);
    return QString(title(section));
}

// ---- ops ----

int OpStatsModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

int OpStatsModel::rows(const TimeBreakdown& time) const {
    return int(time.ops.size());
}

const char* OpStatsModel::title(int column) const {
    static const char* kTitles[ColumnCount] = {
        "Op", "Calls", "Total", "Mean", "Max", "Ranks", "Placements of its inputs"};
    return kTitles[column];
}

QVariant OpStatsModel::text(const TimeBreakdown& time, int row, int column) const {
    const OpStat& o = time.ops[size_t(row)];
    switch (column) {
        case Op:
            return QString::fromStdString(o.name);
        case Total:
            return durationText(o.totalNs);
        case Mean:
            return durationText(o.meanNs());
        case Max:
            return durationText(o.maxNs);
        case Placements: {
            if (o.collective) return QStringLiteral("collective, %1 bytes").arg(o.bytes);
            QStringList parts;
            for (const std::string& p : o.placements)
                parts << QString::fromStdString(p);
            if (o.morePlacements > 0) parts << QStringLiteral("%1 more").arg(o.morePlacements);
            return parts.join(QStringLiteral("; "));
        }
        default:
            return value(time, row, column);
    }
}

QVariant OpStatsModel::value(const TimeBreakdown& time, int row, int column) const {
    const OpStat& o = time.ops[size_t(row)];
    switch (column) {
        case Op:
            return QString::fromStdString(o.name);
        case Calls:
            return qint64(o.count);
        case Total:
            return qint64(o.totalNs);
        case Mean:
            return qint64(o.meanNs());
        case Max:
            return qint64(o.maxNs);
        case Ranks:
            return o.ranks;
        case Placements:
            return text(time, row, column);
    }
    return {};
}

QVariant OpStatsModel::tooltip(const TimeBreakdown& time, int row, int column) const {
    if (column != Placements && column != Op) return {};
    const OpStat& o = time.ops[size_t(row)];
    QString tip = QString::fromStdString(o.name) +
                  (o.collective ? QStringLiteral(": a collective, issue to completion")
                                : QStringLiteral(": host time, including the ops it called"));
    return tip + QStringLiteral("\n") + text(time, row, Placements).toString();
}

// ---- ranks ----

int RankStepsModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

int RankStepsModel::rows(const TimeBreakdown& time) const {
    return int(time.ranks.size());
}

const char* RankStepsModel::title(int column) const {
    static const char* kTitles[ColumnCount] = {
        "Rank",       "Steps",    "Step", "Outside collectives", "Collective in flight",
        "Slowest in", "Incidents"};
    return kTitles[column];
}

QVariant RankStepsModel::text(const TimeBreakdown& time, int row, int column) const {
    const RankSteps& r = time.ranks[size_t(row)];
    switch (column) {
        case Step:
            return durationText(r.medianStepNs);
        case Outside:
            return durationText(r.medianOutsideNs);
        case InFlight:
            return durationText(r.medianCollectiveNs);
        default:
            return value(time, row, column);
    }
}

QVariant RankStepsModel::value(const TimeBreakdown& time, int row, int column) const {
    const RankSteps& r = time.ranks[size_t(row)];
    switch (column) {
        case Rank:
            return r.rank;
        case Steps:
            return qint64(r.steps);
        case Step:
            return qint64(r.medianStepNs);
        case Outside:
            return qint64(r.medianOutsideNs);
        case InFlight:
            return qint64(r.medianCollectiveNs);
        case SlowestIn:
            return qint64(r.slowestIn);
        case Incidents:
            return qint64(r.incidents);
    }
    return {};
}

int RankStepsModel::rankOf(const TimeBreakdown& time, int row) const {
    return time.ranks[size_t(row)].rank;
}

// ---- the slowest rank of each step ----

int SlowestStepModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

int SlowestStepModel::rows(const TimeBreakdown& time) const {
    return int(time.slowest.size());
}

const char* SlowestStepModel::title(int column) const {
    static const char* kTitles[ColumnCount] = {"Step", "Slowest rank", "Outside collectives",
                                               "Other ranks' mean", "Ratio"};
    return kTitles[column];
}

QVariant SlowestStepModel::text(const TimeBreakdown& time, int row, int column) const {
    const SlowestRank& s = time.slowest[size_t(row)];
    switch (column) {
        case Outside:
            return durationText(s.outsideNs);
        case Others:
            return durationText(s.meanOthersNs);
        case Ratio:
            return QStringLiteral("%1x").arg(s.ratio(), 0, 'f', 2);
        default:
            return value(time, row, column);
    }
}

QVariant SlowestStepModel::value(const TimeBreakdown& time, int row, int column) const {
    const SlowestRank& s = time.slowest[size_t(row)];
    switch (column) {
        case Step:
            return qint64(s.step);
        case Rank:
            return s.rank;
        case Outside:
            return qint64(s.outsideNs);
        case Others:
            return qint64(s.meanOthersNs);
        case Ratio:
            return s.ratio();
    }
    return {};
}

int SlowestStepModel::rankOf(const TimeBreakdown& time, int row) const {
    return time.slowest[size_t(row)].rank;
}

qint64 SlowestStepModel::stepOf(const TimeBreakdown& time, int row) const {
    return time.slowest[size_t(row)].step;
}

}  // namespace meshscope::ui
