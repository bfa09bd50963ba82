#pragma once

// The inspector dock: everything about the selected incident or op. The
// operands with dtypes and shapes, the device-mesh drawing, the
// reconciliation as before/after placements, the cross-rank verdict with
// each rank's fingerprint, the origin class with its evidence, the stack and
// the suggested fix with its code; for the other incident kinds (no sharding
// strategy, DTensor errors, collective failures and hangs) the kind, the
// error, the placements, the fix and a hang's Python stacks of all threads.
// "Copy" puts all of it on the clipboard as plain text. Every recorded
// string is escaped before it reaches HTML.

#include <QString>
#include <QWidget>
#include <string>

#include "core/analysis/run_analysis.h"

class QLabel;
class QPushButton;
class QScrollArea;
class QSplitter;
class QTextBrowser;

namespace meshscope {
struct IncidentExplanation;
}

namespace meshscope::ui {

struct OpDetail;
class MeshView;

class InspectorWidget : public QWidget {
    Q_OBJECT
  public:
    explicit InspectorWidget(QWidget* parent = nullptr);

    // ref, group and check may be null (analysis not ready, or none applies).
    // `evidence` is the analysis' evidence text; the incident's own when empty.
    void showIncident(const IncidentDetail& detail, const IncidentRef* ref,
                      const IncidentGroup* group, const PromotionCheck* check,
                      const std::string& evidence);
    // `reconciled`: the incident this op is the promoted op of, when known.
    void showOp(const OpDetail& op, const IncidentDetail* reconciled);
    void showMessage(const QString& message);
    void clear();

    // What Copy puts on the clipboard: every section, the fix code included.
    QString plainText() const { return m_plain; }
    QString html() const { return m_html; }
    MeshView& meshView() { return *m_mesh; }

  protected:
    void showEvent(QShowEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

  private:
    void setContent(const QString& title, const QString& html, const QString& plain);
    // An incident other than a mixed tensor (no strategy, DTensor error, collective failure, hang).
    void showFailure(const IncidentDetail& detail, const IncidentExplanation& explanation);
    void fitMesh();

    QLabel* m_title = nullptr;
    QPushButton* m_copy = nullptr;
    QSplitter* m_split = nullptr;
    QScrollArea* m_meshScroll = nullptr;
    MeshView* m_mesh = nullptr;
    QTextBrowser* m_text = nullptr;
    QString m_html, m_plain;
    bool m_fitPending = false;  // content changed while hidden: fit when shown
    bool m_userSplit = false;   // the user has sized the panes: keep their choice
};

}  // namespace meshscope::ui
