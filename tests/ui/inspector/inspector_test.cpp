// The inspector: what it says about an incident and an op, that recorded
// strings stay text, Copy, the mesh drawing's cells, and describeOp on a
// real rank file. Saves screenshots of both drawings.

#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QPushButton>
#include <QtTest>
#include <filesystem>

#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "ui/inspector/inspector_widget.h"
#include "ui/inspector/mesh_view.h"
#include "ui/inspector/op_detail.h"

using namespace meshscope;
using namespace meshscope::ui;

namespace {

OperandDetail operand(int index, bool plain, const char* shape, const char* placements,
                      const char* label) {
    OperandDetail o;
    o.index = index;
    o.plain = plain;
    o.dtype = "torch.float32";
    o.shape = shape;
    o.localShape = plain ? shape : "[4, 32]";
    o.placements = placements;
    o.label = label;
    return o;
}

IncidentDetail reconciledOn2dMesh() {
    IncidentDetail d;
    d.rank = 1;
    d.seq = IncidentSeq{7};
    d.step = 3;
    d.op = "aten::sub.Tensor";
    d.origin = OriginClass::InputData;
    d.evidence = "created by DataLoader batch #12";
    d.policyRule = "auto: per-rank input data -> from_local(Shard(0))";
    d.action = Action::ShardedFromLocal;
    d.outcome = Outcome::Reconciled;
    d.promotedPlacements = "[Shard(0), Replicate()]";
    d.fingerprint = 0x20db4899569dea6aULL;
    d.operands = {operand(0, true, "[16, 32]", "", "batch"),
                  operand(1, false, "[16, 32]", "[Shard(0), Replicate()]", "fc.weight")};
    d.mesh = MeshRecord{MeshId{1}, "cpu", {2, 2}, {"dp", "tp"}, {0, 1, 2, 3}};
    d.stack = {{"train.py", 73, "training_step"}, {"loop.py", 12, "main"}};
    d.createdAt = "data.py:40";
    return d;
}

IncidentDetail hostileRaised() {
    IncidentDetail d;
    d.rank = 0;
    d.seq = IncidentSeq{2};
    d.op = "aten::add<script>alert(1)</script>";
    d.origin = OriginClass::Unknown;
    d.evidence = "</td><img src=x onerror=alert(1)> &amp; \xff\xfe";
    d.error = "got mixed torch.Tensor and DTensor";
    d.action = Action::Observed;
    d.outcome = Outcome::Raised;
    d.operands = {operand(0, true, "[8]", "", "<b>label</b>"),
                  operand(1, false, "[8]", "[Shard(0)]", "w")};
    d.mesh = MeshRecord{MeshId{1}, "cpu", {2}, {"model"}, {0, 1}};
    return d;
}

}  // namespace

class InspectorTest : public QObject {
    Q_OBJECT
  private slots:
    void incidentShowsEverySection() {
        InspectorWidget w;
        IncidentDetail d = reconciledOn2dMesh();
        IncidentRef ref;
        ref.rank = 1;
        ref.verdict = Verdict::Invalid;
        PromotionCheck check;
        check.fingerprints = {{0, 0x1111ULL}, {1, 0x20db4899569dea6aULL}};
        IncidentGroup group;
        group.fix = {"Distribute the batch", "DTensor.from_local(batch, mesh, [Shard(0)])"};
        w.showIncident(d, &ref, &group, &check, d.evidence);
        QString text = w.plainText();
        for (const char* expected :
             {"aten::sub.Tensor", "[16, 32]", "[Shard(0), Replicate()]", "-> DTensor", "INVALID",
              "0000000000001111", "20db4899569dea6a", "created by DataLoader batch #12",
              "data.py:40", "train.py:73", "training_step", "Distribute the batch",
              "DTensor.from_local(batch, mesh, [Shard(0)])", "D - input data"})
            QVERIFY2(text.contains(expected), expected);
        // Mesh: four cells; rank 1 holds rows 0-7 of the promoted batch (dp coordinate 0).
        QCOMPARE(w.meshView().cellCount(), size_t(4));
        auto cell = w.meshView().cellLines(1);
        QCOMPARE(QString::fromStdString(cell[0]), QString("rank 1 (here)"));
        QVERIFY(QString::fromStdString(cell.back()).contains("rows 0-7"));
        w.findChild<QPushButton*>("copyButton")->click();
        QCOMPARE(QApplication::clipboard()->text(), text);
        save(w, "inspector-reconciled-2d.png");
    }

