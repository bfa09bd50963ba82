// The incidents table model, its filter proxy and filter bar, and the
// "where it stopped" model, checked by QAbstractItemModelTester and by the
// exact rows each filter must leave.

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QIcon>
#include <QLineEdit>
#include <QPushButton>
#include <QtTest>

#include "ui/models/incident_filter_bar.h"
#include "ui/models/incident_filter_model.h"
#include "ui/models/incident_table_model.h"
#include "ui/models/rank_stop_model.h"

using namespace meshscope;
using namespace meshscope::ui;
using M = IncidentTableModel;
using Rows = QSet<QPair<int, qint64>>;  // (rank, seq)

namespace {

IncidentGroup group(int id, const char* op, OriginClass origin, const char* file, int line) {
    IncidentGroup g;
    g.id = id;
    g.op = op;
    g.origin = origin;
    g.site = {file, line, "forward"};
    return g;
}

struct Row {
    int rank;
    int64_t seq, step;
    int group;
    Action action;
    Outcome outcome;
    Verdict verdict;
};

constexpr Action kObs = Action::Observed, kRep = Action::Replicated,
                 kSfl = Action::ShardedFromLocal, kScal = Action::Scalarized,
                 kStrict = Action::StrictError;
constexpr Outcome kRaised = Outcome::Raised, kRec = Outcome::Reconciled, kFailed = Outcome::Failed;
constexpr Verdict kNc = Verdict::NotChecked, kVer = Verdict::Verified, kInv = Verdict::Invalid,
                  kUnv = Verdict::Unverified;

// 4 groups, 3 ranks, steps -1..12: 20 incidents, by rank then seq like analyze().
// Group g's evidence is evidenceTexts[g].
const Row kRows[] = {
    {0, 1, 0, 0, kSfl, kRec, kNc},        {0, 2, 1, 1, kRep, kRec, kVer},
    {0, 3, 2, 2, kObs, kRaised, kNc},     {0, 4, 2, 2, kScal, kFailed, kNc},
    {0, 5, 9, 0, kSfl, kRec, kNc},        {0, 6, 10, 1, kRep, kRec, kVer},
    {0, 7, 11, 3, kStrict, kRaised, kNc}, {0, 8, 11, 1, kRep, kRec, kUnv},
    {1, 1, 0, 0, kSfl, kRec, kNc},        {1, 2, 1, 1, kRep, kRec, kVer},
    {1, 3, 2, 2, kObs, kRaised, kNc},     {1, 4, 4, 1, kRep, kRec, kInv},
    {1, 5, 9, 0, kSfl, kRec, kNc},        {1, 6, 10, 1, kRep, kRec, kVer},
    {1, 7, 10, 2, kObs, kRaised, kNc},    {1, 8, 11, 3, kStrict, kRaised, kNc},
    {2, 1, -1, 3, kObs, kRaised, kNc},    {2, 2, 0, 0, kSfl, kRec, kNc},
    {2, 3, 4, 1, kRep, kRec, kInv},       {2, 4, 12, 2, kScal, kRec, kNc},
};

const char* const kLongEvidence =
    "plain tensor of unknown origin: no creating frame was recorded and no parameter, optimizer "
    "state or data loader batch matched its storage";

std::shared_ptr<RunAnalysis> fixture(int onlyRank = -1) {
    auto a = std::make_shared<RunAnalysis>();
    a->groups = {group(0, "aten::sub.Tensor", OriginClass::InputData, "train.py", 73),
                 group(1, "aten::_foreach_add_.List", OriginClass::OptimizerState,
                       "torch/optim/adam.py", 48),
                 group(2, "aten::mul.Tensor", OriginClass::CreatedInForward, "models/block.py", 12),
                 group(3, "aten::add.Tensor", OriginClass::Unknown, "", 0)};
    a->evidenceTexts = {"created by DataLoader batch #1", "optimizer Adam state exp_avg",
                        "created by aten::ones inside forward", kLongEvidence};
    for (const Row& row : kRows) {
        if (onlyRank >= 0 && row.rank != onlyRank) continue;
        IncidentRef r;
        r.rank = row.rank;
        r.seq = IncidentSeq{row.seq};
        r.step = row.step;
        // Rank-local clock: the rank term keeps times distinct across ranks.
        r.timeNs = (row.step + 1) * 1'000'000 + row.seq * 1000 + row.rank * 7;
        r.group = row.group;
        r.evidence = uint32_t(row.group);
        r.action = row.action;
        r.outcome = row.outcome;
        r.verdict = row.verdict;
        a->incidents.push_back(r);
    }
    return a;
}

Rows rows(const QAbstractItemModel& m) {
    Rows out;
    for (int r = 0; r < m.rowCount(); ++r) {
        QModelIndex i = m.index(r, 0);
        out.insert({i.data(M::RankRole).toInt(), i.data(M::SeqRole).toLongLong()});
    }
    return out;
}

QStringList column(const QAbstractItemModel& m, int c) {
    QStringList out;
    for (int r = 0; r < m.rowCount(); ++r)
        out << m.index(r, c).data().toString();
    return out;
}

QColor iconColor(const QVariant& decoration) {
    return decoration.value<QIcon>().pixmap(12, 12).toImage().pixelColor(6, 6);
}

// Rows of the fixture shared by several filters.
const Rows kOptimizerRows = {{0, 2}, {0, 6}, {0, 8}, {1, 2}, {1, 4}, {1, 6}, {2, 3}};
const Rows kMulRows = {{0, 3}, {0, 4}, {1, 3}, {1, 7}, {2, 4}};
const Rows kRank1Rows = {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}, {1, 7}, {1, 8}};

}  // namespace

