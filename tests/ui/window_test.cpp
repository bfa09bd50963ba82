// meshscope-gui's main window under Xvfb, used as a person would: open a
// run, pick incidents in the table and on the timeline, replay, zoom, export,
// save the timeline, settings that persist, a damaged run, a cancelled load.
// Screenshots go to UI_SCREENSHOTS.

#include <QAction>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QSet>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QThreadPool>
#include <QtTest>
#include <filesystem>

#include "core/synth/synthetic_run.h"
#include "tests/ui/window_support.h"
#include "ui/app/main_window.h"
#include "ui/app/replay_controller.h"
#include "ui/app/shortcuts_dialog.h"
#include "ui/inspector/inspector_widget.h"
#include "ui/models/incident_filter_model.h"
#include "ui/models/incident_group_model.h"
#include "ui/models/incident_table_model.h"
#include "ui/timeline/timeline_canvas.h"

using namespace meshscope;
using namespace meshscope::ui;
using namespace meshscope::ui::test;
namespace fs = std::filesystem;

class WindowTest : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        m_dir = scratch("window");
        SyntheticRunSpec spec;
        spec.ranks = 2;
        spec.steps = 10;
        spec.layers = 2;
        spec.incidentsPerStep = 3;
        writeSyntheticRun(m_dir / "run", spec);
    }
    void cleanupTestCase() { fs::remove_all(m_dir); }

    void tableAndTimelineSelectEachOther() {
        MainWindow w;
        QVERIFY(showAndOpen(w, m_dir / "run", {1400, 900}));
        auto analysis = w.session().analysis();
        QVERIFY(analysis);
        QCOMPARE(w.incidentModel().rowCount(), int(analysis->incidents.size()));
        QVERIFY(w.statusText().contains("2 rank(s)"));

        // Table -> timeline and inspector.
        QTableView& table = w.incidentTable();
        table.selectRow(3);
        QModelIndex row = table.currentIndex();
        int rank = row.data(IncidentTableModel::RankRole).toInt();
        qint64 seq = row.data(IncidentTableModel::SeqRole).toLongLong();
        TimelineSelection picked = w.canvas().selection();
        QCOMPARE(picked, (TimelineSelection{TimelineSelection::Kind::Incident, rank, seq}));
        QString op = w.incidentFilter().index(row.row(), IncidentTableModel::Op).data().toString();
        QVERIFY2(w.inspector().plainText().contains(op), qPrintable(w.inspector().plainText()));
        QVERIFY(w.inspector().plainText().contains("Fix"));

        // Timeline -> table: click another incident's marker.
        const IncidentRef& other = analysis->incidents.back();
        TimelineSelection target{TimelineSelection::Kind::Incident, other.rank, other.seq.value()};
        w.canvas().zoomToRange(*w.canvas().timeOf(target) - 2e5, *w.canvas().timeOf(target) + 2e5);
        auto pos = w.canvas().positionOf(target);
        QVERIFY(pos);
        QTest::mouseMove(&w.canvas(), pos->toPoint());
        QTRY_VERIFY(w.canvas().framesRendered() > 0);
        w.canvas().renderFrameNow();  // hover is computed while drawing
        QTest::mouseClick(&w.canvas(), Qt::LeftButton, {}, pos->toPoint());
        QCOMPARE(w.canvas().selection(), target);
        QModelIndex current = w.incidentTable().currentIndex();
        QCOMPARE(current.data(IncidentTableModel::RankRole).toInt(), other.rank);
        QCOMPARE(current.data(IncidentTableModel::SeqRole).toLongLong(), other.seq.value());
        QVERIFY(w.inspector().plainText().contains(QString("Incident #%1").arg(other.seq.value())));
        QVERIFY(w.grab().save(shot("window-synthetic.png")));
    }

    void replayStepsAcrossRanksAndTheInspectorFollows() {
        MainWindow w;
        w.show();
        QVERIFY(openAndWait(w, m_dir / "run"));
        w.replay().stepIncident(1);
        TimelineSelection first = w.canvas().selection();
        QCOMPARE(first.kind, TimelineSelection::Kind::Incident);
        QVERIFY(w.canvas().replayCursor());
        QVERIFY(w.inspector().plainText().startsWith("\nIncident") ||
                w.inspector().plainText().contains("Incident #"));
        w.replay().stepIncident(1);
        QVERIFY(!(w.canvas().selection() == first));
        w.replay().stepIncident(-1);
        QCOMPARE(w.canvas().selection(), first);
        double before = *w.canvas().replayCursor();
        w.replay().stepOp(1);
        QCOMPARE(w.canvas().selection().kind, TimelineSelection::Kind::Op);
        QVERIFY(*w.canvas().replayCursor() >= before);
        QVERIFY(w.inspector().plainText().contains("Op #"));
        // Playing stops at the next incident.
        QSignalSpy moved(&w.replay(), &ReplayController::cursorMoved);
        w.replay().setSpeed(64);
        w.replay().play();
        QTRY_VERIFY_WITH_TIMEOUT(w.canvas().selection().kind == TimelineSelection::Kind::Incident,
                                 kWaitMs);
        w.replay().pause();
        QVERIFY(moved.count() > 0);
    }

    void zoomPanKeysAndAlignment() {
        MainWindow w;
        w.show();
        QVERIFY(openAndWait(w, m_dir / "run"));
        TimelineCanvas& c = w.canvas();
        double full = c.view().range();
        QWheelEvent wheel(QPointF(400, 200), c.mapToGlobal(QPointF(400, 200)), {}, QPoint(0, 360),
                          Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(&c, &wheel);
        QVERIFY(c.view().range() < full / 1.5);
        double start = c.view().start();
        QTest::keyClick(&c, Qt::Key_Right);
        QVERIFY(c.view().start() > start);
        QTest::keyClick(&c, Qt::Key_Home);
        QVERIFY(std::abs(c.view().range() - full) < full * 1e-6);
        QAction* byStep = actionNamed(w, "Align ranks by step");
        QVERIFY(byStep);
        byStep->trigger();
        QCOMPARE(w.session().timeline()->alignMode, AlignMode::Step);
        QVERIFY(c.renderFrameNow() > 0);
        QVERIFY(c.itemsDrawn() > 0);
        w.close();  // saves settings
        MainWindow again;
        QVERIFY(actionNamed(again, "Align ranks by step")->isChecked());
        byStep = actionNamed(again, "Align ranks by step");
        byStep->setChecked(false);
        again.close();
    }

    void exportsAndScreenshots() {
        MainWindow w;
        w.show();
        QVERIFY(openAndWait(w, m_dir / "run"));
        QString html = QString::fromStdString((m_dir / "r.html").string());
        QString sarif = QString::fromStdString((m_dir / "r.sarif").string());
        QString trace = QString::fromStdString((m_dir / "t.json").string());
        QCOMPARE(w.exportReportBlocking(html, "html"), QString());
        QCOMPARE(w.exportReportBlocking(sarif, "sarif"), QString());
        QCOMPARE(w.exportTraceBlocking(trace), QString());
        QVERIFY(QFileInfo(html).size() > 1000);
        for (const QString& json : {sarif, trace}) {
            QFile f(json);
            QVERIFY(f.open(QIODevice::ReadOnly));
            QJsonParseError error;
            QJsonDocument::fromJson(f.readAll(), &error);
            QCOMPARE(error.error, QJsonParseError::NoError);
        }
        QVERIFY(!w.exportReportBlocking("/proc/nowhere/r.md", "md").isEmpty());
        // a torch.profiler trace per rank, each naming its rank where HTA looks
        QString folder = QString::fromStdString((m_dir / "profiler").string());
        QCOMPARE(w.exportProfilerTracesBlocking(folder), QString());
        QStringList files = QDir(folder).entryList({"*.pt.trace.json"}, QDir::Files, QDir::Name);
        QCOMPARE(files.size(), 2);
        QSet<int> ranks;
        for (const QString& name : files) {
            QFile f(QDir(folder).filePath(name));
            QVERIFY(f.open(QIODevice::ReadOnly));
            QByteArray header = f.readLine();
            QRegularExpressionMatch m =
                QRegularExpression(R"("rank":\s+(\d+))").match(QString::fromUtf8(header));
            QVERIFY2(m.hasMatch(), header.constData());
            ranks.insert(m.captured(1).toInt());
            f.seek(0);
            QJsonParseError error;
            QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &error);
            QCOMPARE(error.error, QJsonParseError::NoError);
            QVERIFY(doc["traceEvents"].toArray().size() > 10);
        }
        QCOMPARE(ranks, (QSet<int>{0, 1}));
        // the same folder again: refused, nothing of it touched
        QString again = w.exportProfilerTracesBlocking(folder);
        QVERIFY2(again.contains("holds 2 trace files already"), qPrintable(again));
        QCOMPARE(QDir(folder).entryList(QDir::Files).size(), 2);
        QString png = shot("timeline.png");
        QVERIFY(w.saveTimelinePng(png));
        QImage image(png);
        QVERIFY(!image.isNull());
        QSet<QRgb> colours;
        for (int y = 0; y < image.height(); y += 7)
            for (int x = 0; x < image.width(); x += 7)
                colours.insert(image.pixel(x, y));
        QVERIFY2(colours.size() > 8, "the timeline image looks blank");
        ShortcutsDialog help(w.actions(), &w);
        QVERIFY(help.rowCount() > 20);
    }

    // The incidents dock opens on the groups, as the report lists them: one
    // row per call site with its count, origin, what the policy did and the
    // fix; a row shows its first incident, the fix first in the inspector.
    void incidentGroupsByCallSiteAndTheFixFirst() {
        MainWindow w;
        QVERIFY(showAndOpen(w, m_dir / "run", {1400, 900}));
        auto analysis = w.session().analysis();
        QVERIFY(analysis && !analysis->groups.empty());
        QCOMPARE(w.incidentTabs().currentWidget(), &w.groupsTable());
        QCOMPARE(w.incidentTabs().tabText(0), QString("By call site"));
        IncidentGroupModel& groups = w.groupsModel();
        QCOMPARE(groups.rowCount(), int(analysis->groups.size()));
        QVERIFY(groups.rowCount() < int(analysis->incidents.size()));
        int64_t total = 0;
        for (int r = 0; r < groups.rowCount(); ++r) {
            const IncidentGroup& g = analysis->groups[size_t(r)];
            QCOMPARE(groups.index(r, IncidentGroupModel::Count).data().toLongLong(), g.count);
            QCOMPARE(groups.index(r, IncidentGroupModel::Site).data().toString(),
                     QString::fromStdString(formatLocation(g.site)));
            QCOMPARE(groups.index(r, IncidentGroupModel::Fix).data().toString(),
                     QString::fromStdString(g.fix.summary));
            total += g.count;
        }
        QCOMPARE(total, int64_t(analysis->incidents.size()));

        const int row = groups.rowCount() - 1;
        const IncidentGroup& g = analysis->groups[size_t(row)];
        w.groupsTable().selectRow(row);
        emit w.groupsTable().activated(groups.index(row, IncidentGroupModel::Site));
        TimelineSelection picked = w.canvas().selection();
        QCOMPARE(picked.kind, TimelineSelection::Kind::Incident);
        QCOMPARE(picked.rank, g.example.rank);
        QCOMPARE(qint64(picked.seq), qint64(g.example.seq.value()));
        QString text = w.inspector().plainText();
        QVERIFY2(text.contains(QString::fromStdString(g.fix.summary)), qPrintable(text));
        qsizetype fix = text.indexOf("\nFix\n"), operands = text.indexOf("\nOperands\n");
        QVERIFY2(fix >= 0 && (operands < 0 || fix < operands), qPrintable(text));
        QVERIFY(w.grab().save(shot("window-groups.png")));
    }

    // A run long enough for its lanes to spill draws, zoomed out and in, and
    // selects ops exactly as the same run held in memory; the spill file's
    // blocks are given back when the window goes.
    void aLongRunSpillsAndDrawsAsInMemory() {
        SyntheticRunSpec spec;
        spec.ranks = 2;
        spec.layers = 1;
        spec.opsPerRank = 600'000;
        writeSyntheticRun(m_dir / "long", spec);
        struct Seen {
            QImage whole, window;
            QString hovered;
            uint64_t spilled = 0, held = 0;
            bool saved = false;
        };
        auto look = [&](const std::string& spill) {
            ::setenv("MESHSCOPE_GUI_SPILL_DIR", spill.c_str(), 1);
            Seen seen;
            MainWindow w;
            if (!showAndOpen(w, m_dir / "long", {1400, 900})) return seen;
            TimelineCanvas& canvas = w.canvas();
            canvas.fitAll();
            canvas.renderFrameNow();
            seen.whole = canvas.grabFramebuffer();
            auto [lo, hi] = canvas.data()->alignedRange();
            double mid = lo + (hi - lo) * 0.61;  // inside a spilled block
            canvas.zoomToRange(mid, mid + 40'000);
            canvas.renderFrameNow();
            seen.window = canvas.grabFramebuffer();
            // the first op after that point, selected: its inspector
            auto op = nextOp(*canvas.data(), stopAt(mid), +1);
            if (op) {
                w.select(op->item, true);
                seen.hovered = w.inspector().plainText();
            }
            SpillStatus status = spillStatus();
            seen.spilled = status.blocks;
            seen.held = status.inMemory;
            if (spill != "off") seen.saved = w.grab().save(shot("window-spilled.png"));
            return seen;
        };
        Seen spilled = look((m_dir / "spill").string());
        QVERIFY2(spilled.spilled > 0, "a lane of the long run went to the spill file");
        QVERIFY(spilled.saved);
        QCOMPARE(spillStatus().blocks, uint64_t(0));  // given back with the window
        Seen held = look("off");
        ::unsetenv("MESHSCOPE_GUI_SPILL_DIR");
        QCOMPARE(held.spilled, uint64_t(0));
        QVERIFY(held.held > 0);
        QVERIFY(!spilled.whole.isNull() && !spilled.window.isNull());
        QVERIFY(spilled.whole == held.whole);
        QVERIFY(spilled.window == held.window);
        QVERIFY2(!spilled.hovered.isEmpty(), "an op of a spilled block was selected");
        QCOMPARE(spilled.hovered, held.hovered);
    }

    void damagedRankOpensWhatIsReadable() {
        fs::path broken = m_dir / "broken";
        fs::remove_all(broken);
        fs::copy(m_dir / "run", broken, fs::copy_options::recursive);
        fs::path rank1 = broken / "rank-00001.msdb";
        QVERIFY(fs::exists(rank1));
        fs::resize_file(rank1, 100);
        MainWindow w;
        w.show();
        QVERIFY(openAndWait(w, broken));
        QCOMPARE(int(w.session().timeline()->ranks.size()), 1);
        QVERIFY(!w.session().problems().isEmpty());
        QVERIFY2(w.statusText().contains("problem"), qPrintable(w.statusText()));
        QVERIFY(w.incidentModel().rowCount() > 0);
    }

    void missingRunSaysWhyAndCancelStopsALoad() {
        MainWindow w;
        QSignalSpy failed(&w.session(), &RunSession::loadFailed);
        w.session().open("/no/such/run");
        QVERIFY(failed.wait(kWaitMs) || failed.count() == 1);
        QVERIFY(failed.first().first().toString().contains("/no/such/run"));
        QSignalSpy cancelled(&w.session(), &RunSession::cancelled);
        QSignalSpy ready(&w.session(), &RunSession::timelineReady);
        w.session().open(QString::fromStdString((m_dir / "run").string()));
        w.session().cancel();
        QTRY_VERIFY_WITH_TIMEOUT(cancelled.count() == 1, kWaitMs);
        QCOMPARE(ready.count(), 0);
        // Cancelled after the loader is done, its result not yet delivered
        // (a busy machine): still cancelled, nothing shown.
        w.session().open(QString::fromStdString((m_dir / "run").string()));
        QThreadPool::globalInstance()->waitForDone();
        w.session().cancel();
        QTRY_VERIFY_WITH_TIMEOUT(cancelled.count() == 2, kWaitMs);
        QCOMPARE(ready.count(), 0);
    }

  private:
    fs::path m_dir;
};

QTEST_MAIN(WindowTest)
#include "window_test.moc"
