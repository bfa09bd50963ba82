// Smoke test on a run the capture agent recorded (scenario s1, policy auto):
// open it, select its first incident, check what the inspector says against
// the analysis, and save a screenshot of the window.

#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>

#include "ui/app/main_window.h"
#include "ui/inspector/inspector_widget.h"
#include "ui/inspector/mesh_view.h"
#include "ui/timeline/timeline_canvas.h"

using namespace meshscope;
using namespace meshscope::ui;

class SmokeTest : public QObject {
    Q_OBJECT
  private slots:
    void opensARecordedScenario() {
        QStandardPaths::setTestModeEnabled(true);
        QByteArray run = qgetenv("MESHSCOPE_SMOKE_RUN");
        QVERIFY2(!run.isEmpty(), "set MESHSCOPE_SMOKE_RUN to a recorded run");
        MainWindow w;
        w.resize(1400, 900);
        w.show();
        QSignalSpy ready(&w.session(), &RunSession::analysisReady);
        w.openRun(QString::fromLocal8Bit(run));
        QVERIFY(ready.wait(120000) || ready.count() == 1);  // generous, not a speed check
        auto analysis = w.session().analysis();
        QVERIFY(analysis && !analysis->incidents.empty());
        QCOMPARE(int(w.session().timeline()->ranks.size()), 2);

        w.replay().stepIncident(1);
        TimelineSelection sel = w.canvas().selection();
        QCOMPARE(sel.kind, TimelineSelection::Kind::Incident);
        const IncidentRef* ref = nullptr;
        for (const IncidentRef& r : analysis->incidents)
            if (r.rank == sel.rank && r.seq.value() == sel.seq) ref = &r;
        QVERIFY(ref);
        const IncidentGroup& g = analysis->groups[size_t(ref->group)];
        QString text = w.inspector().plainText();
        // s1: the batch meets sharded weights in aten::sub; auto shards it by batch.
        QVERIFY2(text.contains(QString::fromStdString(g.op)), qPrintable(text));
        QVERIFY(text.contains("aten::sub.Tensor"));
        QVERIFY(text.contains("D - input data not distributed"));
        QVERIFY(text.contains("s1_input_batch.py:"));
        QVERIFY(text.contains("-> DTensor [Shard(0)]"));
        QVERIFY(text.contains("DTensor.from_local("));
        QVERIFY(w.inspector().meshView().cellCount() == 2);
        QTest::qWait(200);
        QVERIFY(w.grab().save(QString(UI_SCREENSHOTS) + "/scenario-s1.png"));
    }
};

QTEST_MAIN(SmokeTest)
#include "smoke_test.moc"
