#include "ui/inspector/inspector_widget.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "core/analysis/fix_suggestion.h"
#include "ui/inspector/mesh_view.h"
#include "ui/inspector/op_detail.h"

namespace meshscope::ui {

namespace {

QString esc(const std::string& s) {
    return QString::fromStdString(s).toHtmlEscaped();
}
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
QString qs(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

// Builds the same content twice: HTML for the browser, text for Copy.
class Doc {
  public:
    void heading(const QString& text) {
        m_html += "<h3>" + text.toHtmlEscaped() + "</h3>";
        m_plain += "\n" + text + "\n";
    }
    void line(const QString& htmlLine, const QString& plainLine) {
        m_html += "<div>" + htmlLine + "</div>";
        m_plain += plainLine + "\n";
    }
    void field(const QString& key, const QString& value) {
        line("<b>" + key.toHtmlEscaped() + ":</b> " + value.toHtmlEscaped(), key + ": " + value);
    }
    void pre(const QString& text) {
        m_html += "<pre>" + text.toHtmlEscaped() + "</pre>";
        m_plain += text + "\n";
    }
    void table(const QStringList& header, const std::vector<QStringList>& rows) {
        m_html += "<table border=1 cellspacing=0 cellpadding=3><tr>";
        for (const QString& h : header)
            m_html += "<th>" + h.toHtmlEscaped() + "</th>";
        m_html += "</tr>";
        m_plain += header.join(" | ") + "\n";
        for (const QStringList& row : rows) {
            m_html += "<tr>";
            for (const QString& c : row)
                m_html += "<td>" + c.toHtmlEscaped() + "</td>";
            m_html += "</tr>";
            m_plain += row.join(" | ") + "\n";
        }
        m_html += "</table>";
    }
    QString html() const { return m_html; }
    QString plain() const { return m_plain.trimmed() + "\n"; }

  private:
    QString m_html, m_plain;
};

void operandTable(Doc& doc, const std::vector<OperandDetail>& operands) {
    std::vector<QStringList> rows;
    for (const OperandDetail& o : operands) {
        QString kind = o.scalar               ? QStringLiteral("scalar %1").arg(o.scalarValue)
                       : o.plain              ? "PLAIN tensor"
                       : o.placements.empty() ? "tensor"
                                              : "DTensor";
        rows.push_back({QString::number(o.index), o.output ? "out" : "in", kind, qs(o.dtype),
                        qs(o.shape), qs(o.localShape), qs(o.placements), qs(o.label)});
    }
    doc.table({"#", "role", "kind", "dtype", "global shape", "local shape", "placements", "label"},
              rows);
}

void stackSection(Doc& doc, const std::vector<SourceFrame>& stack) {
    if (stack.empty()) return;
    doc.heading("Stack (innermost first)");
    QString text;
    for (const SourceFrame& f : stack)
        text += qs(formatLocation(f)) + "  " + qs(f.function) + "\n";
    doc.pre(text.trimmed());
}

QString verdictText(Verdict v) {
    switch (v) {
        case Verdict::Verified:
            return "verified: the same content on every rank that promoted it";
        case Verdict::Invalid:
            return "INVALID: ranks promoted different content as if it were replicated";
        case Verdict::Unverified:
            return "unverified: only one rank recorded it, or no fingerprint";
        case Verdict::NotChecked:
            break;
    }
    return "not checked (not a promotion that must agree across ranks)";
}

void crossRankSection(Doc& doc, const IncidentRef* ref, const PromotionCheck* check) {
    doc.heading("Cross-rank check");
    doc.field("verdict", ref ? verdictText(ref->verdict) : "analysis not ready yet");
    if (!check) return;
    std::vector<QStringList> rows;
    for (const auto& [rank, fp] : check->fingerprints)
        rows.push_back({QString::number(rank),
                        fp ? QStringLiteral("%1").arg(qulonglong(*fp), 16, 16, QChar('0'))
                           : QStringLiteral("(none)")});
    doc.table({"rank", "fingerprint"}, rows);
}

}  // namespace

InspectorWidget::InspectorWidget(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel("Selection", this), 1);
    m_copy = new QPushButton("Copy", this);
    m_copy->setObjectName("copyButton");
    m_copy->setToolTip("Copy everything shown here as plain text");
    top->addWidget(m_copy);
    layout->addLayout(top);
    auto* split = new QSplitter(Qt::Vertical, this);
    m_mesh = new MeshView(this);
    m_mesh->setObjectName("meshView");
    auto* scroll = new QScrollArea(this);
    scroll->setObjectName("meshScroll");
    scroll->setWidget(m_mesh);
    scroll->setWidgetResizable(true);
    split->addWidget(scroll);
    m_text = new QTextBrowser(this);
    m_text->setObjectName("inspectorText");
    m_text->setOpenLinks(false);
    split->addWidget(m_text);
    split->setStretchFactor(1, 2);
    layout->addWidget(split, 1);
    connect(m_copy, &QPushButton::clicked, this,
            [this] { QApplication::clipboard()->setText(m_plain); });
    clear();
}

void InspectorWidget::setContent(const QString& html, const QString& plain) {
    // Room for the whole mesh drawing when it is small, a scroll bar when not.
    if (auto* scroll = findChild<QScrollArea*>("meshScroll"))
        scroll->setMinimumHeight(std::min(m_mesh->sizeHint().height() + 6, 340));
    m_html = html;
    m_plain = plain;
    m_text->setHtml(html);
    m_copy->setEnabled(!plain.trimmed().isEmpty());
}

void InspectorWidget::showIncident(const IncidentDetail& d, const IncidentRef* ref,
                                   const IncidentGroup* group, const PromotionCheck* check,
                                   const std::string& evidence) {
    m_mesh->setIncident(d);
    Doc doc;
    doc.heading(
        QStringLiteral("Incident #%1 on rank %2: %3").arg(d.seq.value()).arg(d.rank).arg(qs(d.op)));
    doc.field("step", QString::number(d.step));
    doc.field("action", qs(toString(d.action)));
    doc.field("outcome", qs(toString(d.outcome)));
    if (!d.policyRule.empty()) doc.field("policy rule", qs(d.policyRule));
    doc.heading("Operands");
    operandTable(doc, d.operands);
    doc.heading("Reconciliation");
    const OperandDetail* plain = nullptr;
    for (const OperandDetail& o : d.operands)
        if (o.plain) plain = &o;
    QString who = plain ? QStringLiteral("operand %1 (%2 %3)")
                              .arg(plain->index)
                              .arg(qs(plain->dtype), qs(plain->shape))
                        : QStringLiteral("the plain operand");
    if (d.outcome == Outcome::Reconciled)
        doc.field("before -> after",
                  QStringLiteral("%1: plain torch.Tensor (no placement) -> DTensor %2")
                      .arg(who, qs(d.promotedPlacements)));
    else
        doc.field("raised",
                  who + ": " +
                      (d.error.empty() ? QStringLiteral("no error text recorded") : qs(d.error)));
    if (d.fingerprint)
        doc.field("fingerprint here",
                  QStringLiteral("%1").arg(qulonglong(*d.fingerprint), 16, 16, QChar('0')));
    crossRankSection(doc, ref, check);
    doc.heading("Origin");
    doc.field(
        "class",
        QStringLiteral("%1 - %2").arg(QChar(char(d.origin))).arg(qs(describeOrigin(d.origin))));
    doc.field("evidence", qs(evidence.empty() ? d.evidence : evidence));
    if (!d.createdAt.empty()) doc.field("plain tensor created at", qs(d.createdAt));
    stackSection(doc, d.stack);
    FixSuggestion fix = group ? group->fix : suggestFix(d.origin);
    doc.heading("Fix");
    doc.line(esc(fix.summary), qs(fix.summary));
    doc.pre(qs(fix.code));
    setContent(doc.html(), doc.plain());
}

void InspectorWidget::showOp(const OpDetail& op, const IncidentDetail* reconciled) {
    m_mesh->setOp(op);
    Doc doc;
    doc.heading(
        QStringLiteral("Op #%1 on rank %2: %3").arg(op.seq.value()).arg(op.rank).arg(qs(op.name)));
    doc.field("thread", op.threadName.empty() ? QString::number(op.thread) : qs(op.threadName));
    doc.field("step", QString::number(op.step));
    doc.field("phase", qs(toString(op.phase)));
    doc.field("duration",
              QStringLiteral("%1 us").arg(double(op.endNs - op.startNs) / 1e3, 0, 'f', 2));
    doc.field("nesting depth", QString::number(op.depth));
    if (reconciled) {
        const OperandDetail* plain = nullptr;
        for (const OperandDetail& o : reconciled->operands)
            if (o.plain) plain = &o;
        doc.heading("Promoted op");
        doc.field("reconciled", QStringLiteral("incident #%1 (%2): %3 became %4")
                                    .arg(reconciled->seq.value())
                                    .arg(qs(reconciled->op))
                                    .arg(plain ? QStringLiteral("plain operand %1 %2")
                                                     .arg(plain->index)
                                                     .arg(qs(plain->shape))
                                               : QStringLiteral("the plain operand"))
                                    .arg(qs(reconciled->promotedPlacements)));
    }
    doc.heading("Operands");
    operandTable(doc, op.operands);
    stackSection(doc, op.stack);
    setContent(doc.html(), doc.plain());
}

void InspectorWidget::showMessage(const QString& message) {
    m_mesh->clear();
    setContent("<p>" + message.toHtmlEscaped() + "</p>", message);
}

void InspectorWidget::clear() {
    m_mesh->clear();
    setContent(
        "<p style='color:#777'>Select an incident in the table or the timeline, or step the "
        "replay (N, period).</p>",
        QString());
}

}  // namespace meshscope::ui
