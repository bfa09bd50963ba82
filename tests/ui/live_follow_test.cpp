// Live follow: a writer process appends to a run while the GUI polls it.
// Rows arrive, the view follows the newest data until the user moves away,
// the writer is SIGKILLed, its ranks are marked stopped, and the window
// stays usable (selection, inspector, drawing, export).

#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QtTest>
#include <filesystem>

#include "core/store/run_directory.h"
#include "ui/app/main_window.h"
#include "ui/inspector/inspector_widget.h"
#include "ui/models/incident_table_model.h"
#include "ui/timeline/timeline_canvas.h"

using namespace meshscope::ui;
namespace fs = std::filesystem;

namespace {
constexpr int kWaitMs = 120000;  // generous waits for another process, not a speed check
}

class LiveFollowTest : public QObject {
    Q_OBJECT
  private slots:
    void followsAWriterAndSurvivesItsDeath() {
        QStandardPaths::setTestModeEnabled(true);
        fs::path dir = fs::temp_directory_path() / ("meshscope-live-" + std::to_string(getpid()));
        fs::remove_all(dir);
        QProcess writer;
        writer.start(LIVE_WRITER, {QString::fromStdString(dir.string()), "2"});
        QVERIFY2(writer.waitForStarted(), LIVE_WRITER);
        QByteArray said;
        QTRY_VERIFY_WITH_TIMEOUT((said += writer.readAllStandardOutput()).contains("ready") ||
                                     writer.state() == QProcess::NotRunning,
                                 kWaitMs);
        QVERIFY2(said.contains("ready"), writer.readAllStandardError().constData());

        MainWindow w;
        w.resize(1200, 800);
        w.show();
        w.session().setPollInterval(100);
        w.session().setStopAfterMs(500);
        QSignalSpy ready(&w.session(), &RunSession::timelineReady);
        w.openRun(QString::fromStdString(dir.string()));
        QVERIFY(ready.wait(kWaitMs) || ready.count() == 1);
        QVERIFY(w.session().live());
        QVERIFY(w.canvas().followLive());

        // New rows arrive in the timeline and in the table.
        auto data = w.session().timeline();
        int64_t ops = data->totalOps();
        QTRY_VERIFY_WITH_TIMEOUT(data->totalOps() > ops + 200, kWaitMs);
        QTRY_VERIFY_WITH_TIMEOUT(w.incidentModel().rowCount() > 0, kWaitMs);
        int rows = w.incidentModel().rowCount();
        QTRY_VERIFY_WITH_TIMEOUT(w.incidentModel().rowCount() > rows, kWaitMs);
        // Following: the newest data is in view, and the view widens with
        // the run (it opened on a few ops).
        QTRY_VERIFY_WITH_TIMEOUT(w.canvas().view().end() >= data->alignedRange().second, kWaitMs);
        auto [lo, hi] = data->alignedRange();
        QVERIFY2(
            w.canvas().view().range() >= std::min(hi - lo, TimelineCanvas::kFollowWindowNs) * 0.9,
            qPrintable(
                QString("view %1 ns, run %2 ns").arg(w.canvas().view().range()).arg(hi - lo)));

        // The user pans away: following stops and the view stays put.
        QTest::keyClick(&w.canvas(), Qt::Key_Left);
        QVERIFY(!w.canvas().followLive());
        double end = w.canvas().view().end();
        ops = data->totalOps();
        QTRY_VERIFY_WITH_TIMEOUT(data->totalOps() > ops + 100, kWaitMs);
        QCOMPARE(w.canvas().view().end(), end);
        QVERIFY(w.grab().save(QString(UI_SCREENSHOTS) + "/live-follow.png"));

        // Following again after zooming in keeps the zoom and catches up.
        w.canvas().zoomToRange(w.canvas().view().start(), w.canvas().view().start() + 2e6);
        double zoomed = w.canvas().view().range();
        w.canvas().setFollowLive(true);
        ops = data->totalOps();
        QTRY_VERIFY_WITH_TIMEOUT(data->totalOps() > ops + 100, kWaitMs);
        QTRY_VERIFY_WITH_TIMEOUT(w.canvas().view().end() >= data->alignedRange().second, kWaitMs);
        QCOMPARE(w.canvas().view().range(), zoomed);

        // The writer dies without closing its files.
        writer.kill();
        QVERIFY(writer.waitForFinished());
        QTRY_VERIFY_WITH_TIMEOUT(data->ranks.size() == 2 &&
                                     data->ranks[0].state == RankState::Stopped &&
                                     data->ranks[1].state == RankState::Stopped,
                                 kWaitMs);
        QTRY_VERIFY(!w.session().live());
        QVERIFY2(w.statusText().contains("stopped writing"), qPrintable(w.statusText()));

        // Still usable.
        w.incidentTable().selectRow(0);
        QVERIFY(w.inspector().plainText().contains("aten::sub.Tensor"));
        QVERIFY(w.canvas().renderFrameNow() > 0);
        QString report = QString::fromStdString((dir / "after.html").string());
        QCOMPARE(w.exportReportBlocking(report, "html"), QString());
        fs::remove_all(dir);
    }

    // A poll whose only new rows are collectives (a rank blocked in a
    // collective issues no ops) still grows the timeline: the rank's first
    // collective gets its track.
    void aPollThatAddsOnlyCollectivesGrowsTheTimeline() {
        fs::path dir = fs::temp_directory_path() / ("meshscope-coll-" + std::to_string(getpid()));
        fs::remove_all(dir);
        meshscope::Manifest manifest;
        manifest.runId = "collectives-only";
        manifest.worldSize = 1;
        std::unique_ptr<meshscope::RankWriter> writer =
            meshscope::createRankWriter(dir, manifest, 0);
        meshscope::OpRecord op;
        op.startNs = writer->nowNs();
        op.endNs = op.startNs + 1000;
        op.name = writer->intern("aten::mm");
        writer->submit(std::move(op));
        writer->flushNow();

        MainWindow w;
        w.resize(1000, 600);
        w.show();
        w.session().setPollInterval(100);
        QSignalSpy ready(&w.session(), &RunSession::timelineReady);
        w.openRun(QString::fromStdString(dir.string()));
        QVERIFY(ready.wait(kWaitMs) || ready.count() == 1);
        QVERIFY(w.session().live());
        auto data = w.session().timeline();
        QCOMPARE(data->ranks.at(0).collectives.size(), size_t(0));

        QSignalSpy grew(&w.session(), &RunSession::grew);
        meshscope::CollectiveRecord c;
        c.seq = writer->reserveCollectiveSeq();
        c.kind = writer->intern("all_reduce");
        c.group = writer->intern("default_pg");
        c.bytes = 4096;
        c.startNs = writer->nowNs();
        c.issuedNs = c.startNs + 10;
        c.endNs = c.startNs + 5000;
        writer->submit(meshscope::Record{c});
        writer->flushNow();
        QTRY_VERIFY_WITH_TIMEOUT(grew.count() > 0, kWaitMs);
        QCOMPARE(data->ranks.at(0).collectives.size(), size_t(1));
        QCOMPARE(data->totalOps(), int64_t(1));  // nothing else arrived
        QVERIFY(w.canvas().renderFrameNow() > 0);
        writer->close();
        fs::remove_all(dir);
    }
};

QTEST_MAIN(LiveFollowTest)
#include "live_follow_test.moc"
