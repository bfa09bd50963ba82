#include "ui/models/incident_filter_bar.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QIntValidator>
#include <QLineEdit>
#include <QPushButton>
#include <limits>

#include "core/analysis/fix_suggestion.h"
#include "ui/models/incident_filter_model.h"

namespace meshscope::ui {

namespace {

QString qs(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

QLineEdit* lineEdit(QWidget* parent, const char* name, const QString& placeholder, int width) {
    auto* e = new QLineEdit(parent);
    e->setObjectName(name);
    e->setPlaceholderText(placeholder);
    e->setClearButtonEnabled(true);
    e->setMaximumWidth(width);
    return e;
}

QComboBox* comboBox(QWidget* parent, const char* name, const QString& all) {
    auto* c = new QComboBox(parent);
    c->setObjectName(name);
    c->addItem(all);  // no item data: "no filter"
    return c;
}

// Empty (or a lone "-" while typing) is an open end.
std::optional<int64_t> number(const QLineEdit* e) {
    bool ok = false;
    qlonglong v = e->text().toLongLong(&ok);
    return ok ? std::optional<int64_t>(v) : std::nullopt;
}

constexpr Action kActions[] = {Action::Observed, Action::Replicated, Action::ShardedFromLocal,
                               Action::Scalarized, Action::StrictError};

}  // namespace

IncidentFilterBar::IncidentFilterBar(IncidentFilterModel* model, QWidget* parent)
    : QWidget(parent), m_model(model) {
    m_rank = comboBox(this, "rankFilter", "all ranks");
    m_stepFrom = lineEdit(this, "stepFrom", "step from", 80);
    m_stepTo = lineEdit(this, "stepTo", "step to", 80);
    // -1 is the step of incidents recorded before the first optimizer step.
    for (QLineEdit* e : {m_stepFrom, m_stepTo})
        e->setValidator(new QIntValidator(-1, std::numeric_limits<int>::max(), e));
    m_op = lineEdit(this, "opFilter", "op", 160);
    m_kind = comboBox(this, "kindFilter", "all kinds");
    for (const IncidentKindInfo& k : kIncidentKinds) {
        m_kind->addItem(qs(k.tag), int(k.kind));
        m_kind->setItemData(m_kind->count() - 1, qs(k.title), Qt::ToolTipRole);
    }
    m_origin = comboBox(this, "originFilter", "all origins");
    for (const OriginInfo& o : kOrigins)
        m_origin->addItem(
            QStringLiteral("%1 \u2014 %2").arg(QChar(originLetter(o.origin)), qs(o.description)),
            int(originLetter(o.origin)));
    m_action = comboBox(this, "actionFilter", "all actions");
    for (Action a : kActions)
        m_action->addItem(qs(toString(a)), int(a));
    m_file = lineEdit(this, "fileFilter", "file", 160);
    m_text = lineEdit(this, "textFilter", "search all columns", 220);
    auto* clearButton = new QPushButton("Clear", this);
    clearButton->setObjectName("clearFilters");

    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_rank, m_stepFrom, m_stepTo, m_op, m_kind, m_origin,
                                         m_action, m_file, m_text, clearButton})
        layout->addWidget(w);
    layout->addStretch(1);

    connect(m_rank, &QComboBox::currentIndexChanged, this, &IncidentFilterBar::applyRank);
    connect(m_kind, &QComboBox::currentIndexChanged, this, &IncidentFilterBar::applyKind);
    connect(m_origin, &QComboBox::currentIndexChanged, this, &IncidentFilterBar::applyOrigin);
    connect(m_action, &QComboBox::currentIndexChanged, this, &IncidentFilterBar::applyAction);
    for (QLineEdit* e : {m_stepFrom, m_stepTo})
        connect(e, &QLineEdit::textChanged, this, &IncidentFilterBar::applySteps);
    connect(m_op, &QLineEdit::textChanged, this, [this](const QString& text) {
        if (!m_resetting) m_model->setOpFilter(text);
    });
    connect(m_file, &QLineEdit::textChanged, this, [this](const QString& text) {
        if (!m_resetting) m_model->setFileFilter(text);
    });
    connect(m_text, &QLineEdit::textChanged, this, [this](const QString& text) {
        if (!m_resetting) m_model->setText(text);
    });
    connect(clearButton, &QPushButton::clicked, this, &IncidentFilterBar::clear);
}

void IncidentFilterBar::setRanks(const std::vector<int>& ranks) {
    QVariant chosen = m_rank->currentData();
    m_resetting = true;
    m_rank->clear();
    m_rank->addItem("all ranks");
    for (int r : ranks)
        m_rank->addItem(QStringLiteral("rank %1").arg(r), r);
    int keep = chosen.isValid() ? m_rank->findData(chosen) : -1;
    m_rank->setCurrentIndex(keep < 0 ? 0 : keep);
    m_resetting = false;
    applyRank();
}

void IncidentFilterBar::clear() {
    m_resetting = true;
    for (QComboBox* c : {m_rank, m_kind, m_origin, m_action})
        c->setCurrentIndex(0);
    for (QLineEdit* e : {m_stepFrom, m_stepTo, m_op, m_file, m_text})
        e->clear();
    m_resetting = false;
    m_model->clearFilters();
}

void IncidentFilterBar::applyRank() {
    if (m_resetting) return;
    QVariant rank = m_rank->currentData();
    m_model->setRank(rank.isValid() ? std::optional<int>(rank.toInt()) : std::nullopt);
}

void IncidentFilterBar::applySteps() {
    if (!m_resetting) m_model->setStepRange(number(m_stepFrom), number(m_stepTo));
}

void IncidentFilterBar::applyOrigin() {
    if (m_resetting) return;
    QVariant origin = m_origin->currentData();
    m_model->setOrigin(origin.isValid() ? originFromChar(char(origin.toInt())) : std::nullopt);
}

void IncidentFilterBar::applyAction() {
    if (m_resetting) return;
    QVariant action = m_action->currentData();
    m_model->setAction(action.isValid() ? std::optional<Action>(Action(action.toInt()))
                                        : std::nullopt);
}

void IncidentFilterBar::applyKind() {
    if (m_resetting) return;
    QVariant kind = m_kind->currentData();
    m_model->setKind(kind.isValid() ? incidentKindFromIndex(kind.toInt()) : std::nullopt);
}

}  // namespace meshscope::ui
