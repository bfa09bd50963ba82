#include "ui/models/incident_filter_model.h"

#include "ui/models/incident_table_model.h"

namespace meshscope::ui {

using M = IncidentTableModel;

IncidentFilterModel::IncidentFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {
    setSortRole(M::SortRole);
    setDynamicSortFilter(true);
}

// Each setter returns early on an unchanged value: the filter bar re-applies
// fields (setRanks after a live reload) and every invalidate re-filters every row.
void IncidentFilterModel::setRank(std::optional<int> rank) {
    if (rank == m_rank) return;
    m_rank = rank;
    invalidateFilter();
}

void IncidentFilterModel::setStepRange(std::optional<int64_t> from, std::optional<int64_t> to) {
    if (from == m_stepFrom && to == m_stepTo) return;
    m_stepFrom = from;
    m_stepTo = to;
    invalidateFilter();
}

void IncidentFilterModel::setOpFilter(const QString& text) {
    if (text.trimmed() == m_op) return;
    m_op = text.trimmed();
    invalidateFilter();
}

void IncidentFilterModel::setOrigin(std::optional<OriginClass> origin) {
    if (origin == m_origin) return;
    m_origin = origin;
    invalidateFilter();
}

void IncidentFilterModel::setAction(std::optional<Action> action) {
    if (action == m_action) return;
    m_action = action;
    invalidateFilter();
}

void IncidentFilterModel::setKind(std::optional<IncidentKind> kind) {
    if (kind == m_kind) return;
    m_kind = kind;
    invalidateFilter();
}

void IncidentFilterModel::setFileFilter(const QString& text) {
    if (text.trimmed() == m_file) return;
    m_file = text.trimmed();
    invalidateFilter();
}

void IncidentFilterModel::setText(const QString& text) {
    if (text.trimmed() == m_text) return;
    m_text = text.trimmed();
    invalidateFilter();
}

void IncidentFilterModel::clearFilters() {
    m_rank.reset();
    m_stepFrom.reset();
    m_stepTo.reset();
    m_op.clear();
    m_file.clear();
    m_text.clear();
    m_origin.reset();
    m_action.reset();
    m_kind.reset();
    invalidateFilter();
}

bool IncidentFilterModel::matchesText(int sourceRow, const QModelIndex& parent) const {
    for (int c = 0; c < M::ColumnCount; ++c) {
        QString cell = sourceModel()->index(sourceRow, c, parent).data().toString();
        if (cell.contains(m_text, Qt::CaseInsensitive)) return true;
    }
    return false;
}

bool IncidentFilterModel::filterAcceptsRow(int sourceRow, const QModelIndex& parent) const {
    QModelIndex i = sourceModel()->index(sourceRow, 0, parent);
    if (m_rank && i.data(M::RankRole).toInt() != *m_rank) return false;
    qint64 step = i.data(M::StepRole).toLongLong();
    if (m_stepFrom && step < *m_stepFrom) return false;
    if (m_stepTo && step > *m_stepTo) return false;
    if (m_origin && i.data(M::OriginRole).toInt() != int(char(*m_origin))) return false;
    if (m_action && i.data(M::ActionRole).toInt() != int(*m_action)) return false;
    if (m_kind && i.data(M::KindRole).toInt() != int(*m_kind)) return false;
    if (!m_op.isEmpty() && !i.data(M::OpRole).toString().contains(m_op, Qt::CaseInsensitive))
        return false;
    if (!m_file.isEmpty() && !i.data(M::FileRole).toString().contains(m_file, Qt::CaseInsensitive))
        return false;
    return m_text.isEmpty() || matchesText(sourceRow, parent);
}

}  // namespace meshscope::ui
