#pragma once

// Filters and sorts the incidents table: by rank, step range, op, incident
// kind, origin class, action, call-site file and free text, all combinable.

#include <QSortFilterProxyModel>
#include <optional>

#include "core/store/records.h"

namespace meshscope::ui {

class IncidentFilterModel : public QSortFilterProxyModel {
    Q_OBJECT
  public:
    explicit IncidentFilterModel(QObject* parent = nullptr);

    void setRank(std::optional<int> rank);
    void setStepRange(std::optional<int64_t> from, std::optional<int64_t> to);
    void setOpFilter(const QString& text);  // case-insensitive substring of the op
    void setOrigin(std::optional<OriginClass> origin);
    void setAction(std::optional<Action> action);
    void setKind(std::optional<IncidentKind> kind);
    void setFileFilter(const QString& text);  // case-insensitive substring of the call-site file
    void setText(const QString& text);        // substring of any column
    void clearFilters();

  protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

  private:
    bool matchesText(int sourceRow, const QModelIndex& parent) const;

    std::optional<int> m_rank;
    std::optional<int64_t> m_stepFrom, m_stepTo;
    QString m_op, m_file, m_text;
    std::optional<OriginClass> m_origin;
    std::optional<Action> m_action;
    std::optional<IncidentKind> m_kind;
};

}  // namespace meshscope::ui
