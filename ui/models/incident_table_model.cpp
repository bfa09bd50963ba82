#include "ui/models/incident_table_model.h"

#include <QColor>
#include <QPixmap>

#include "core/analysis/fix_suggestion.h"
#include "core/analysis/incident_explanation.h"

namespace meshscope::ui {

namespace {

QColor stateColor(IncidentState state) {
    return QColor(QRgb(incidentStateInfo(state).rgb));
}

QColor kindColor(IncidentKind kind) {
    return QColor(QRgb(incidentKindInfo(kind).rgb));
}

QIcon squareIcon(const QColor& color) {
    QPixmap pixmap(12, 12);
    pixmap.fill(color);
    return QIcon(pixmap);
}

QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
QString qs(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

}  // namespace

IncidentTableModel::IncidentTableModel(QObject* parent) : QAbstractTableModel(parent) {
    for (const IncidentStateInfo& state : kIncidentStates)
        m_cues[size_t(state.kind)] = squareIcon(stateColor(state.kind));
    for (const IncidentKindInfo& kind : kIncidentKinds)
        m_kindCues[size_t(kind.kind)] = squareIcon(kindColor(kind.kind));
}

void IncidentTableModel::setAnalysis(std::shared_ptr<const RunAnalysis> analysis) {
    beginResetModel();
    m_analysis = std::move(analysis);
    m_rows.clear();
    if (m_analysis)
        for (size_t i = 0; i < m_analysis->incidents.size(); ++i) {
            const IncidentRef& ref = m_analysis->incidents[i];
            m_rows.insert({ref.rank, ref.seq.value()}, int(i));
        }
    endResetModel();
}

QModelIndex IncidentTableModel::indexOf(int rank, int64_t seq) const {
    auto it = m_rows.constFind({rank, seq});
    return it == m_rows.constEnd() ? QModelIndex() : index(*it, 0);
}

int IncidentTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || !m_analysis ? 0 : int(m_analysis->incidents.size());
}

int IncidentTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

const IncidentGroup* IncidentTableModel::groupOf(const IncidentRef& ref) const {
    if (ref.group < 0 || size_t(ref.group) >= m_analysis->groups.size()) return nullptr;
    return &m_analysis->groups[size_t(ref.group)];
}

QVariant IncidentTableModel::display(const IncidentRef& ref, int column) const {
    const IncidentGroup* g = groupOf(ref);
    switch (column) {
        case Rank:
            return ref.rank;
        case Step:
            return qint64(ref.step);
        case TimeMs:
            return QString::number(double(ref.timeNs) / 1e6, 'f', 3);
        case Op:
            return g ? qs(g->op) : QString();
        case Kind:
            return qs(incidentKindInfo(ref.kind).tag);
        case Origin:  // only a mixed tensor has an origin class
            return g && ref.kind == IncidentKind::MixedTensor
                       ? QStringLiteral("%1 \u2014 %2")
                             .arg(QChar(char(g->origin)), qs(describeOrigin(g->origin)))
                       : QString();
        case Action:
            return qs(toString(ref.action));
        case Outcome:
            return qs(toString(ref.outcome));
        case Verdict:
            return ref.verdict == meshscope::Verdict::NotChecked ? QString()
                                                                 : qs(toString(ref.verdict));
        case Location:
            return g ? qs(formatLocation(g->site)) : QString();
        case Evidence:
            return ref.evidence < m_analysis->evidenceTexts.size()
                       ? qs(m_analysis->evidenceTexts[ref.evidence])
                       : QString();
    }
    return {};
}

QVariant IncidentTableModel::sortValue(const IncidentRef& ref, int column) const {
    switch (column) {
        case Rank:
            return ref.rank;
        case Step:
            return qint64(ref.step);
        case TimeMs:
            return qint64(ref.timeNs);
        default:
            return display(ref, column);
    }
}

QVariant IncidentTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || !m_analysis || index.row() >= rowCount()) return {};
    const IncidentRef& ref = m_analysis->incidents[size_t(index.row())];
    const IncidentGroup* g = groupOf(ref);
    switch (role) {
        case Qt::DisplayRole:
            return display(ref, index.column());
        case Qt::ToolTipRole:
            if (index.column() == Kind) return qs(incidentKindInfo(ref.kind).title);
            return index.column() == Evidence || index.column() == Location
                       ? display(ref, index.column())
                       : QVariant();
        case Qt::DecorationRole:
            if (index.column() == Kind && ref.kind != IncidentKind::MixedTensor &&
                size_t(ref.kind) < m_kindCues.size())
                return m_kindCues[size_t(ref.kind)];
            return index.column() == Action
                       ? QVariant(m_cues[size_t(incidentState(ref.outcome, ref.verdict))])
                       : QVariant();
        case Qt::ForegroundRole:
            // Only the columns the cue is about: most incidents of an
            // observe-only run are raised, and a wholly red table says nothing.
            return index.column() == Outcome || index.column() == Verdict
                       ? QVariant(stateColor(incidentState(ref.outcome, ref.verdict)))
                       : QVariant();
        case Qt::TextAlignmentRole:
            return index.column() <= TimeMs ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                            : QVariant();
        case RankRole:
            return ref.rank;
        case SeqRole:
            return qint64(ref.seq.value());
        case IncidentIndexRole:
            return index.row();
        case SortRole:
            return sortValue(ref, index.column());
        case OriginRole:
            return g && ref.kind == IncidentKind::MixedTensor ? QVariant(int(char(g->origin)))
                                                              : QVariant();
        case ActionRole:
            return int(ref.action);
        case FileRole:
            return g ? qs(g->site.file) : QString();
        case StepRole:
            return qint64(ref.step);
        case OpRole:
            return g ? qs(g->op) : QString();
        case KindRole:
            return int(ref.kind);
    }
    return {};
}

QVariant IncidentTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    static const char* kTitles[ColumnCount] = {"Rank",       "Step",      "Time (ms)", "Op",
                                               "Kind",       "Origin",    "Action",    "Outcome",
                                               "Cross-rank", "Call site", "Evidence"};
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 ||
        section >= ColumnCount)
        return QAbstractTableModel::headerData(section, orientation, role);
    return QString(kTitles[section]);
}

}  // namespace meshscope::ui
