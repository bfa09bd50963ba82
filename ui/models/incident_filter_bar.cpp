#include "ui/models/incident_filter_bar.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QIntValidator>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <limits>

#include "core/analysis/fix_suggestion.h"
#include "ui/models/incident_filter_model.h"

namespace meshscope::ui {

namespace {

QLineEdit* lineEdit(QWidget* parent, const char* name, const QString& placeholder, int width) {
    auto* e = new QLineEdit(parent);
    e->setObjectName(name);
    e->setPlaceholderText(placeholder);
    e->setClearButtonEnabled(true);
    e->setMaximumWidth(width);
    return e;
}

std::optional<int64_t> number(const QLineEdit* e) {
    bool ok = false;
    qlonglong v = e->text().toLongLong(&ok);
    return ok ? std::optional<int64_t>(v) : std::nullopt;
}

}  // namespace

IncidentFilterBar::IncidentFilterBar(IncidentFilterModel* model, QWidget* parent)
    : QWidget(parent), m_model(model) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_rank = new QComboBox(this);
    m_rank->setObjectName("rankFilter");
    m_rank->addItem("all ranks");
    m_stepFrom = lineEdit(this, "stepFrom", "step from", 80);
    m_stepTo = lineEdit(this, "stepTo", "step to", 80);
    for (QLineEdit* e : {m_stepFrom, m_stepTo})
        e->setValidator(new QIntValidator(-1, std::numeric_limits<int>::max(), e));
    m_op = lineEdit(this, "opFilter", "op", 160);
    m_origin = new QComboBox(this);
    m_origin->setObjectName("originFilter");
    m_origin->addItem("all origins");
    for (char c = 'A'; c <= 'G'; ++c) {
        auto origin = *originFromChar(c);
        m_origin->addItem(QStringLiteral("%1 \u2014 %2")
                              .arg(QChar(c))
                              .arg(QString::fromUtf8(describeOrigin(origin).data())),
                          int(c));
    }
    m_action = new QComboBox(this);
    m_action->setObjectName("actionFilter");
    m_action->addItem("all actions");
    for (Action a : {Action::Observed, Action::Replicated, Action::ShardedFromLocal,
                     Action::Scalarized, Action::StrictError})
        m_action->addItem(QString::fromUtf8(toString(a).data()), int(a));
    m_file = lineEdit(this, "fileFilter", "file", 160);
    m_text = lineEdit(this, "textFilter", "search all columns", 220);
    auto* clearButton = new QPushButton("Clear", this);
    clearButton->setObjectName("clearFilters");
    for (QWidget* w : std::initializer_list<QWidget*>{m_rank, m_stepFrom, m_stepTo, m_op, m_origin,
                                                      m_action, m_file, m_text, clearButton})
        layout->addWidget(w);
    layout->addStretch(1);
    for (QComboBox* c : {m_rank, m_origin, m_action})
        connect(c, &QComboBox::currentIndexChanged, this, &IncidentFilterBar::apply);
    for (QLineEdit* e : {m_stepFrom, m_stepTo, m_op, m_file, m_text})
        connect(e, &QLineEdit::textChanged, this, &IncidentFilterBar::apply);
    connect(clearButton, &QPushButton::clicked, this, &IncidentFilterBar::clear);
}

void IncidentFilterBar::setRanks(const std::vector<int>& ranks) {
    m_applying = true;
    m_rank->clear();
    m_rank->addItem("all ranks");
    for (int r : ranks)
        m_rank->addItem(QStringLiteral("rank %1").arg(r), r);
    m_applying = false;
    apply();
}

void IncidentFilterBar::clear() {
    m_applying = true;
    for (QComboBox* c : {m_rank, m_origin, m_action})
        c->setCurrentIndex(0);
    for (QLineEdit* e : {m_stepFrom, m_stepTo, m_op, m_file, m_text})
        e->clear();
    m_applying = false;
    apply();
}

void IncidentFilterBar::apply() {
    if (m_applying) return;
    QVariant rank = m_rank->currentData(), origin = m_origin->currentData(),
             action = m_action->currentData();
    m_model->setRank(rank.isValid() ? std::optional<int>(rank.toInt()) : std::nullopt);
    m_model->setStepRange(number(m_stepFrom), number(m_stepTo));
    m_model->setOpFilter(m_op->text());
    m_model->setOrigin(origin.isValid() ? originFromChar(char(origin.toInt())) : std::nullopt);
    m_model->setAction(action.isValid() ? std::optional<Action>(Action(action.toInt()))
                                        : std::nullopt);
    m_model->setFileFilter(m_file->text());
    m_model->setText(m_text->text());
}

}  // namespace meshscope::ui
