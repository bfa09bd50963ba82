#include "ui/inspector/inspector_widget.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QShowEvent>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <algorithm>
#include <map>

#include "core/analysis/incident_explanation.h"
#include "ui/inspector/mesh_view.h"
#include "ui/inspector/op_detail.h"

namespace meshscope::ui {

namespace {

// Recorded strings may hold any bytes: fromStdString() turns invalid UTF-8
// into U+FFFD, and everything is escaped where it meets HTML (Doc).
QString qs(const std::string& s) {
    return QString::fromStdString(s);
}
QString qs(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

// Text for the browser: a damaged file may hold strings of any length, and
// QTextDocument lays out a long unbreakable word in a table cell in seconds.
// Copy keeps the whole string.
QString clip(const QString& text, qsizetype longest = 2000) {
    if (text.size() <= longest) return text;
    return text.left(longest) +
           QStringLiteral("… (%1 more characters; Copy has them all)").arg(text.size() - longest);
}

QString hex(uint64_t value) {
    return QStringLiteral("%1").arg(qulonglong(value), 16, 16, QChar('0'));
}

// Builds the same content twice: HTML for the browser, text for Copy. Every
// argument is text; only Doc writes markup.
class Doc {
  public:
    void heading(const QString& text) {
        m_html += "<h3>" + clip(text).toHtmlEscaped() + "</h3>";
        m_plain += "\n" + text + "\n";
    }
    void line(const QString& text) {
        m_html += "<p>" + clip(text).toHtmlEscaped() + "</p>";
        m_plain += text + "\n";
    }
    void field(const QString& key, const QString& value) {
        m_html +=
            "<div><b>" + key.toHtmlEscaped() + ":</b> " + clip(value).toHtmlEscaped() + "</div>";
        m_plain += key + ": " + value + "\n";
    }
    // `longest`: a thread dump is many short lines, which lay out fast.
    void pre(const QString& text, qsizetype longest = 2000) {
        m_html += "<pre>" + clip(text, longest).toHtmlEscaped() + "</pre>";
        m_plain += text + "\n";
    }
    // Code a user copies (a fix): wrapped at the panel's width, never cut.
    void code(const QString& text) {
        m_html += "<pre style=\"white-space: pre-wrap\">" + text.toHtmlEscaped() + "</pre>";
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
                m_html += "<td>" + clip(c).toHtmlEscaped() + "</td>";
            m_html += "</tr>";
            m_plain += row.join(" | ") + "\n";
        }
        m_html += "</table>";
    }
    // The mesh drawing is already on screen; only Copy needs it as text.
    void plainOnly(const QString& heading, const QString& text) {
        if (!text.isEmpty()) m_plain += "\n" + heading + "\n" + text;
    }
    QString html() const { return m_html; }
    QString plain() const { return m_plain.trimmed() + "\n"; }

  private:
    QString m_html, m_plain;
};

QString operandKind(const OperandDetail& o) {
    if (o.scalar) return QStringLiteral("scalar %1").arg(o.scalarValue);
    if (o.plain) return "PLAIN tensor";
    return o.placements.empty() ? "tensor" : "DTensor";
}

void operandsSection(Doc& doc, const std::vector<OperandDetail>& operands) {
    doc.heading("Operands");
    std::vector<QStringList> rows;
    for (const OperandDetail& o : operands)
        rows.push_back({QString::number(o.index), o.output ? "out" : "in", operandKind(o),
                        qs(o.dtype), qs(o.shape), qs(o.localShape),
                        o.placements.empty() && !o.scalar ? "none" : qs(o.placements),
                        qs(o.label)});
    doc.table({"#", "role", "kind", "dtype", "global shape", "local shape", "placements", "label"},
              rows);
}

void stackSection(Doc& doc, const std::vector<SourceFrame>& stack) {
    doc.heading("Stack (innermost first)");
    if (stack.empty()) return doc.line("No user frame recorded.");
    QString text;
    for (const SourceFrame& f : stack)
        text += qs(formatLocation(f)) + "  " + qs(f.function) + "\n";
    doc.pre(text.trimmed());
}

void incidentHeader(Doc& doc, const IncidentDetail& d, const IncidentExplanation& e) {
    doc.heading(QStringLiteral("Incident #%1 on rank %2: ").arg(d.seq.value()).arg(d.rank) +
                qs(d.op));
    doc.line(qs(e.summary));
    doc.field("op", qs(d.op));
    doc.field("rank", QString::number(d.rank));
    doc.field("step", QString::number(d.step));
    doc.field("action", qs(toString(d.action)));
    doc.field("outcome", qs(toString(d.outcome)));
}

void reconciliationSection(Doc& doc, const IncidentDetail& d, const IncidentExplanation& e) {
    doc.heading("Reconciliation");
    doc.field("plain operand", qs(e.plainOperand));
    doc.field(qs(e.reconciliationLabel), qs(e.reconciliation));
    if (!e.policyRule.empty()) doc.field("policy rule", qs(e.policyRule));
    if (d.fingerprint) doc.field("fingerprint here", hex(*d.fingerprint));
}

// The fingerprint most ranks have (ties go to `here`'s): the others differ.
std::optional<uint64_t> majority(const PromotionCheck& check, int here) {
    std::map<uint64_t, int> count;
    for (const auto& [rank, fp] : check.fingerprints)
        if (fp) ++count[*fp];
    if (count.size() < 2) return std::nullopt;
    auto it = check.fingerprints.find(here);
    const bool hasMine = it != check.fingerprints.end() && it->second.has_value();
    const uint64_t mine = hasMine ? *it->second : 0;
    std::optional<uint64_t> best;
    int bestCount = 0;
    for (const auto& [fp, n] : count) {
        if (n > bestCount || (n == bestCount && hasMine && fp == mine)) {
            best = fp;
            bestCount = n;
        }
    }
    return best;
}

void crossRankSection(Doc& doc, const IncidentDetail& d, const IncidentExplanation& e,
                      const PromotionCheck* check) {
    doc.heading("Cross-rank check");
    if (e.verdict.empty())
        return doc.field("verdict", "not checked: no cross-rank analysis for this incident yet");
    doc.field("verdict", qs(e.verdict));
    if (!check) return;
    const std::optional<uint64_t> agreed = majority(*check, d.rank);
    std::vector<QStringList> rows;
    for (const auto& [rank, fp] : check->fingerprints) {
        QStringList notes;
        if (rank == d.rank) notes << "this incident";
        if (!fp)
            notes << "not recorded";
        else if (agreed && *fp != *agreed)
            notes << "DIFFERS";
        rows.push_back(
            {QString::number(rank), fp ? hex(*fp) : QStringLiteral("none"), notes.join(", ")});
    }
    doc.table({"rank", "fingerprint", "note"}, rows);
}

void originSection(Doc& doc, const IncidentExplanation& e) {
    doc.heading("Origin");
    doc.field("class", qs(e.origin));
    doc.field("evidence", qs(e.evidence));
    doc.field("plain tensor created at", qs(e.createdAt));
}

void fixSection(Doc& doc, const IncidentExplanation& e) {
    doc.heading("Fix");
    if (!e.fixScope.empty()) doc.field("applies to", qs(e.fixScope));
    doc.line(qs(e.fix.summary));
    if (!e.fix.code.empty()) doc.code(qs(e.fix.code));
    if (std::string where = describePlace(e.fix.place); !where.empty() && !e.fix.code.empty())
        doc.line(qs("Where: " + where));
    else if (!e.fix.place.unplaced.empty())
        doc.line(qs("Where it goes: " + e.fix.place.unplaced));
}

// ---- failures: no sharding strategy, DTensor errors, collective failures and hangs ----

void failureHeader(Doc& doc, const IncidentDetail& d, const IncidentExplanation& e) {
    doc.heading(QStringLiteral("Incident #%1 on rank %2: ").arg(d.seq.value()).arg(d.rank) +
                qs(d.op));
    doc.line(qs(e.summary));
    doc.field("kind", qs(e.kindTitle) + " (" + qs(incidentKindInfo(e.kind).tag) + ")");
    doc.field(isCollectiveKind(e.kind) ? "collective" : "op", qs(d.op));
    doc.field("rank", QString::number(d.rank));
    doc.field("step", QString::number(d.step));
}

void failureSection(Doc& doc, const IncidentExplanation& e) {
    doc.heading(qs(incidentKindInfo(e.kind).title));
    doc.field(isCollectiveKind(e.kind) ? "collective" : "evidence", qs(e.evidence));
    if (!e.placements.empty()) doc.field("placements", qs(e.placements));
    // A Python traceback keeps its lines; a one-line error reads as a field.
    if (e.reconciliation.find('\n') == std::string::npos)
        return doc.field(qs(e.reconciliationLabel), qs(e.reconciliation));
    doc.field(qs(e.reconciliationLabel), "(below)");
    doc.pre(qs(e.reconciliation));
}

// A hang's Python stacks of all the rank's threads, whole.
void threadStacksSection(Doc& doc, const IncidentExplanation& e) {
    if (e.detail.empty()) return;
    doc.heading("Python stacks of all threads");
    doc.pre(qs(e.detail), 200000);
}

void opHeader(Doc& doc, const OpDetail& op) {
    doc.heading(QStringLiteral("Op #%1 on rank %2: ").arg(op.seq.value()).arg(op.rank) +
                qs(op.name));
    doc.field("op", qs(op.name));
    doc.field("rank", QString::number(op.rank));
    QString thread = QStringLiteral("thread %1").arg(op.thread);
    doc.field("thread", op.threadName.empty() ? thread : qs(op.threadName) + " (" + thread + ")");
    doc.field("step", QString::number(op.step));
    doc.field("phase", qs(toString(op.phase)));
    doc.field("duration", QStringLiteral("%1 µs").arg((double(op.endNs) - double(op.startNs)) / 1e3,
                                                      0, 'f', 2));
    doc.field("nesting depth", QString::number(op.depth));
}

void promotedOpSection(Doc& doc, const OpDetail& op, const IncidentDetail* reconciled) {
    if (!reconciled && !op.reconciles) return;
    doc.heading("Reconciliation");
    if (!reconciled)
        return doc.line(QStringLiteral("promoted op of incident #%1 (incident not loaded)")
                            .arg(op.reconciles.value()));
    doc.line(QStringLiteral("promoted op of incident #%1: ").arg(reconciled->seq.value()) +
             qs(describePlainOperand(*reconciled)) + " became " +
             (reconciled->promotedPlacements.empty() ? qs(toString(reconciled->action))
                                                     : qs(reconciled->promotedPlacements)));
}

}  // namespace

InspectorWidget::InspectorWidget(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    auto* top = new QHBoxLayout;
    m_title = new QLabel(this);
    m_title->setTextFormat(Qt::PlainText);
    top->addWidget(m_title, 1);
    m_copy = new QPushButton("Copy", this);
    m_copy->setObjectName("copyButton");
    m_copy->setToolTip("Copy everything shown here as plain text");
    top->addWidget(m_copy);
    layout->addLayout(top);
    m_split = new QSplitter(Qt::Vertical, this);
    m_mesh = new MeshView(this);
    m_mesh->setObjectName("meshView");
    m_meshScroll = new QScrollArea(this);
    m_meshScroll->setObjectName("meshScroll");
    m_meshScroll->setWidget(m_mesh);
    m_meshScroll->setWidgetResizable(true);
    m_split->addWidget(m_meshScroll);
    m_text = new QTextBrowser(this);
    m_text->setObjectName("inspectorText");
    m_text->setOpenLinks(false);  // recorded text never navigates anywhere
    m_split->addWidget(m_text);
    m_split->setStretchFactor(1, 1);
    connect(m_split, &QSplitter::splitterMoved, this, [this] { m_userSplit = true; });
    layout->addWidget(m_split, 1);
    connect(m_copy, &QPushButton::clicked, this,
            [this] { QApplication::clipboard()->setText(m_plain); });
    clear();
}

void InspectorWidget::setContent(const QString& title, const QString& html, const QString& plain) {
    m_title->setText(title);
    m_html = html;
    m_plain = plain;
    m_text->setHtml(html);
    m_copy->setEnabled(!plain.trimmed().isEmpty());
    m_fitPending = true;
    if (isVisible()) fitMesh();
}

void InspectorWidget::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    // The drawing's height depends on the width (plain operand beside or above the mesh).
    if (isVisible()) fitMesh();
}

