#include "ui/models/replica_drift_model.h"

#include <QColor>
#include <algorithm>

namespace meshscope::ui {
namespace {

const QColor kAgrees(0x2e, 0x7d, 0x32);
const QColor kDiffers(0xc6, 0x28, 0x28);

QString ranksText(const std::vector<int>& ranks) {
    QStringList parts;
    for (int r : ranks)
        parts << QString::number(r);
    return parts.join(",");
}

}  // namespace

ReplicaDriftModel::ReplicaDriftModel(QObject* parent) : QAbstractTableModel(parent) {}

void ReplicaDriftModel::setAnalysis(std::shared_ptr<const RunAnalysis> analysis) {
    beginResetModel();
    m_analysis = std::move(analysis);
    m_rows.clear();
    if (m_analysis)
        for (const ReplicaSeries& s : m_analysis->replicas.series)
            m_rows.push_back(&s);
    std::stable_sort(m_rows.begin(), m_rows.end(), [](const auto* a, const auto* b) {
        return (a->firstDiffering >= 0) > (b->firstDiffering >= 0);
    });
    endResetModel();
}

int ReplicaDriftModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(m_rows.size());
}

int ReplicaDriftModel::stepColumns() const {
    return m_analysis ? std::min<int>(kMaxStepColumns, int(m_analysis->replicas.steps.size())) : 0;
}

int ReplicaDriftModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : FirstStepColumn + stepColumns();
}

const ReplicaDrift* ReplicaDriftModel::driftOf(const ReplicaSeries& s) const {
    for (const ReplicaDrift& d : m_analysis->replicas.drifts)
        if (d.name == s.name && d.key == s.key) return &d;
    return nullptr;
}

QVariant ReplicaDriftModel::stepCell(const ReplicaSeries& s, int64_t step, int role) const {
    auto it = std::find_if(s.steps.begin(), s.steps.end(),
                           [&](const auto& sample) { return sample.first == step; });
    if (it == s.steps.end()) return {};
    bool agrees = it->second;
    switch (role) {
        case Qt::DisplayRole:
            return agrees ? QStringLiteral("=") : QStringLiteral("\u2260");
        case Qt::BackgroundRole:
            return agrees ? kAgrees.lighter(170) : kDiffers.lighter(150);
        case Qt::TextAlignmentRole:
            return int(Qt::AlignCenter);
        case Qt::ToolTipRole:
            return QString("step %1: %2")
                .arg(step)
                .arg(agrees ? "equal on every rank"
                     : step == s.firstDiffering
                         ? "differs: ranks " + QString::fromStdString(formatRankGroups(s.groups))
                         : "differs");
        case AgreesRole:
            return agrees;
    }
    return {};
}

QVariant ReplicaDriftModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || !m_analysis || index.row() >= rowCount()) return {};
    const ReplicaSeries& s = *m_rows[size_t(index.row())];
    bool drifting = s.firstDiffering >= 0;
    if (role == DriftingRole) return drifting;
    if (index.column() >= FirstStepColumn) {
        size_t i = size_t(index.column() - FirstStepColumn);
        return stepCell(s, m_analysis->replicas.steps[i], role);
    }
    switch (role) {
        case Qt::DisplayRole:
            switch (Column(index.column())) {
                case Name:
                    return QString::fromStdString(s.name);
                case Role:
                    return QString::fromStdString(s.role);
                case Key:
                    return s.key.empty() ? QStringLiteral("every rank")
                                         : QString::fromStdString(s.key);
                case Ranks:
                    return ranksText(s.ranks);
                case FirstDiffers:
                    return drifting ? QVariant(qlonglong(s.firstDiffering)) : QVariant("-");
                default:
                    return {};
            }
        case Qt::ForegroundRole:
            return drifting && index.column() == Name ? QVariant(kDiffers) : QVariant();
        case Qt::ToolTipRole: {
            const ReplicaDrift* d = drifting ? driftOf(s) : nullptr;
            if (!d)
                return QString::fromStdString(s.placements +
                                              (s.module.empty() ? "" : " (" + s.module + ")"));
            return QString::fromStdString(s.placements + "\n" + d->causeText +
                                          "\nfix: " + d->fix.summary + "\n  " + d->fix.code);
        }
    }
    return {};
}

QVariant ReplicaDriftModel::headerData(int section, Qt::Orientation orientation, int role) const {
    static const char* kTitles[FirstStepColumn] = {"Tensor", "Role", "Replica", "Ranks",
                                                   "First differs"};
    if (orientation != Qt::Horizontal || section < 0 || section >= columnCount() ||
        (role != Qt::DisplayRole && role != Qt::ToolTipRole))
        return QAbstractTableModel::headerData(section, orientation, role);
    if (section < FirstStepColumn) return role == Qt::DisplayRole ? QString(kTitles[section]) : "";
    int64_t step = m_analysis->replicas.steps[size_t(section - FirstStepColumn)];
    // the step's number only: many narrow columns fit beside the names
    return role == Qt::DisplayRole ? QString::number(step) : QString("step %1").arg(step);
}

}  // namespace meshscope::ui
