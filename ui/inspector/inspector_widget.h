#pragma once

// The inspector dock: everything about the selected incident or op. The
// operands with dtypes and shapes, the device-mesh drawing, the
// reconciliation as before/after placements, the cross-rank verdict with
// each rank's fingerprint, the origin class with its evidence, the stack and
// the suggested fix with its code; "Copy" puts all of it on the clipboard as
// plain text. Every recorded string is escaped before it reaches HTML.

#include <QString>
#include <QWidget>
#include <string>

#include "core/analysis/run_analysis.h"

class QTextBrowser;
class QPushButton;

namespace meshscope::ui {

struct OpDetail;
class MeshView;

class InspectorWidget : public QWidget {
    Q_OBJECT
  public:
    explicit InspectorWidget(QWidget* parent = nullptr);

    // ref, group and check may be null (analysis not ready, or none applies).
    void showIncident(const IncidentDetail& detail, const IncidentRef* ref,
                      const IncidentGroup* group, const PromotionCheck* check,
                      const std::string& evidence);
    void showOp(const OpDetail& op, const IncidentDetail* reconciled);
    void showMessage(const QString& message);
    void clear();

    QString plainText() const { return m_plain; }
    QString html() const { return m_html; }
    MeshView& meshView() { return *m_mesh; }

  private:
    void setContent(const QString& html, const QString& plain);

    QTextBrowser* m_text = nullptr;
    MeshView* m_mesh = nullptr;
    QPushButton* m_copy = nullptr;
    QString m_html, m_plain;
};

}  // namespace meshscope::ui