// Gives the mesh pane the height its drawing needs at the current width, up
// to a little over half the inspector, so the text below stays readable;
// until the user drags the splitter, whose choice then stays.
void InspectorWidget::fitMesh() {
    m_fitPending = false;
    if (m_userSplit) return;
    const int total = m_split->height() - m_split->handleWidth();
    const int frame = 2 * m_meshScroll->frameWidth();
    const int width = m_meshScroll->width() - frame;
    int want = m_mesh->heightForWidth(width) + frame;
    if (m_mesh->minimumSizeHint().width() > width)
        want += m_meshScroll->horizontalScrollBar()->sizeHint().height();
    want = std::min(want, total * 11 / 20);
    m_split->setSizes({want, std::max(total - want, 0)});
}

// Before the first show the splitter has no real height yet.
void InspectorWidget::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    if (m_fitPending) fitMesh();
}

void InspectorWidget::showIncident(const IncidentDetail& d, const IncidentRef* ref,
                                   const IncidentGroup* group, const PromotionCheck* check,
                                   const std::string& evidence) {
    m_mesh->setIncident(d);
    std::optional<Verdict> verdict;
    if (ref || check) verdict = ref ? ref->verdict : check->verdict;
    const IncidentExplanation e = explainIncident(d, group, verdict, evidence);
    if (d.kind != IncidentKind::MixedTensor) return showFailure(d, e);
    Doc doc;
    incidentHeader(doc, d, e);
    fixSection(doc, e);  // first: what to change, without scrolling
    operandsSection(doc, d.operands);
    reconciliationSection(doc, d, e);
    crossRankSection(doc, d, e, check);
    originSection(doc, e);
    stackSection(doc, d.stack);
    doc.plainOnly("Device mesh", m_mesh->describe());
    setContent(QStringLiteral("Incident #%1, rank %2").arg(d.seq.value()).arg(d.rank), doc.html(),
               doc.plain());
}

