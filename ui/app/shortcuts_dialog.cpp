#include "ui/app/shortcuts_dialog.h"

#include <QAction>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QTableWidget>
#include <QVBoxLayout>
#include <utility>
#include <vector>

namespace meshscope::ui {

namespace {

// Keys and gestures the timeline canvas handles itself.
const std::vector<std::pair<const char*, const char*>> kCanvasKeys = {
    {"Mouse wheel", "Zoom the timeline at the mouse"},
    {"Shift+wheel", "Pan the timeline"},
    {"Ctrl+wheel", "Scroll ranks up and down"},
    {"Drag", "Pan (and scroll)"},
    {"Click", "Select an op, incident or collective"},
    {"Double-click", "Zoom to the item under the mouse"},
    {"Click/drag in overview", "Jump to that part of the run"},
    {"Left / Right, A / D", "Pan"},
    {"+ / -, W / S", "Zoom in / out"},
    {"Up / Down", "Scroll ranks"},
    {"Esc", "Clear the selection"},
};

}  // namespace

ShortcutsDialog::ShortcutsDialog(const QList<QAction*>& actions, QWidget* parent)
    : QDialog(parent) {
    setWindowTitle("Keyboard shortcuts");
    m_table = new QTableWidget(0, 2, this);
    m_table->setObjectName("shortcutsTable");
    m_table->setHorizontalHeaderLabels({"Key", "Action"});
    m_table->verticalHeader()->hide();
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    auto add = [this](const QString& key, const QString& text) {
        int row = m_table->rowCount();
        m_table->insertRow(row);
        m_table->setItem(row, 0, new QTableWidgetItem(key));
        m_table->setItem(row, 1, new QTableWidgetItem(text));
    };
    for (QAction* a : actions)
        if (!a->shortcut().isEmpty())
            add(a->shortcut().toString(QKeySequence::NativeText), a->text().remove('&'));
    for (const auto& [key, text] : kCanvasKeys)
        add(key, text);
    m_table->resizeColumnsToContents();
    m_table->horizontalHeader()->setStretchLastSection(true);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_table);
    layout->addWidget(buttons);
    resize(520, 480);
}

int ShortcutsDialog::rowCount() const {
    return m_table->rowCount();
}

}  // namespace meshscope::ui
