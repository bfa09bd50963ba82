#pragma once

// What the main-window tests share (window_test.cpp, failures_test.cpp):
// a scratch settings location and run directory, opening a run and waiting
// for its analysis, screenshots into UI_SCREENSHOTS.

#include <QAction>
#include <QDir>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <filesystem>
#include <string>

#include "ui/app/main_window.h"

namespace meshscope::ui::test {

constexpr int kWaitMs = 120000;  // a generous wait for background loading, not a speed check

inline QString shot(const QString& name) {
    QDir().mkpath(UI_SCREENSHOTS);
    return QString(UI_SCREENSHOTS) + "/" + name;
}

inline QAction* actionNamed(QWidget& w, const QString& text) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text().remove('&') == text) return a;
    return nullptr;
}

inline bool openAndWait(MainWindow& w, const std::filesystem::path& run) {
    QSignalSpy ready(&w.session(), &RunSession::analysisReady);
    w.openRun(QString::fromStdString(run.string()));
    return ready.wait(kWaitMs) || ready.count() > 0;
}

// Shows `w` at `size`, waits until it is on screen and opens `run`; false
// when either does not happen.
inline bool showAndOpen(MainWindow& w, const std::filesystem::path& run, QSize size) {
    w.resize(size);
    w.show();
    return QTest::qWaitForWindowExposed(&w) && openAndWait(w, run);
}

// QSettings in a scratch location, cleared; an empty directory for the runs.
inline std::filesystem::path scratch(const std::string& name) {
    QStandardPaths::setTestModeEnabled(true);
    QSettings().clear();
    auto dir = std::filesystem::temp_directory_path() /
               ("meshscope-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    return dir;
}

}  // namespace meshscope::ui::test