void InspectorWidget::showFailure(const IncidentDetail& d, const IncidentExplanation& e) {
    if (isCollectiveKind(d.kind)) m_mesh->clear();  // no operands to draw
    Doc doc;
    failureHeader(doc, d, e);
    fixSection(doc, e);  // first: what to change, without scrolling
    failureSection(doc, e);
    if (!d.operands.empty()) operandsSection(doc, d.operands);
    stackSection(doc, d.stack);
    threadStacksSection(doc, e);
    doc.plainOnly("Device mesh", m_mesh->describe());
    setContent(QStringLiteral("Incident #%1, rank %2 (%3)")
                   .arg(d.seq.value())
                   .arg(d.rank)
                   .arg(qs(incidentKindInfo(d.kind).tag)),
               doc.html(), doc.plain());
}

void InspectorWidget::showOp(const OpDetail& op, const IncidentDetail* reconciled) {
    m_mesh->setOp(op);
    Doc doc;
    opHeader(doc, op);
    promotedOpSection(doc, op, reconciled);
    operandsSection(doc, op.operands);
    stackSection(doc, op.stack);
    doc.plainOnly("Device mesh", m_mesh->describe());
    setContent(QStringLiteral("Op #%1, rank %2").arg(op.seq.value()).arg(op.rank), doc.html(),
               doc.plain());
}

void InspectorWidget::showMessage(const QString& message) {
    m_mesh->clear();
    setContent("Selection", "<p>" + message.toHtmlEscaped() + "</p>", message);
}

void InspectorWidget::clear() {
    m_mesh->clear();
    setContent("Selection",
               "<p><i>Select an incident in the table or the timeline, or step the replay (N, "
               "period).</i></p>",
               QString());
}

}  // namespace meshscope::ui
