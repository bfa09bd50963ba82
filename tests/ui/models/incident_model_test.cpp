// The incidents table model, its filter proxy and filter bar, checked by
// QAbstractItemModelTester and by the rows each filter must leave.

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLineEdit>
#include <QtTest>

#include "ui/models/incident_filter_bar.h"
#include "ui/models/incident_filter_model.h"
#include "ui/models/incident_table_model.h"

using namespace meshscope;
using namespace meshscope::ui;

namespace {

IncidentGroup group(int id, const char* op, OriginClass origin, const char* file, int line) {
    IncidentGroup g;
    g.id = id;
    g.op = op;
    g.origin = origin;
    g.site = {file, line, "fwd"};
    return g;
}

// 3 groups, 2 ranks, steps 0-11: 24 incidents.
std::shared_ptr<RunAnalysis> fixture() {
    auto a = std::make_shared<RunAnalysis>();
    a->groups = {group(0, "aten::sub.Tensor", OriginClass::InputData, "train.py", 73),
                 group(1, "aten::_foreach_add_.List", OriginClass::OptimizerState, "optim.py", 48),
                 group(2, "aten::mul.Tensor", OriginClass::CreatedInForward, "model.py", 12)};
    a->evidenceTexts = {"created by DataLoader batch #1", "optimizer Adam state exp_avg",
                        "created by aten::ones inside forward"};
    for (int rank = 0; rank < 2; ++rank)
        for (int i = 0; i < 12; ++i) {
            IncidentRef r;
            r.rank = rank;
            r.seq = IncidentSeq{i + 1};
            r.step = i;
            r.timeNs = int64_t(i) * 1'000'000 + rank;
            r.group = i % 3;
            r.evidence = uint32_t(i % 3);
            r.action = i % 3 == 0   ? Action::ShardedFromLocal
                       : i % 3 == 1 ? Action::Replicated
                                    : Action::Observed;
            r.outcome = i % 3 == 2 ? Outcome::Raised : Outcome::Reconciled;
            r.verdict = i % 3 == 1 ? (rank == 1 && i == 4 ? Verdict::Invalid : Verdict::Verified)
                                   : Verdict::NotChecked;
            a->incidents.push_back(r);
        }
    return a;
}

QSet<QPair<int, qint64>> rows(const QAbstractItemModel& m) {
    QSet<QPair<int, qint64>> out;
    for (int r = 0; r < m.rowCount(); ++r) {
        QModelIndex i = m.index(r, 0);
        out.insert({i.data(IncidentTableModel::RankRole).toInt(),
                    i.data(IncidentTableModel::SeqRole).toLongLong()});
    }
    return out;
}

}  // namespace

class IncidentModelTest : public QObject {
    Q_OBJECT
  private slots:
    void passesTheModelTesterAcrossSnapshots() {
        IncidentTableModel model;
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t2(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setAnalysis(fixture());
        QCOMPARE(model.rowCount(), 24);
        proxy.sort(IncidentTableModel::Step, Qt::DescendingOrder);
        model.setAnalysis(std::make_shared<RunAnalysis>());
        QCOMPARE(proxy.rowCount(), 0);
        model.setAnalysis(nullptr);
        QCOMPARE(model.rowCount(), 0);
        model.setAnalysis(fixture());
        proxy.setRank(1);
        QCOMPARE(proxy.rowCount(), 12);
    }

    void showsReadableCells() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        QModelIndex row = model.indexOf(1, 5);  // rank 1, step 4: the INVALID replicate
        QVERIFY(row.isValid());
        auto cell = [&](int c) { return model.index(row.row(), c).data().toString(); };
        QCOMPARE(cell(IncidentTableModel::Rank), QString("1"));
        QCOMPARE(cell(IncidentTableModel::Step), QString("4"));
        QCOMPARE(cell(IncidentTableModel::TimeMs), QString("4.000"));
        QCOMPARE(cell(IncidentTableModel::Op), QString("aten::_foreach_add_.List"));
        QVERIFY(cell(IncidentTableModel::Origin).startsWith("E "));
        QCOMPARE(cell(IncidentTableModel::Action), QString("replicated"));
        QCOMPARE(cell(IncidentTableModel::Verdict), QString("INVALID"));
        QCOMPARE(cell(IncidentTableModel::Location), QString("optim.py:48"));
        QCOMPARE(cell(IncidentTableModel::Evidence), QString("optimizer Adam state exp_avg"));
        QVERIFY(!model.indexOf(7, 1).isValid());
        QVERIFY(
            model.index(row.row(), IncidentTableModel::Action).data(Qt::DecorationRole).isValid());
    }

    void sortsNumbersAsNumbers() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        proxy.setRank(0);
        proxy.sort(IncidentTableModel::Step, Qt::AscendingOrder);
        QCOMPARE(proxy.index(9, IncidentTableModel::Step).data().toString(), QString("9"));
        QCOMPARE(proxy.index(10, IncidentTableModel::Step).data().toString(), QString("10"));
    }

    void filtersAloneAndCombined() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        proxy.setStepRange(3, 5);
        QCOMPARE(proxy.rowCount(), 6);
        proxy.setRank(0);
        QCOMPARE(rows(proxy), (QSet<QPair<int, qint64>>{{0, 4}, {0, 5}, {0, 6}}));
        proxy.setOrigin(OriginClass::OptimizerState);
        QCOMPARE(rows(proxy), (QSet<QPair<int, qint64>>{{0, 5}}));
        proxy.clearFilters();
        proxy.setOpFilter("SUB.tensor");
        QCOMPARE(proxy.rowCount(), 8);
        proxy.setOpFilter({});
        proxy.setAction(Action::Observed);
        QCOMPARE(proxy.rowCount(), 8);
        proxy.setAction(std::nullopt);
        proxy.setFileFilter("model.py");
        QCOMPARE(proxy.rowCount(), 8);
        proxy.setFileFilter({});
        proxy.setText("exp_avg");
        QCOMPARE(proxy.rowCount(), 8);
        proxy.setText("invalid");
        QCOMPARE(rows(proxy), (QSet<QPair<int, qint64>>{{1, 5}}));
        proxy.setText("no such thing");
        QCOMPARE(proxy.rowCount(), 0);
    }

    void filterBarDrivesTheProxy() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        IncidentFilterBar bar(&proxy);
        bar.setRanks({0, 1});
        auto* rank = bar.findChild<QComboBox*>("rankFilter");
        auto* op = bar.findChild<QLineEdit*>("opFilter");
        auto* from = bar.findChild<QLineEdit*>("stepFrom");
        auto* origin = bar.findChild<QComboBox*>("originFilter");
        QVERIFY(rank && op && from && origin);
        rank->setCurrentIndex(2);  // rank 1
        QCOMPARE(proxy.rowCount(), 12);
        QTest::keyClicks(op, "mul");
        QCOMPARE(proxy.rowCount(), 4);
        QTest::keyClicks(from, "6");
        QCOMPARE(proxy.rowCount(), 2);
        origin->setCurrentIndex(origin->findData(int('D')));
        QCOMPARE(proxy.rowCount(), 0);
        bar.clear();
        QCOMPARE(proxy.rowCount(), 24);
        QVERIFY(op->text().isEmpty());
    }
};

QTEST_MAIN(IncidentModelTest)
#include "incident_model_test.moc"
