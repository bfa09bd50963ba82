#pragma once

// Help > Keyboard shortcuts: every action with a shortcut, plus the
// timeline's own keys and mouse gestures, in one table.

#include <QDialog>
#include <QList>

class QAction;
class QTableWidget;

namespace meshscope::ui {

class ShortcutsDialog : public QDialog {
    Q_OBJECT
  public:
    ShortcutsDialog(const QList<QAction*>& actions, QWidget* parent = nullptr);
    int rowCount() const;

  private:
    QTableWidget* m_table = nullptr;
};

}  // namespace meshscope::ui
