// meshscope-gui [RUN]: the desktop GUI. Parses arguments and wires the ui
// library; everything else lives in ui/.

#include <CLI/CLI.hpp>
#include <QApplication>
#include <QSurfaceFormat>
#include <QTimer>
#include <cstdio>

#include "core/util/terminal_text.h"
#include "ui/app/main_window.h"
#include "ui/timeline/timeline_canvas.h"

namespace {

// Each line of `message` on stderr, prefixed, its control characters escaped.
void printLines(const char* prefix, const QString& message) {
    for (const QString& line : message.split('\n'))
        std::fprintf(stderr, "meshscope-gui: %s%s\n", prefix,
                     meshscope::terminalSafe(line.toStdString()).c_str());
}

// --screenshot: once the run's analysis is in, select its first incident,
// save the whole window as PNG and quit (documentation, smoke checks). A
// run that cannot be opened or analysed ends it with its error on stderr
// and exit code 3, like the CLI; problems of a run that opened are printed.
void screenshotWhenReady(meshscope::ui::MainWindow& window, const QString& file) {
    QObject::connect(&window.session(), &meshscope::ui::RunSession::analysisReady, &window,
                     [&window, file] {
                         for (const QString& p : window.session().problems())
                             printLines("problem: ", p);
                         window.replay().stepIncident(1);
                         QTimer::singleShot(500, &window, [&window, file] {
                             bool ok = window.grab().save(file, "PNG");
                             std::fprintf(stderr, "%s %s\n", ok ? "wrote" : "cannot write",
                                          file.toLocal8Bit().constData());
                             QApplication::exit(ok ? 0 : 3);
                         });
                     });
    auto fail = [](const char* what) {
        return [what](const QString& message) {
            printLines(what, message);
            QApplication::exit(3);
        };
    };
    QObject::connect(&window.session(), &meshscope::ui::RunSession::loadFailed, &window,
                     fail("cannot open the run: "));
    QObject::connect(&window.session(), &meshscope::ui::RunSession::analysisFailed, &window,
                     fail(""));  // the message says "analysis: ..."
}

}  // namespace

int main(int argc, char** argv) {
    meshscope::prepareForManyReaders();  // before any SQLite call
    CLI::App cli{"meshscope-gui: replay the multi-rank timeline of a meshscope run"};
    std::string run, screenshot;
    cli.add_option("run", run, "Run directory or rank file (.msdb) to open");
    cli.add_option("--screenshot", screenshot,
                   "Open RUN, select its first incident, save the window as PNG and quit");
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return cli.exit(e);
    }
    QSurfaceFormat format;
    format.setSwapInterval(0);  // frames are drawn on demand; never wait for vsync
    QSurfaceFormat::setDefaultFormat(format);
    QApplication app(argc, argv);
    QApplication::setOrganizationName("meshscope");
    QApplication::setApplicationName("meshscope-gui");
    meshscope::ui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    if (!screenshot.empty()) {
        if (run.empty()) {
            std::fprintf(stderr, "meshscope-gui: --screenshot needs a RUN to open\n");
            return 2;
        }
        screenshotWhenReady(window, QString::fromStdString(screenshot));
    }
    if (!run.empty()) window.openRun(QString::fromStdString(run));
    return app.exec();
}
