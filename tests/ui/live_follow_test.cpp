// Live follow: a writer process appends to a run while the GUI polls it
// (a worker thread reads, the GUI thread adds what it read).
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

// One op of `name`, committed.
void addOp(meshscope::RankWriter& writer, const char* name) {
    meshscope::OpRecord op;
    op.startNs = writer.nowNs();
    op.endNs = op.startNs + 1000;
    op.name = writer.intern(name);
    writer.submit(std::move(op));
    writer.flushNow();
}

// `n` ops of one name, submitted together (committed when the writer closes).
void addOps(meshscope::RankWriter& writer, int n) {
    for (int i = 0; i < n; ++i) {
        meshscope::OpRecord op;
        op.startNs = writer.nowNs();
        op.endNs = op.startNs + 1000;
        op.name = writer.intern("aten::add.Tensor");
        writer.submit(std::move(op));
    }
}

// Opens the run at `dir` in `w`, polling every 100 ms; false when it did not load.
bool openPolled(MainWindow& w, const fs::path& dir) {
    w.resize(1000, 600);
    w.show();
    w.session().setPollInterval(100);
    QSignalSpy ready(&w.session(), &RunSession::timelineReady);
    w.openRun(QString::fromStdString(dir.string()));
    return ready.wait(kWaitMs) || ready.count() == 1;
}
}  // namespace

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

        // The rows were read by the worker's reader, never on the GUI thread.
        QVERIFY(w.session().livePolls() > 0);
        QCOMPARE(w.session().livePollsOnGuiThread(), int64_t(0));

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
        addOp(*writer, "aten::mm");

        MainWindow w;
        QVERIFY(openPolled(w, dir));
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

    // A writer that closes its file with more rows than one poll reads: the
    // session reads on over the next polls and stops following only once
    // every row is in (it used to stop at the first poll that saw the file
    // closed, leaving the rest unread: 12.0M of 16.1M ops of a run written
    // while the GUI followed it).
    void aRankThatEndsWithMoreThanAPollReadsIsReadToItsEnd() {
        fs::path dir = fs::temp_directory_path() / ("meshscope-rest-" + std::to_string(getpid()));
        fs::remove_all(dir);
        meshscope::Manifest manifest;
        manifest.runId = "rest-after-close";
        manifest.worldSize = 1;
        std::unique_ptr<meshscope::RankWriter> writer =
            meshscope::createRankWriter(dir, manifest, 0);
        addOp(*writer, "aten::mm");

        MainWindow w;
        w.session().setLiveChunk(100);
        QVERIFY(openPolled(w, dir));
        QVERIFY(w.session().live());
        addOps(*writer, 1000);
        writer->close();  // commits all 1,000 and marks the file closed
        QTRY_VERIFY_WITH_TIMEOUT(!w.session().live(), kWaitMs);
        auto data = w.session().timeline();
        QCOMPARE(data->totalOps(), int64_t(1001));
        QCOMPARE(data->ranks.at(0).state, RankState::Finished);
        QVERIFY(w.session().livePolls() >= 10);  // 100 ops a poll
        fs::remove_all(dir);
    }

    // A rank that joins already closed, with more rows than a poll reads, and
    // an analysis that finishes meanwhile (the joined rank starts one): both
    // ranks are read to their end before the session stops following.
    void aRankThatJoinsClosedIsReadToItsEnd() {
        fs::path dir = fs::temp_directory_path() / ("meshscope-joined-" + std::to_string(getpid()));
        fs::remove_all(dir);
        meshscope::Manifest manifest;
        manifest.runId = "joins-closed";
        manifest.worldSize = 2;
        std::unique_ptr<meshscope::RankWriter> one = meshscope::createRankWriter(dir, manifest, 1);
        addOp(*one, "aten::mm");

        MainWindow w;
        w.session().setLiveChunk(100);
        QVERIFY(openPolled(w, dir));
        QVERIFY(w.session().live());
        std::unique_ptr<meshscope::RankWriter> zero = meshscope::createRankWriter(dir, manifest, 0);
        addOps(*zero, 1000);
        zero->close();
        one->close();
        QTRY_VERIFY_WITH_TIMEOUT(!w.session().live(), kWaitMs);
        auto data = w.session().timeline();
        QCOMPARE(data->ranks.size(), size_t(2));
        QCOMPARE(data->ranks[0].opCount, int64_t(1000));
        QCOMPARE(data->ranks[1].opCount, int64_t(1));
        QCOMPARE(data->ranks[0].state, RankState::Finished);
        QCOMPARE(data->ranks[1].state, RankState::Finished);
        fs::remove_all(dir);
    }

    // A rank that starts late (rank 0 after rank 1) joins the timeline in
    // order, which moves rank 1 in the ranks vector: every track still draws
    // its own rank (tracks find their rank by number, not by reference).
    void aRankThatStartsLateJoinsInOrder() {
        fs::path dir = fs::temp_directory_path() / ("meshscope-late-" + std::to_string(getpid()));
        fs::remove_all(dir);
        meshscope::Manifest manifest;
        manifest.runId = "late-rank";
        manifest.worldSize = 2;
        std::unique_ptr<meshscope::RankWriter> one = meshscope::createRankWriter(dir, manifest, 1);
        addOp(*one, "aten::mm");

        MainWindow w;
        QVERIFY(openPolled(w, dir));
        auto data = w.session().timeline();
        QCOMPARE(data->ranks.size(), size_t(1));
        QCOMPARE(data->ranks[0].rank, 1);
        QVERIFY(w.canvas().renderFrameNow() > 0);

        std::unique_ptr<meshscope::RankWriter> zero = meshscope::createRankWriter(dir, manifest, 0);
        addOp(*zero, "aten::add.Tensor");
        addOp(*zero, "aten::add.Tensor");
        QTRY_VERIFY_WITH_TIMEOUT(data->ranks.size() == 2, kWaitMs);
        QCOMPARE(data->ranks[0].rank, 0);
        QCOMPARE(data->ranks[1].rank, 1);
        QCOMPARE(data->ranks[0].opCount, int64_t(2));
        QCOMPARE(data->ranks[1].opCount, int64_t(1));
        // each rank's tracks draw its own ops: the whole run in view, 3 spans
        w.canvas().fitAll();
        QVERIFY(w.canvas().renderFrameNow() > 0);
        QCOMPARE(w.canvas().spansInView(), int64_t(3));
        QCOMPARE(w.session().livePollsOnGuiThread(), int64_t(0));
        QVERIFY(w.session().rankReader(0) != nullptr);  // the inspector's reader knows it too
        // the analysis of the run is redone: rank 0 is no longer missing
        QTRY_VERIFY_WITH_TIMEOUT(!w.statusText().contains("missing"), kWaitMs);
        QVERIFY(w.grab().save(QString(UI_SCREENSHOTS) + "/live-late-rank.png"));
        one->close();
        zero->close();
        fs::remove_all(dir);
    }
};

QTEST_MAIN(LiveFollowTest)
#include "live_follow_test.moc"
