// meshscope-gui's "Where the time goes" dock under Xvfb, on a synthetic run
// of 8 ranks in which rank 5's input is 20 ms slower every step
// (SyntheticRunSpec::straggler): the ranks overview puts rank 5 first and
// names it the straggler; a heat map cell shows that rank's lanes at that
// step in the timeline; the op statistics sort by any column; and the
// timeline opens at the first recorded step. The models run under
// QAbstractItemModelTester. Screenshots go to UI_SCREENSHOTS.

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDockWidget>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QtTest>
#include <filesystem>

#include "core/synth/synthetic_run.h"
#include "tests/ui/window_support.h"
#include "ui/app/main_window.h"
#include "ui/app/time_dock.h"
#include "ui/models/time_models.h"
#include "ui/timeline/timeline_canvas.h"

using namespace meshscope;
using namespace meshscope::ui;
using namespace meshscope::ui::test;
namespace fs = std::filesystem;

class TimeTest : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        m_dir = scratch("time");
        SyntheticRunSpec spec;
        spec.ranks = 8;
        spec.steps = 12;
        spec.layers = 3;
        spec.straggler = 5;
        writeSyntheticRun(m_dir / "straggler", spec);
    }
    void cleanupTestCase() { fs::remove_all(m_dir); }

    void theRanksOverviewPutsTheStragglerFirstAndShowsItsLanes() {
        MainWindow w;
        TimeDock& dock = w.timeDock();
        QVERIFY(showAndOpen(w, m_dir / "straggler", {1600, 1000}));
        auto* timeDock = w.findChild<QDockWidget*>("timeDock");
        QVERIFY(timeDock);
        timeDock->raise();
        w.resizeDocks({timeDock}, {420}, Qt::Vertical);
        QTRY_VERIFY(timeDock->isVisible());

        auto* ranks = qobject_cast<QSortFilterProxyModel*>(dock.ranksTable().model());
        QVERIFY(ranks);
        QAbstractItemModelTester tester(ranks->sourceModel(),
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(ranks->rowCount(), 8);
        QCOMPARE(ranks->index(0, RankStepsModel::Rank).data().toInt(), 5);
        QCOMPARE(ranks->index(0, RankStepsModel::SlowestIn).data().toLongLong(), 12LL);
        QCOMPARE(ranks->index(0, RankStepsModel::Steps).data().toLongLong(), 12LL);
        QVERIFY2(dock.stragglerText().contains("rank 5 is the slowest rank in 12 of 12 steps"),
                 qPrintable(dock.stragglerText()));

        // rank 5's row is the first of the heat map; its cells say so
        RanksHeatMap& map = dock.heatMap();
        auto at = map.pointOf(5, 3);
        QVERIFY(at);
        auto cell = map.cellAt(*at);
        QVERIFY(cell);
        QCOMPARE(cell->rank, 5);
        QCOMPARE(cell->firstStep, 3LL);
        QVERIFY(at->y() < map.pointOf(0, 3)->y());
        QString tip = map.describe(*cell);
        QVERIFY2(tip.contains("rank 5, step 3") && tip.contains("the slowest rank in 1 of 1"),
                 qPrintable(tip));
        QVERIFY(map.legend().startsWith("light "));

        // a click shows rank 5 at step 3 in the timeline
        TimelineCanvas& canvas = w.canvas();
        QVERIFY(canvas.rankTop(5));
        QVERIFY(*canvas.rankTop(5) > 0);
        QTest::mouseClick(&map, Qt::LeftButton, {}, *at);
        QTRY_VERIFY(canvas.scrollY() > 0);
        const auto& range = canvas.view();
        QVERIFY(range.end() - range.start() < 0.5 * (w.session().timeline()->alignedRange().second -
                                                     w.session().timeline()->alignedRange().first));
        QVERIFY(dock.grab().save(shot("time-ranks.png")));
        QVERIFY(w.grab().save(shot("window-time-ranks.png")));

        // the other colourings
        for (int i = 0; i < dock.metricBox().count(); ++i) {
            dock.metricBox().setCurrentIndex(i);
            QVERIFY(!map.legend().isEmpty());
        }
        dock.metricBox().setCurrentIndex(2);  // a collective in flight: rank 5 waits least
        QVERIFY(map.grab().save(shot("time-heat-in-flight.png")));
    }

    void opStatisticsSortByAnyColumn() {
        MainWindow w;
        TimeDock& dock = w.timeDock();
        QVERIFY(showAndOpen(w, m_dir / "straggler", {1400, 900}));
        w.findChild<QDockWidget*>("timeDock")->raise();
        dock.setCurrentIndex(1);
        auto* ops = qobject_cast<QSortFilterProxyModel*>(dock.opsTable().model());
        QVERIFY(ops);
        QAbstractItemModelTester tester(ops->sourceModel(),
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(ops->rowCount() > 5);
        // by total time first
        qint64 previous = std::numeric_limits<qint64>::max();
        for (int r = 0; r < ops->rowCount(); ++r) {
            qint64 total =
                ops->index(r, OpStatsModel::Total).data(TimeTableModel::SortRole).toLongLong();
            QVERIFY(total <= previous);
            previous = total;
        }
        dock.opsTable().sortByColumn(OpStatsModel::Calls, Qt::DescendingOrder);
        qint64 most = ops->index(0, OpStatsModel::Calls).data().toLongLong();
        for (int r = 1; r < ops->rowCount(); ++r)
            QVERIFY(ops->index(r, OpStatsModel::Calls).data().toLongLong() <= most);
        bool sawMm = false;
        for (int r = 0; r < ops->rowCount(); ++r)
            if (ops->index(r, OpStatsModel::Op).data().toString() == "aten::mm") {
                sawMm = true;
                QCOMPARE(ops->index(r, OpStatsModel::Ranks).data().toInt(), 8);
            }
        QVERIFY(sawMm);
        dock.setCurrentIndex(2);  // the slowest rank of each step
        auto* slowest = qobject_cast<QSortFilterProxyModel*>(dock.slowestTable().model());
        QCOMPARE(slowest->rowCount(), 12);
        for (int r = 0; r < slowest->rowCount(); ++r)
            QCOMPARE(slowest->index(r, SlowestStepModel::Rank).data().toInt(), 5);
        dock.setCurrentIndex(1);
        QVERIFY(dock.grab().save(shot("time-ops.png")));
    }

  private:
    fs::path m_dir;
};

QTEST_MAIN(TimeTest)
#include "time_test.moc"
