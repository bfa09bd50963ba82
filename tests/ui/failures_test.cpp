// meshscope-gui on a run that ends the way a broken job ends
// (SyntheticRunSpec::failures: no sharding strategy and a DTensor error on
// rank 0, both ranks hung in mismatched collectives and killed), under Xvfb:
// the incidents table's Kind column and kind filter, the inspector on a hang
// (its error, fix and the threads' stacks), the "Where it stopped" dock and
// the stop markers on the timeline. Screenshots go to UI_SCREENSHOTS.

#include <QComboBox>
#include <QDockWidget>
#include <QTableView>
#include <QtTest>
#include <filesystem>

#include "core/synth/synthetic_run.h"
#include "tests/ui/window_support.h"
#include "ui/app/main_window.h"
#include "ui/inspector/inspector_widget.h"
#include "ui/models/incident_filter_model.h"
#include "ui/models/incident_table_model.h"
#include "ui/models/rank_stop_model.h"
#include "ui/timeline/timeline_canvas.h"

using namespace meshscope;
using namespace meshscope::ui;
using namespace meshscope::ui::test;
namespace fs = std::filesystem;

namespace {

QStringList column(const QAbstractItemModel& m, int c) {
    QStringList out;
    for (int r = 0; r < m.rowCount(); ++r)
        out << m.index(r, c).data().toString();
    return out;
}

}  // namespace

class FailuresTest : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        m_dir = scratch("failures");
        SyntheticRunSpec spec;
        spec.steps = 3;
        spec.failures = true;
        writeSyntheticRun(m_dir / "run", spec);
    }
    void cleanupTestCase() { fs::remove_all(m_dir); }

    void showsKindsStopsAndTheHangsStacks() {
        MainWindow w;
        QVERIFY(showAndOpen(w, m_dir / "run", {1600, 1000}));
        auto analysis = w.session().analysis();
        QVERIFY(analysis);

        // The Kind column: every kind the run has, by its tag.
        IncidentTableModel& model = w.incidentModel();
        QCOMPARE(model.headerData(IncidentTableModel::Kind, Qt::Horizontal).toString(),
                 QString("Kind"));
        QStringList kinds = column(model, IncidentTableModel::Kind);
        QCOMPARE(kinds.count("hang"), 2);
        QCOMPARE(kinds.count("no strategy"), 1);
        QCOMPARE(kinds.count("DTensor error"), 1);
        QVERIFY(kinds.count("mixed tensor") > 0);

        // The filter bar's kind filter.
        auto* kindFilter = w.findChild<QComboBox*>("kindFilter");
        QVERIFY(kindFilter);
        kindFilter->setCurrentIndex(kindFilter->findData(int(IncidentKind::CollectiveHang)));
        IncidentFilterModel& filter = w.incidentFilter();
        QCOMPARE(filter.rowCount(), 2);
        QCOMPARE(column(filter, IncidentTableModel::Kind), (QStringList{"hang", "hang"}));

        // A hang in the inspector: its kind, what it waited for, the fix and the stacks.
        w.incidentTable().selectRow(0);
        QString text = w.inspector().plainText();
        QVERIFY2(text.contains("A collective did not complete in time"), qPrintable(text));
        QVERIFY2(text.contains("pending for 600.0 s"), qPrintable(text));
        QVERIFY2(text.contains("Fix"), qPrintable(text));
        QVERIFY2(text.contains("Python stacks of all threads"), qPrintable(text));
        QVERIFY2(text.contains("Thread 0x7f01 (pin_memory):"), qPrintable(text));
        QVERIFY(w.inspector().html().contains("<pre>Thread 0x7f00 (MainThread)"));

        // No sharding strategy: the placements DTensor had no strategy for, and the fix.
        kindFilter->setCurrentIndex(kindFilter->findData(int(IncidentKind::NoShardingStrategy)));
        QCOMPARE(filter.rowCount(), 1);
        w.incidentTable().selectRow(0);
        text = w.inspector().plainText();
        QVERIFY2(text.contains("An op DTensor has no sharding strategy for"), qPrintable(text));
        QVERIFY2(text.contains("placements: [Shard(0)], [Shard(0)]"), qPrintable(text));
        QVERIFY2(text.contains("does not have a sharding strategy registered"), qPrintable(text));
        // its arguments, and a fix that fits them: attention works along the
        // dim the operands are sharded on, so it is gathered first
        QVERIFY2(text.contains("(dropout_p=0, is_causal=True)"), qPrintable(text));
        QVERIFY2(text.contains("redistribute_inputs=True)(...)"), qPrintable(text));
        QVERIFY(w.inspector().grab().save(shot("inspector-no-strategy.png")));

        // Where it stopped: both ranks, each waiting in its collective.
        RankStopModel& stops = w.stopsModel();
        QCOMPARE(stops.rowCount(), 2);
        for (int r = 0; r < 2; ++r) {
            QCOMPARE(stops.index(r, RankStopModel::Rank).data().toInt(), r);
            QString state = stops.index(r, RankStopModel::State).data().toString();
            QVERIFY2(state.startsWith("waited in"), qPrintable(state));
            QVERIFY2(state.contains(r == 0 ? "all_reduce" : "broadcast"), qPrintable(state));
        }
        auto* dock = w.findChild<QDockWidget*>("stopsDock");
        QVERIFY(dock && dock->isVisible());
        // Its row selects the rank's hang everywhere.
        w.stopsTable().selectRow(1);
        emit w.stopsTable().activated(stops.index(1, RankStopModel::State));
        TimelineSelection picked = w.canvas().selection();
        QCOMPARE(picked.kind, TimelineSelection::Kind::Incident);
        QCOMPARE(picked.rank, 1);
        QVERIFY(w.inspector().plainText().contains("broadcast"));

        // The stop markers on the timeline.
        QCOMPARE(w.session().timeline()->alignMode, AlignMode::WallClock);
        for (const RankTimeline& r : w.session().timeline()->ranks) {
            QVERIFY(r.stop);
            QCOMPARE(QString::fromStdString(r.stop->label), QString("stopped: hang"));
        }
        kindFilter->setCurrentIndex(0);
        QCOMPARE(filter.rowCount(), int(analysis->incidents.size()));
        // Ranks aligned by step, zoomed to the end of the run: the failures
        // and both stops in view.
        QAction* byStep = actionNamed(w, "Align ranks by step");
        QVERIFY(byStep && !byStep->isChecked());
        byStep->trigger();
        double from = 1e300, to = -1e300;
        for (const IncidentRef& ref : analysis->incidents)
            if (ref.kind != IncidentKind::MixedTensor) {
                auto t = w.canvas().timeOf(
                    {TimelineSelection::Kind::Incident, ref.rank, ref.seq.value()});
                QVERIFY(t);
                from = std::min(from, *t);
                to = std::max(to, *t);
            }
        QCOMPARE(w.session().timeline()->alignMode, AlignMode::Step);
        w.canvas().zoomToRange(from - 4e3, to + 1.6e4);
        QTRY_VERIFY(w.canvas().framesRendered() > 0);
        QVERIFY(w.canvas().renderFrameNow() > 0);
        QVERIFY(w.grab().save(shot("window-failures.png")));
        QVERIFY(w.saveTimelinePng(shot("timeline-failures.png")));
    }

  private:
    fs::path m_dir;
};

QTEST_MAIN(FailuresTest)
#include "failures_test.moc"