    void recordedStringsStayText() {
        InspectorWidget w;
        IncidentDetail d = hostileRaised();
        w.showIncident(d, nullptr, nullptr, nullptr, d.evidence);
        QVERIFY(!w.html().contains("<script>"));
        QVERIFY(!w.html().contains("<img"));
        QVERIFY(w.plainText().contains("aten::add<script>alert(1)</script>"));
        QVERIFY(w.plainText().contains("<img src=x onerror=alert(1)>"));
        QVERIFY(w.plainText().contains("got mixed torch.Tensor and DTensor"));
        QVERIFY(w.plainText().contains("analysis not ready yet"));
        save(w, "inspector-raised.png");
    }

    void opOnARealRankFile() {
        namespace fs = std::filesystem;
        fs::path dir =
            fs::temp_directory_path() / ("meshscope-inspector-" + std::to_string(getpid()));
        fs::remove_all(dir);
        Manifest m;
        m.runId = "op";
        m.worldSize = 2;
        auto w = createRankWriter(dir, m, 0);
        MeshRecord mesh{w->newMeshId(), "cpu", {2}, {"model"}, {0, 1}};
        w->submit(Record{mesh});
        TensorRecord t{w->newTensorId(),
                       w->intern("torch.float32"),
                       w->intern("[8, 4]"),
                       w->intern("[4, 4]"),
                       w->intern("cpu"),
                       mesh.id,
                       w->intern("[Shard(0)]"),
                       w->intern("fc.weight"),
                       StackId{},
                       16,
                       true};
        w->submit(Record{t});
        w->submit(Record{MetaRecord{"thread.0", "MainThread"}});
        OpRecord op;
        op.startNs = 1000;
        op.endNs = 4000;
        op.name = w->intern("aten::mm");
        op.step = 2;
        op.phase = Phase::Forward;
        op.stack =
            w->internStack(std::array{Frame{w->intern("model.py"), 41, w->intern("forward")}});
        op.operands = {{0, OperandRole::Input, OperandKind::Tensor, t.id, 0, StringId{}},
                       {1, OperandRole::Input, OperandKind::Scalar, TensorId{}, 2.5, StringId{}}};
        OpSeq seq = w->submit(std::move(op));
        w->close();
        RunReader run = RunReader::open(dir);
        auto detail = describeOp(run.ranks()[0], seq);
        QVERIFY(detail);
        QCOMPARE(QString::fromStdString(detail->name), QString("aten::mm"));
        QCOMPARE(QString::fromStdString(detail->threadName), QString("MainThread"));
        QCOMPARE(detail->operands.size(), size_t(2));
        QCOMPARE(QString::fromStdString(detail->operands[0].placements), QString("[Shard(0)]"));
        QVERIFY(detail->operands[1].scalar);
        QVERIFY(detail->mesh);
        QCOMPARE(detail->stack.at(0).line, 41);
        QVERIFY(!describeOp(run.ranks()[0], OpSeq{seq.value() + 5}));
        InspectorWidget view;
        view.showOp(*detail, nullptr);
        QVERIFY(view.plainText().contains("MainThread"));
        QVERIFY(view.plainText().contains("3.00 us"));
        QVERIFY(view.plainText().contains("model.py:41"));
        QCOMPARE(view.meshView().cellLines(0).at(1), std::string("op0 rows 0-3 of [8, 4]"));
        fs::remove_all(dir);
    }

  private:
    void save(QWidget& w, const QString& name) {
        w.resize(620, 720);
        QDir().mkpath(UI_SCREENSHOTS);
        QVERIFY(w.grab().save(QString(UI_SCREENSHOTS) + "/" + name));
    }
};

QTEST_MAIN(InspectorTest)
#include "inspector_test.moc"
