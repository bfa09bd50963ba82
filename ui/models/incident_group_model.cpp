#include "ui/models/incident_group_model.h"

#include <QColor>
#include <QString>

#include "core/analysis/fix_suggestion.h"

namespace meshscope::ui {
namespace {

QString qs(const std::string& text) {
    return QString::fromStdString(text);
}

// "origin D" for a mixed tensor, the kind's tag ("no strategy", "hang") else.
QString what(const IncidentGroup& g) {
    return g.kind == IncidentKind::MixedTensor
               ? QStringLiteral("origin %1").arg(QChar(char(g.origin)))
               : qs(std::string(incidentKindInfo(g.kind).tag));
}

// "replicated 24, 2 unreconciled"
QString handled(const IncidentGroup& g) {
    QString text = qs(formatActions(g));
    if (g.unreconciled)
        text +=
            (text.isEmpty() ? "" : ", ") + QStringLiteral("%1 unreconciled").arg(g.unreconciled);
    return text;
}

QString ranks(const IncidentGroup& g) {
    QString text;
    for (const auto& [rank, n] : g.perRank)
        text += (text.isEmpty() ? "" : ", ") + QString::number(rank);
    return text;
}

}  // namespace

IncidentGroupModel::IncidentGroupModel(QObject* parent) : QAbstractTableModel(parent) {}

void IncidentGroupModel::setAnalysis(std::shared_ptr<const RunAnalysis> analysis) {
    beginResetModel();
    m_analysis = std::move(analysis);
    endResetModel();
}

int IncidentGroupModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || !m_analysis ? 0 : int(m_analysis->groups.size());
}

int IncidentGroupModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant IncidentGroupModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || !m_analysis || index.row() >= rowCount()) return {};
    const IncidentGroup& g = m_analysis->groups[size_t(index.row())];
    switch (role) {
        case Qt::DisplayRole:
            switch (Column(index.column())) {
                case Count:
                    return qlonglong(g.count);
                case Site:
                    return qs(formatLocation(g.site));
                case Op:
                    return qs(g.op);
                case What:
                    return what(g);
                case Ranks:
                    return ranks(g);
                case Handled:
                    return handled(g);
                case Fix:
                    return qs(g.fix.summary);
                case ColumnCount:
                    break;
            }
            return {};
        case Qt::ToolTipRole:
            if (index.column() == Fix)
                return qs(g.fix.summary + (g.fix.code.empty() ? "" : "\n" + g.fix.code));
            if (index.column() == What && g.kind == IncidentKind::MixedTensor)
                return qs(std::string(describeOrigin(g.origin)));
            return {};
        case Qt::ForegroundRole:  // what is left to fix stands out, as in the incidents table
            return index.column() == Handled && g.unreconciled
                       ? QVariant(QColor(QRgb(incidentKindInfo(g.kind).rgb)))
                       : QVariant();
        case Qt::TextAlignmentRole:
            return index.column() == Count ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                           : QVariant();
        case RankRole:
            return g.example.rank;
        case SeqRole:
            return qint64(g.example.seq.value());
        case GroupRole:
            return g.id;
    }
    return {};
}

QVariant IncidentGroupModel::headerData(int section, Qt::Orientation orientation, int role) const {
    static const char* kTitles[ColumnCount] = {"Count", "Call site", "Op", "Origin / kind",
                                               "Ranks", "Handled",   "Fix"};
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 ||
        section >= ColumnCount)
        return QAbstractTableModel::headerData(section, orientation, role);
    return QString(kTitles[section]);
}

}  // namespace meshscope::ui
