// meshscope-gui on a run whose replicas drift apart (SyntheticRunSpec::drift:
// layers.1's norm gradient is never reduced across the ranks), under Xvfb:
// the "Replicas" dock comes forward, drifting tensors first, one column per
// sampled step saying whether the ranks agreed there, and the cause and fix
// on a drifting row. The model runs under QAbstractItemModelTester.
// Screenshots go to UI_SCREENSHOTS.

#include <QAbstractItemModelTester>
#include <QDockWidget>
#include <QTableView>
#include <QtTest>
#include <filesystem>

#include "core/synth/synthetic_run.h"
#include "tests/ui/window_support.h"
#include "ui/app/main_window.h"
#include "ui/models/replica_drift_model.h"

using namespace meshscope;
using namespace meshscope::ui;
using namespace meshscope::ui::test;
namespace fs = std::filesystem;

class ReplicasTest : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        m_dir = scratch("replicas");
        SyntheticRunSpec spec;
        spec.steps = 5;
        spec.layers = 3;
        spec.drift = true;
        writeSyntheticRun(m_dir / "drift", spec);
        spec.drift = false;
        writeSyntheticRun(m_dir / "plain", spec);
    }
    void cleanupTestCase() { fs::remove_all(m_dir); }

    void showsWhichReplicasDriftAndWhen() {
        MainWindow w;
        ReplicaDriftModel& model = w.replicasModel();
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(showAndOpen(w, m_dir / "drift", {1600, 1000}));
        auto* dock = w.findChild<QDockWidget*>("replicasDock");
        QVERIFY(dock);
        QTRY_VERIFY(dock->isVisible());  // raised over the incidents: something drifts

        // 3 layers x (param, grad, exp_avg) compared; the sharded weights are not
        QCOMPARE(model.rowCount(), 9);
        QCOMPARE(model.columnCount(), ReplicaDriftModel::FirstStepColumn + 5);
        QCOMPARE(
            model.headerData(ReplicaDriftModel::FirstStepColumn + 1, Qt::Horizontal).toString(),
            QString("1"));
        QCOMPARE(
            model
                .headerData(ReplicaDriftModel::FirstStepColumn + 1, Qt::Horizontal, Qt::ToolTipRole)
                .toString(),
            QString("step 1"));
        for (int r = 0; r < 3; ++r) {  // the drifting norm's rows come first
            QCOMPARE(model.index(r, ReplicaDriftModel::Name).data().toString(),
                     QString("layers.1.norm.weight"));
            QVERIFY(model.index(r, 0).data(ReplicaDriftModel::DriftingRole).toBool());
        }
        QVERIFY(!model.index(3, 0).data(ReplicaDriftModel::DriftingRole).toBool());
        int grad = -1;
        for (int r = 0; r < 3; ++r)
            if (model.index(r, ReplicaDriftModel::Role).data().toString() == "grad") grad = r;
        QVERIFY(grad >= 0);
        QCOMPARE(model.index(grad, ReplicaDriftModel::FirstDiffers).data().toLongLong(), 1LL);
        QCOMPARE(model.index(grad, ReplicaDriftModel::Key).data().toString(),
                 QString("every rank"));
        auto cell = [&](int row, int step) {
            return model.index(row, ReplicaDriftModel::FirstStepColumn + step);
        };
        QCOMPARE(cell(grad, 0).data(ReplicaDriftModel::AgreesRole).toBool(), true);
        QCOMPARE(cell(grad, 1).data(ReplicaDriftModel::AgreesRole).toBool(), false);
        QCOMPARE(cell(grad, 1).data().toString(), QString("\u2260"));
        QVERIFY(cell(grad, 1).data(Qt::ToolTipRole).toString().contains("ranks 0 | 1"));
        QString tip = model.index(grad, ReplicaDriftModel::Name).data(Qt::ToolTipRole).toString();
        QVERIFY2(tip.contains("never reduced"), qPrintable(tip));
        QVERIFY2(tip.contains("SequenceParallel()"), qPrintable(tip));

        w.replicasTable().selectRow(grad);
        QVERIFY(w.grab().save(shot("window-replicas.png")));
        QVERIFY(dock->grab().save(shot("replicas-dock.png")));
    }

    void aRunWithoutReplicaChecksShowsAnEmptyTable() {
        MainWindow w;
        QVERIFY(showAndOpen(w, m_dir / "plain", {1200, 800}));
        QCOMPARE(w.replicasModel().rowCount(), 0);
        QCOMPARE(w.replicasModel().columnCount(), int(ReplicaDriftModel::FirstStepColumn));
    }

  private:
    fs::path m_dir;
};

QTEST_MAIN(ReplicasTest)
#include "replicas_test.moc"