class IncidentModelTest : public QObject {
    Q_OBJECT
  private slots:
    void passesTheModelTesterAcrossSnapshotsFiltersAndSorts() {
        IncidentTableModel model;
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t2(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setAnalysis(fixture());
        QCOMPARE(model.rowCount(), 20);
        proxy.sort(M::Step, Qt::DescendingOrder);
        QCOMPARE(proxy.index(0, M::Step).data().toString(), QString("12"));
        proxy.setOpFilter("tensor");
        proxy.setStepRange(0, 10);
        QCOMPARE(proxy.rowCount(), 9);
        // Second snapshot (a live run's redone analysis): the sort and the
        // filters stay, the rows are the new ones.
        model.setAnalysis(fixture(2));
        QCOMPARE(rows(proxy), (Rows{{2, 2}}));
        proxy.setStepRange(std::nullopt, std::nullopt);
        QCOMPARE(column(proxy, M::Step), (QStringList{"12", "0", "-1"}));
        proxy.sort(M::Op, Qt::AscendingOrder);
        QCOMPARE(column(proxy, M::Op),
                 (QStringList{"aten::add.Tensor", "aten::mul.Tensor", "aten::sub.Tensor"}));
        proxy.clearFilters();
        QCOMPARE(proxy.rowCount(), 4);
        model.setAnalysis(std::make_shared<RunAnalysis>());
        QCOMPARE(proxy.rowCount(), 0);
        model.setAnalysis(nullptr);
        QCOMPARE(model.rowCount(), 0);
        model.setAnalysis(fixture());
        proxy.setRank(1);
        QCOMPARE(rows(proxy), kRank1Rows);
    }

    void showsReadableCells() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        QModelIndex row = model.indexOf(1, 4);  // rank 1, step 4: the INVALID replicate
        QVERIFY(row.isValid());
        auto cell = [&](int c) { return model.index(row.row(), c).data().toString(); };
        QCOMPARE(cell(M::Rank), QString("1"));
        QCOMPARE(cell(M::Step), QString("4"));
        QCOMPARE(cell(M::TimeMs), QString("5.004"));  // 5'004'007 ns
        QCOMPARE(cell(M::Op), QString("aten::_foreach_add_.List"));
        QCOMPARE(cell(M::Origin), QString("E \u2014 optimizer or grad-clipping state"));
        QCOMPARE(cell(M::Action), QString("replicated"));
        QCOMPARE(cell(M::Outcome), QString("reconciled"));
        QCOMPARE(cell(M::Verdict), QString("INVALID"));
        QCOMPARE(cell(M::Location), QString("torch/optim/adam.py:48"));
        QCOMPARE(cell(M::Evidence), QString("optimizer Adam state exp_avg"));

        auto at = [&](int rank, int64_t seq, int c) {
            return model.index(model.indexOf(rank, seq).row(), c).data().toString();
        };
        QCOMPARE(at(0, 1, M::Origin), QString("D \u2014 input data not distributed"));
        QCOMPARE(at(0, 1, M::Verdict), QString());  // NotChecked: nothing to say
        QCOMPARE(at(0, 8, M::Verdict), QString("unverified"));
        QCOMPARE(at(0, 4, M::Action), QString("scalarized"));
        QCOMPARE(at(0, 4, M::Outcome), QString("failed"));
        QCOMPARE(at(0, 5, M::Action), QString("sharded_from_local"));
        QCOMPARE(at(2, 1, M::Step), QString("-1"));
        QCOMPARE(at(2, 1, M::TimeMs), QString("0.001"));  // 1'014 ns
        QCOMPARE(at(2, 1, M::Location), QString("<unknown>"));
        QCOMPARE(at(2, 1, M::Origin), QString("G \u2014 origin unknown"));
    }

    void tooltipsGiveTheFullText() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        QModelIndex row = model.indexOf(1, 8);
        QCOMPARE(model.index(row.row(), M::Evidence).data(Qt::ToolTipRole).toString(),
                 QString(kLongEvidence));
        QCOMPARE(model.index(row.row(), M::Location).data(Qt::ToolTipRole).toString(),
                 QString("<unknown>"));
        QVERIFY(!model.index(row.row(), M::Op).data(Qt::ToolTipRole).isValid());
    }

    void exposesRolesForFilteringAndSelection() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        QModelIndex i = model.indexOf(1, 4);
        QCOMPARE(i.data(M::RankRole).toInt(), 1);
        QCOMPARE(i.data(M::SeqRole).typeId(), int(QMetaType::LongLong));
        QCOMPARE(i.data(M::SeqRole).toLongLong(), 4);
        QCOMPARE(i.data(M::IncidentIndexRole).toInt(), 11);
        QCOMPARE(i.data(M::OriginRole).toInt(), int('E'));
        QCOMPARE(i.data(M::ActionRole).toInt(), int(Action::Replicated));
        QCOMPARE(i.data(M::FileRole).toString(), QString("torch/optim/adam.py"));
        auto sortValue = [&](int c) { return model.index(i.row(), c).data(M::SortRole); };
        QCOMPARE(sortValue(M::Rank).typeId(), int(QMetaType::Int));
        QCOMPARE(sortValue(M::Step).toLongLong(), 4);
        QCOMPARE(sortValue(M::Step).typeId(), int(QMetaType::LongLong));
        QCOMPARE(sortValue(M::TimeMs).toLongLong(), 5'004'007);
        QCOMPARE(sortValue(M::Op).typeId(), int(QMetaType::QString));
        QCOMPARE(sortValue(M::Op).toString(), QString("aten::_foreach_add_.List"));
    }

    void colorsRowsByOutcomeAndVerdict() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        const QColor red("#c62828"), magenta("#ad1457"), green("#2e7d32");
        auto cue = [&](int rank, int64_t seq, int c, int role) {
            return model.index(model.indexOf(rank, seq).row(), c).data(role);
        };
        const struct {
            int rank;
            int64_t seq;
            QColor color;
        } cases[] = {{0, 3, red}, {0, 4, red}, {1, 4, magenta}, {0, 2, green}, {2, 4, green}};
        for (const auto& c : cases) {
            QCOMPARE(cue(c.rank, c.seq, M::Outcome, Qt::ForegroundRole).value<QColor>(), c.color);
            QCOMPARE(cue(c.rank, c.seq, M::Verdict, Qt::ForegroundRole).value<QColor>(), c.color);
            QCOMPARE(iconColor(cue(c.rank, c.seq, M::Action, Qt::DecorationRole)), c.color);
            QVERIFY(!cue(c.rank, c.seq, M::Op, Qt::DecorationRole).isValid());
        }
        // The three icons are made once, not per row.
        QCOMPARE(cue(0, 3, M::Action, Qt::DecorationRole).value<QIcon>().cacheKey(),
                 cue(1, 7, M::Action, Qt::DecorationRole).value<QIcon>().cacheKey());
        QVERIFY(cue(0, 3, M::Action, Qt::DecorationRole).value<QIcon>().cacheKey() !=
                cue(0, 2, M::Action, Qt::DecorationRole).value<QIcon>().cacheKey());
    }

    void namesTheColumns() {
        IncidentTableModel model;
        QStringList titles;
        for (int c = 0; c < M::ColumnCount; ++c)
            titles << model.headerData(c, Qt::Horizontal).toString();
        QCOMPARE(titles, (QStringList{"Rank", "Step", "Time (ms)", "Op", "Kind", "Origin", "Action",
                                      "Outcome", "Cross-rank", "Call site", "Evidence"}));
        QCOMPARE(model.columnCount(), 11);
    }

    void findsEveryIncidentByRankAndSeq() {
        IncidentTableModel model;
        QVERIFY(!model.indexOf(0, 1).isValid());  // no analysis yet
        model.setAnalysis(fixture());
        for (int r = 0; r < model.rowCount(); ++r) {
            QModelIndex i = model.index(r, 0);
            QCOMPARE(model.indexOf(i.data(M::RankRole).toInt(), i.data(M::SeqRole).toLongLong()),
                     i);
        }
        QVERIFY(!model.indexOf(7, 1).isValid());
        QVERIFY(!model.indexOf(2, 5).isValid());
        // Rows of a replaced snapshot are looked up in the new one only.
        model.setAnalysis(fixture(2));
        QCOMPARE(model.indexOf(2, 3).row(), 2);
        QVERIFY(!model.indexOf(0, 1).isValid());
    }

    void sortsNumbersAsNumbers() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        proxy.setRank(0);
        proxy.sort(M::Step, Qt::AscendingOrder);
        QCOMPARE(column(proxy, M::Step), (QStringList{"0", "1", "2", "2", "9", "10", "11", "11"}));
        proxy.setRank(std::nullopt);
        proxy.sort(M::TimeMs, Qt::DescendingOrder);
        QCOMPARE(column(proxy, M::TimeMs).mid(0, 4),
                 (QStringList{"13.004", "12.008", "12.008", "12.007"}));
        QCOMPARE(column(proxy, M::TimeMs).last(), QString("0.001"));
    }

    void filtersAlone() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);

        proxy.setRank(1);
        QCOMPARE(rows(proxy), kRank1Rows);
        proxy.setRank(5);
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setRank(std::nullopt);

        proxy.setStepRange(2, 9);
        QCOMPARE(rows(proxy), (Rows{{0, 3}, {0, 4}, {0, 5}, {1, 3}, {1, 4}, {1, 5}, {2, 3}}));
        proxy.setStepRange(10, std::nullopt);
        QCOMPARE(rows(proxy), (Rows{{0, 6}, {0, 7}, {0, 8}, {1, 6}, {1, 7}, {1, 8}, {2, 4}}));
        proxy.setStepRange(std::nullopt, 0);
        QCOMPARE(rows(proxy), (Rows{{0, 1}, {1, 1}, {2, 1}, {2, 2}}));
        proxy.setStepRange(std::nullopt, std::nullopt);

        proxy.setOpFilter("MUL.tensor");
        QCOMPARE(rows(proxy), kMulRows);
        proxy.setOpFilter({});

        proxy.setOrigin(OriginClass::OptimizerState);
        QCOMPARE(rows(proxy), kOptimizerRows);
        proxy.setOrigin(OriginClass::WeightLoading);
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setOrigin(std::nullopt);

        proxy.setAction(Action::Observed);
        QCOMPARE(rows(proxy), (Rows{{0, 3}, {1, 3}, {1, 7}, {2, 1}}));
        proxy.setAction(Action::StrictError);
        QCOMPARE(rows(proxy), (Rows{{0, 7}, {1, 8}}));
        proxy.setAction(std::nullopt);

        proxy.setFileFilter("block");
        QCOMPARE(rows(proxy), kMulRows);
        // The file, not the formatted location: "<unknown>" is no file name.
        proxy.setFileFilter("unknown");
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setFileFilter({});

        proxy.setText("exp_avg");  // evidence
        QCOMPARE(rows(proxy), kOptimizerRows);
        proxy.setText("invalid");  // cross-rank verdict, any case
        QCOMPARE(rows(proxy), (Rows{{1, 4}, {2, 3}}));
        proxy.setText("5.004");  // time
        QCOMPARE(rows(proxy), (Rows{{1, 4}}));
        proxy.setText("no such thing");
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setText({});
        QCOMPARE(proxy.rowCount(), 20);
    }

    void filtersCombined() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        proxy.setRank(1);
        proxy.setOrigin(OriginClass::OptimizerState);
        proxy.setStepRange(3, 10);
        QCOMPARE(rows(proxy), (Rows{{1, 4}, {1, 6}}));
        proxy.setText("verified");
        QCOMPARE(rows(proxy), (Rows{{1, 6}}));
        proxy.clearFilters();
        proxy.setOpFilter("tensor");
        proxy.setAction(Action::Observed);
        proxy.setRank(1);
        QCOMPARE(rows(proxy), (Rows{{1, 3}, {1, 7}}));
        proxy.setFileFilter("train");
        QCOMPARE(proxy.rowCount(), 0);
        proxy.clearFilters();
        QCOMPARE(proxy.rowCount(), 20);
    }

    void filterBarDrivesTheProxy() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        IncidentFilterBar bar(&proxy);
        bar.setRanks({0, 1, 2});
        auto* rank = bar.findChild<QComboBox*>("rankFilter");
        auto* from = bar.findChild<QLineEdit*>("stepFrom");
        auto* to = bar.findChild<QLineEdit*>("stepTo");
        auto* op = bar.findChild<QLineEdit*>("opFilter");
        auto* origin = bar.findChild<QComboBox*>("originFilter");
        auto* action = bar.findChild<QComboBox*>("actionFilter");
        auto* file = bar.findChild<QLineEdit*>("fileFilter");
        auto* text = bar.findChild<QLineEdit*>("textFilter");
        auto* clearButton = bar.findChild<QPushButton*>("clearFilters");
        QVERIFY(rank && from && to && op && origin && action && file && text && clearButton);
        QCOMPARE(rank->count(), 4);
        QCOMPARE(rank->itemText(0), QString("all ranks"));
        QCOMPARE(rank->itemText(3), QString("rank 2"));
        QCOMPARE(origin->count(), int(kOrigins.size()) + 1);  // "all" and one per class
        QCOMPARE(origin->itemText(4), QString("D \u2014 input data not distributed"));
        QCOMPARE(action->count(), 6);
        QCOMPARE(action->itemText(3), QString("sharded_from_local"));

        rank->setCurrentIndex(2);  // rank 1
        QCOMPARE(rows(proxy), kRank1Rows);
        QTest::keyClicks(op, "mul");
        QCOMPARE(rows(proxy), (Rows{{1, 3}, {1, 7}}));
        QTest::keyClicks(from, "5");
        QCOMPARE(rows(proxy), (Rows{{1, 7}}));
        QTest::keyClicks(to, "9");
        QCOMPARE(proxy.rowCount(), 0);
        QTest::keyClick(to, Qt::Key_Backspace);  // open end again
        QCOMPARE(rows(proxy), (Rows{{1, 7}}));
        QTest::mouseClick(clearButton, Qt::LeftButton);
        QCOMPARE(proxy.rowCount(), 20);
        QCOMPARE(rank->currentIndex(), 0);
        QVERIFY(op->text().isEmpty() && from->text().isEmpty());

        action->setCurrentIndex(action->findData(int(Action::Replicated)));
        QCOMPARE(rows(proxy), kOptimizerRows);
        QTest::keyClicks(file, "optim");
        QCOMPARE(rows(proxy), kOptimizerRows);
        QTest::keyClicks(text, "INVALID");
        QCOMPARE(rows(proxy), (Rows{{1, 4}, {2, 3}}));
        origin->setCurrentIndex(origin->findData(int('B')));
        QCOMPARE(proxy.rowCount(), 0);
        origin->setCurrentIndex(origin->findData(int('E')));
        QCOMPARE(rows(proxy), (Rows{{1, 4}, {2, 3}}));

        bar.clear();
        QCOMPARE(proxy.rowCount(), 20);
        for (QComboBox* c : {rank, origin, action})
            QCOMPARE(c->currentIndex(), 0);
        for (QLineEdit* e : {from, to, op, file, text})
            QVERIFY(e->text().isEmpty());

        QTest::keyClicks(from, "x");  // the validator keeps steps numeric
        QVERIFY(from->text().isEmpty());
        QCOMPARE(proxy.rowCount(), 20);
    }

    void newRankListKeepsTheChosenRank() {
        IncidentTableModel model;
        model.setAnalysis(fixture());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        IncidentFilterBar bar(&proxy);
        bar.setRanks({0, 1, 2});
        auto* rank = bar.findChild<QComboBox*>("rankFilter");
        rank->setCurrentIndex(rank->findData(2));
        QCOMPARE(proxy.rowCount(), 4);
        bar.setRanks({0, 1, 2, 3});  // a live run grew a rank
        QCOMPARE(rank->currentText(), QString("rank 2"));
        QCOMPARE(proxy.rowCount(), 4);
        bar.setRanks({0, 1});  // the chosen rank is gone: all ranks
        QCOMPARE(rank->currentIndex(), 0);
        QCOMPARE(proxy.rowCount(), 20);
    }

    void emptyAndNullAnalysesAreFine() {
        IncidentTableModel model;
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t2(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        IncidentFilterBar bar(&proxy);
        bar.setRanks({});
        QVERIFY(!model.analysis());
        QCOMPARE(model.rowCount(), 0);
        QVERIFY(!model.index(0, 0).isValid());
        QVERIFY(!model.data({}).isValid());
        QCOMPARE(model.headerData(M::Verdict, Qt::Horizontal).toString(), QString("Cross-rank"));
        proxy.setText("x");
        proxy.setRank(0);
        proxy.sort(M::Step);
        QCOMPARE(proxy.rowCount(), 0);
        auto empty = std::make_shared<RunAnalysis>();
        model.setAnalysis(empty);
        QCOMPARE(model.analysis().get(), empty.get());
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(model.columnCount(), 11);
        bar.clear();
        QCOMPARE(proxy.rowCount(), 0);
        model.setAnalysis(nullptr);
        QVERIFY(!model.analysis());
        QVERIFY(!model.indexOf(0, 1).isValid());
    }

    void showsAndFiltersFailureKinds() {
        // Rank 0's step-2 incidents become a hang and a no-strategy failure.
        auto a = fixture();
        a->groups.push_back(group(4, "all_reduce", OriginClass::Unknown, "train.py", 90));
        a->groups.back().kind = IncidentKind::CollectiveHang;
        a->groups.push_back(group(5, "aten.view.default", OriginClass::Unknown, "model.py", 61));
        a->groups.back().kind = IncidentKind::NoShardingStrategy;
        for (IncidentRef& r : a->incidents) {
            if (r.rank != 0 || (r.seq.value() != 3 && r.seq.value() != 4)) continue;
            const bool hang = r.seq.value() == 3;
            r.group = hang ? 4 : 5;
            r.kind = hang ? IncidentKind::CollectiveHang : IncidentKind::NoShardingStrategy;
        }
        IncidentTableModel model;
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t2(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setAnalysis(a);
        auto at = [&](int rank, int64_t seq, int c, int role = Qt::DisplayRole) {
            return model.index(model.indexOf(rank, seq).row(), c).data(role);
        };
        QCOMPARE(at(0, 3, M::Kind).toString(), QString("hang"));
        QCOMPARE(at(0, 4, M::Kind).toString(), QString("no strategy"));
        QCOMPARE(at(0, 1, M::Kind).toString(), QString("mixed tensor"));
        QCOMPARE(at(0, 3, M::Kind, Qt::ToolTipRole).toString(),
                 QString("A collective did not complete in time"));
        QCOMPARE(at(0, 3, 0, M::KindRole).toInt(), int(IncidentKind::CollectiveHang));
        // A failure has no origin class: an empty cell, and no origin filter matches it.
        QCOMPARE(at(0, 3, M::Origin).toString(), QString());
        QVERIFY(!at(0, 3, 0, M::OriginRole).isValid());
        // Its kind's colour beside the tag; mixed tensors have none there.
        QCOMPARE(iconColor(at(0, 3, M::Kind, Qt::DecorationRole)),
                 QColor(QRgb(incidentKindInfo(IncidentKind::CollectiveHang).rgb)));
        QVERIFY(!at(0, 1, M::Kind, Qt::DecorationRole).isValid());

        proxy.setKind(IncidentKind::CollectiveHang);
        QCOMPARE(rows(proxy), (Rows{{0, 3}}));
        proxy.setKind(IncidentKind::MixedTensor);
        QCOMPARE(proxy.rowCount(), 18);
        proxy.setKind(IncidentKind::DTensorError);
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setKind(std::nullopt);
        proxy.setText("no strategy");
        QCOMPARE(rows(proxy), (Rows{{0, 4}}));
        proxy.clearFilters();
        QCOMPARE(proxy.rowCount(), 20);

        // The filter bar: "all kinds" and one item per kind, with its title as tooltip.
        IncidentFilterBar bar(&proxy);
        auto* kind = bar.findChild<QComboBox*>("kindFilter");
        QVERIFY(kind);
        QCOMPARE(kind->count(), int(kIncidentKinds.size()) + 1);
        QCOMPARE(kind->itemText(0), QString("all kinds"));
        kind->setCurrentIndex(kind->findData(int(IncidentKind::NoShardingStrategy)));
        QCOMPARE(rows(proxy), (Rows{{0, 4}}));
        QCOMPARE(kind->currentText(), QString("no strategy"));
        bar.clear();
        QCOMPARE(kind->currentIndex(), 0);
        QCOMPARE(proxy.rowCount(), 20);
    }

    void listsWhereEachRankStopped() {
        auto a = std::make_shared<RunAnalysis>();
        RankStop hung;
        hung.rank = 0;
        hung.collectives = 4;
        hung.stoppedIn = IncidentKind::CollectiveHang;
        hung.pending = "all_reduce on default_pg (2 ranks)";
        hung.pendingSite = {"model.py", 70, "forward"};
        hung.pendingNs = 5000;
        hung.lastCollectiveNs = 4000;
        hung.ended = "killed by SIGKILL";
        RankStop closed;
        closed.rank = 1;
        closed.closed = true;
        closed.collectives = 3;
        closed.lastCollective = "broadcast on default_pg (2 ranks) (step 2)";
        closed.lastCollectiveNs = 3000;
        a->stops = {hung, closed};
        RankStopModel model;
        QAbstractItemModelTester t(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setAnalysis(a);
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.columnCount(), 2);
        QCOMPARE(model.headerData(RankStopModel::State, Qt::Horizontal).toString(),
                 QString("Where it stopped"));
        QCOMPARE(model.index(0, RankStopModel::Rank).data().toInt(), 0);
        QCOMPARE(model.index(0, RankStopModel::State).data().toString(),
                 QString::fromStdString(hung.state()));
        QVERIFY(model.index(0, RankStopModel::State).data().toString().startsWith("waited in"));
        QCOMPARE(model.index(1, RankStopModel::State).data().toString(),
                 QString::fromStdString(closed.state()));
        QCOMPARE(model.index(0, 0).data(RankStopModel::StoppedInRole).toInt(),
                 int(IncidentKind::CollectiveHang));
        QVERIFY(!model.index(1, 0).data(RankStopModel::StoppedInRole).isValid());
        QCOMPARE(model.index(0, 0).data(RankStopModel::TimeRole).toLongLong(), 5000);
        QCOMPARE(model.index(1, 0).data(RankStopModel::TimeRole).toLongLong(), 3000);
        QCOMPARE(model.index(0, RankStopModel::State).data(Qt::ForegroundRole).value<QColor>(),
                 QColor(QRgb(incidentKindInfo(IncidentKind::CollectiveHang).rgb)));
        model.setAnalysis(nullptr);
        QCOMPARE(model.rowCount(), 0);
    }

    void toleratesDanglingGroupAndEvidence() {
        // An incident whose group or evidence index is out of range shows
        // empty cells rather than reading past the vectors.
        auto a = std::make_shared<RunAnalysis>();
        IncidentRef r;
        r.rank = 0;
        r.seq = IncidentSeq{1};
        r.group = 3;
        r.evidence = 9;
        a->incidents.push_back(r);
        IncidentTableModel model;
        QAbstractItemModelTester t(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setAnalysis(a);
        for (int c : {int(M::Op), int(M::Origin), int(M::Location), int(M::Evidence)})
            QCOMPARE(model.index(0, c).data().toString(), QString());
        QVERIFY(!model.index(0, 0).data(M::OriginRole).isValid());
        IncidentFilterModel proxy;
        proxy.setSourceModel(&model);
        proxy.setOrigin(OriginClass::Unknown);
        QCOMPARE(proxy.rowCount(), 0);
        proxy.setOrigin(std::nullopt);
        proxy.setText("raised");
        QCOMPARE(proxy.rowCount(), 1);
    }
};

QTEST_MAIN(IncidentModelTest)
#include "incident_model_test.moc"
