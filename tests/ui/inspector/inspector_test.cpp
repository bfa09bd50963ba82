// The inspector: what it says about an incident and an op, that recorded
// strings stay text, Copy, the mesh drawing's cells and layout, and
// describeOp on a real rank file. Saves screenshots of the dock showing a
// reconciled incident on a 2-D mesh (wide and narrow) and a raised one.

#include <unistd.h>

#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QTextBrowser>
#include <QtTest>
#include <array>
#include <filesystem>

#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "ui/inspector/inspector_widget.h"
#include "ui/inspector/mesh_view.h"
#include "ui/inspector/op_detail.h"

using namespace meshscope;
using namespace meshscope::ui;

namespace {

OperandDetail operand(int index, bool plain, const char* shape, const char* localShape,
                      const char* placements, const char* label) {
    OperandDetail o;
    o.index = index;
    o.plain = plain;
    o.dtype = "torch.float32";
    o.shape = shape;
    o.localShape = localShape;
    o.placements = placements;
    o.label = label;
    return o;
}

// Rank 1 of a 2x2 (dp, tp) mesh: the plain batch promoted to Shard(0) on dp.
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
    d.operands = {operand(0, true, "[16, 32]", "[16, 32]", "", "batch"),
                  operand(1, false, "[16, 32]", "[8, 32]", "[Shard(0), Replicate()]", "fc.bias")};
    d.mesh = MeshRecord{MeshId{1}, "cuda", {2, 2}, {"dp", "tp"}, {0, 1, 2, 3}};
    d.stack = {{"train.py", 73, "training_step"}, {"loop.py", 12, "main"}};
    d.createdAt = "data.py:40";
    return d;
}

const char* const kHostileOp = "aten::add<script>alert(1)</script>%1";
const char* const kHostileEvidence = "</td><img src=x onerror=alert(1)> &amp; \xff\xfe";

// Rank 0 of a 1-D mesh of 2: raised, every recorded string hostile.
IncidentDetail hostileRaised() {
    IncidentDetail d;
    d.rank = 0;
    d.seq = IncidentSeq{2};
    d.op = kHostileOp;
    d.origin = OriginClass::Unknown;
    d.evidence = kHostileEvidence;
    d.error = "got mixed torch.Tensor and DTensor </td>";
    d.action = Action::Observed;
    d.outcome = Outcome::Raised;
    d.operands = {operand(0, true, "[8]", "[8]", "", "<b>label</b>"),
                  operand(1, false, "[8]", "[4]", "[Shard(0)]", "w\xff")};
    d.mesh = MeshRecord{MeshId{1}, "cpu", {2}, {"model"}, {0, 1}};
    d.stack = {{"<script>.py", 5, "f</td>"}};
    return d;
}

// Shows `w` at `size` (offscreen) so layouts and scroll bars settle.
void showAt(QWidget& w, QSize size) {
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCoreApplication::processEvents();
}

void save(QWidget& w, const QString& name) {
    QDir().mkpath(INSPECTOR_SCREENSHOTS);
    QVERIFY(w.grab().save(QString(INSPECTOR_SCREENSHOTS) + "/" + name));
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
        check.fingerprints = {{0, 0x20db4899569dea6aULL},
                              {1, 0x20db4899569dea6aULL},
                              {2, 0x1111ULL},
                              {3, std::nullopt}};
        IncidentGroup group;
        group.id = 4;
        group.count = 12;
        group.site = {"train.py", 73, "training_step"};
        group.fix = {"Distribute the batch", "DTensor.from_local(batch, mesh, [Shard(0)])"};
        w.showIncident(d, &ref, &group, &check, d.evidence);
        const QString text = w.plainText();
        for (const char* expected :
             {"Incident #7 on rank 1: aten::sub.Tensor",
              "step: 3",
              "action: sharded_from_local",
              "outcome: reconciled",
              "0 | in | PLAIN tensor | torch.float32 | [16, 32] | [16, 32]",
              "1 | in | DTensor | torch.float32 | [16, 32] | [8, 32] | [Shard(0), Replicate()]",
              "plain operand: operand 0 batch torch.float32 [16, 32]",
              "placements: plain (no placement) -> DTensor [Shard(0), Replicate()]",
              "verdict: INVALID",
              "1 | 20db4899569dea6a | this incident",
              "2 | 0000000000001111 | DIFFERS",
              "3 | none | not recorded",
              "class: D - input data not distributed",
              "evidence: created by DataLoader batch #12",
              "plain tensor created at: data.py:40",
              "train.py:73  training_step",
              "loop.py:12  main",
              "group #4, 12 incident(s) at train.py:73",
              "Distribute the batch",
              "DTensor.from_local(batch, mesh, [Shard(0)])",
              "device mesh (dp=2, tp=2) on cuda",
              "rank 3: op1 rows 8-15 of [16, 32]"})
            QVERIFY2(text.contains(QString::fromUtf8(expected)), expected);
        // Rank 0 agrees with the majority: no DIFFERS on its row.
        QVERIFY(text.contains("0 | 20db4899569dea6a | \n"));
        // Stack innermost first.
        QVERIFY(text.indexOf("train.py:73") < text.indexOf("loop.py:12"));
        // The browser shows the same sections.
        auto* browser = w.findChild<QTextBrowser*>("inspectorText");
        QVERIFY(browser->toPlainText().contains("DTensor.from_local(batch, mesh, [Shard(0)])"));

        // Mesh: four cells; once promoted with from_local(Shard(0)) each rank's
        // [16, 32] batch is its rows of a [32, 32] DTensor: rank 1 (dp 0, tp 1)
        // holds rows 0-15.
        MeshView& mesh = w.meshView();
        QCOMPARE(mesh.cellCount(), size_t(4));
        QCOMPARE(QString::fromStdString(mesh.cellLines(1).front()), QString("rank 1 (here)"));
        QCOMPARE(mesh.cellLines(1).back(), std::string("op0 rows 0-15 of [32, 32]"));
        QCOMPARE(mesh.cellLines(2).back(), std::string("op0 rows 16-31 of [32, 32]"));
        QCOMPARE(QString::fromStdString(mesh.cellLines(0).front()), QString("rank 0"));
        QCOMPARE(mesh.arrowLabel(), QString::fromUtf8("promoted → [Shard(0), Replicate()]"));

        w.findChild<QPushButton*>("copyButton")->click();
        QCOMPARE(QApplication::clipboard()->text(), text);

        // At 620 px (a dock) the plain operand sits above the mesh; the whole
        // drawing fits, with no scrolling in either direction.
        showAt(w, {620, 720});
        auto* scroll = w.findChild<QScrollArea*>("meshScroll");
        QVERIFY(mesh.stackedAt(mesh.width()));
        QVERIFY(!scroll->horizontalScrollBar()->isVisible());
        QVERIFY(!scroll->verticalScrollBar()->isVisible());
        save(w, "inspector-reconciled-2d.png");

        // Wide enough, it sits left of the mesh, and the drawing is shorter.
        w.resize(960, 720);
        QCoreApplication::processEvents();
        QVERIFY(!mesh.stackedAt(mesh.width()));
        QVERIFY(mesh.heightForWidth(mesh.width()) < mesh.heightForWidth(600));
        QVERIFY(!scroll->horizontalScrollBar()->isVisible());
        save(w, "inspector-reconciled-2d-wide.png");
    }

    void recordedStringsStayText() {
        InspectorWidget w;
        IncidentDetail d = hostileRaised();
        w.showIncident(d, nullptr, nullptr, nullptr, d.evidence);
        const QString html = w.html();
        QVERIFY(!html.contains("<script>"));
        QVERIFY(!html.contains("<img"));
        QVERIFY(!html.contains("<b>label"));
        QVERIFY(html.contains("f&lt;/td&gt;"));  // no table cell closed by a recorded string
        QVERIFY(html.contains("&amp;amp;"));
        const QString replacement(QChar(0xFFFD));
        const QString shown = w.findChild<QTextBrowser*>("inspectorText")->toPlainText();
        for (const QString& text : {w.plainText(), shown}) {
            QVERIFY(text.contains(QString::fromUtf8(kHostileOp)));
            QVERIFY(text.contains("</td><img src=x onerror=alert(1)> &amp; " + replacement));
            QVERIFY(text.contains("<b>label</b>"));
            QVERIFY(text.contains("<script>.py:5  f</td>"));
            QVERIFY(text.contains("raised: got mixed torch.Tensor and DTensor </td>"));
            QVERIFY(text.contains("verdict: not checked"));
            QVERIFY(text.contains("class: G - origin unknown"));
        }
        MeshView& mesh = w.meshView();
        QCOMPARE(mesh.cellCount(), size_t(2));
        QVERIFY(mesh.cellLines(0) ==
                (std::vector<std::string>{"rank 0 (here)", "op1 rows 0-3 of [8]"}));
        QCOMPARE(mesh.cellLines(1).at(1), std::string("op1 rows 4-7 of [8]"));
        QCOMPARE(mesh.arrowLabel(), QString("raised"));
        showAt(w, {620, 720});
        save(w, "inspector-raised.png");
    }

    void damagedStringsDoNotThrowOrSprawl() {
        IncidentDetail d = reconciledOn2dMesh();
        d.operands[1].shape = "[99999999999999999999999, 4]";  // past int64: stoll throws
        d.operands[0].shape = std::string(100000, '9');        // past std::regex's recursion
        OperandDetail odd = d.operands[1];
        odd.index = 2;
        odd.placements = std::string(5000, '[');  // unparseable: comes back verbatim
        d.operands.push_back(odd);
        d.mesh->shape = {int64_t(1) << 40, 3};  // far too many ranks to draw
        d.mesh->dimNames = {std::string(5000, 'd'), "tp"};
        InspectorWidget w;
        w.showIncident(d, nullptr, nullptr, nullptr, "");
        MeshView& mesh = w.meshView();
        QCOMPARE(mesh.cellCount(), size_t(255));  // whole rows of 3, at most kMaxCells
        const auto& cell = mesh.cellLines(0);
        QCOMPARE(cell.size(), size_t(4));
        QCOMPARE(cell[1], std::string("op1 [Shard(0), Replicate()]"));
        QCOMPARE(cell[2], "op2 " + std::string(5000, '['));
        QCOMPARE(cell[3], std::string("op0 [Shard(0), Replicate()]"));
        QVERIFY(w.plainText().contains("first 255 of"));
        // Copy keeps every character; the browser and the drawing elide.
        QVERIFY(w.plainText().contains(QString(100000, '9')));
        QVERIFY(!w.html().contains(QString(2001, '9')));
        QVERIFY(mesh.sizeHint().width() < 2000);
        showAt(w, {620, 400});
        QVERIFY(!w.grab().isNull());  // painting copes too

        d.mesh->shape = {int64_t(1) << 40};  // one row, longer than kMaxCells
        w.showIncident(d, nullptr, nullptr, nullptr, "");
        QCOMPARE(mesh.cellCount(), MeshView::kMaxCells);
        QVERIFY(!w.grab().isNull());
    }

    void failedPromotionIsDrawnRaised() {
        IncidentDetail d = reconciledOn2dMesh();
        d.outcome = Outcome::Failed;
        d.error = "RuntimeError: shape mismatch";
        InspectorWidget w;
        w.showIncident(d, nullptr, nullptr, nullptr, "");
        QVERIFY(w.plainText().contains(
            "raised: promotion to [Shard(0), Replicate()] failed: RuntimeError: shape mismatch"));
        QVERIFY(!w.plainText().contains("plain (no placement)"));
        QCOMPARE(w.meshView().arrowLabel(), QString("raised"));
        QVERIFY(w.plainText().contains("promotion to [Shard(0), Replicate()] failed)"));
    }

    void opWithReconciledIncident() {
        OpDetail op;
        op.rank = 1;
        op.seq = OpSeq{40};
        op.name = "aten::sub.Tensor";
        op.startNs = 1000;
        op.endNs = 3500;
        op.thread = 2;
        op.threadName = "pt_autograd_0";
        op.step = 3;
        op.phase = Phase::Backward;
        op.reconciles = IncidentSeq{7};
        IncidentDetail d = reconciledOn2dMesh();
        op.operands = {operand(0, false, "[16, 32]", "[8, 32]", "[Shard(0), Replicate()]", "batch"),
                       d.operands[1]};
        op.mesh = d.mesh;
        InspectorWidget w;
        w.showOp(op, &d);
        const QString text = w.plainText();
        for (const char* expected :
             {"Op #40 on rank 1: aten::sub.Tensor", "thread: pt_autograd_0 (thread 2)", "step: 3",
              "phase: backward", "duration: 2.50 µs",
              "promoted op of incident #7: operand 0 batch torch.float32 [16, 32] became "
              "[Shard(0), "
              "Replicate()]",
              "0 | in | DTensor | torch.float32 | [16, 32] | [8, 32] | [Shard(0), Replicate()] | "
              "batch",
              "No user frame recorded."})
            QVERIFY2(text.contains(QString::fromUtf8(expected)), expected);
        QVERIFY(w.meshView().arrowLabel().isEmpty());  // an op has no plain operand
        QCOMPARE(w.meshView().cellLines(3).size(), size_t(3));

        w.showOp(op, nullptr);
        QVERIFY(w.plainText().contains("promoted op of incident #7 (incident not loaded)"));

        op.mesh.reset();  // no DTensor operand recorded with a mesh: said, not drawn
        w.showOp(op, nullptr);
        QCOMPARE(w.meshView().cellCount(), size_t(0));
        QVERIFY(w.plainText().contains("No device mesh recorded for this op"));
    }

    void messageAndClear() {
        InspectorWidget w;
        auto* copy = w.findChild<QPushButton*>("copyButton");
        QVERIFY(!copy->isEnabled());
        w.showMessage("This op is not in the rank file. <b>");
        QCOMPARE(w.plainText(), QString("This op is not in the rank file. <b>"));
        QVERIFY(!w.html().contains("<b>"));
        QVERIFY(copy->isEnabled());
        QCOMPARE(w.meshView().cellCount(), size_t(0));
        w.showIncident(reconciledOn2dMesh(), nullptr, nullptr, nullptr, "");
        w.clear();
        QVERIFY(w.plainText().trimmed().isEmpty());
        QVERIFY(!copy->isEnabled());
        QCOMPARE(w.meshView().cellCount(), size_t(0));
    }

    void describeOpReadsARankFile() {
        namespace fs = std::filesystem;
        fs::path dir =
            fs::temp_directory_path() / ("meshscope-inspector-" + std::to_string(getpid()));
        fs::remove_all(dir);
        Manifest m;
        m.runId = "op";
        m.worldSize = 2;
        auto w = createRankWriter(dir, m, 1);
        MeshRecord mesh{w->newMeshId(), "cpu", {2}, {"model"}, {0, 1}};
        w->submit(Record{mesh});
        TensorRecord weight{w->newTensorId(),
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
        TensorRecord out = weight;
        out.id = w->newTensorId();
        out.label = w->intern("out");
        w->submit(Record{weight});
        w->submit(Record{out});
        w->submit(Record{MetaRecord{"thread.3", "pt_autograd_0"}});
        OpRecord op;
        op.startNs = 1000;
        op.endNs = 4000;
        op.thread = 3;
        op.name = w->intern("aten::mm");
        op.step = 2;
        op.phase = Phase::Forward;
        op.depth = 1;
        op.incident = IncidentSeq{5};
        op.stack = w->internStack(std::array{Frame{w->intern("model.py"), 41, w->intern("forward")},
                                             Frame{w->intern("train.py"), 9, w->intern("main")}});
        op.operands = {
            {0, OperandRole::Input, OperandKind::Tensor, weight.id, 0, StringId{}},
            {1, OperandRole::Input, OperandKind::Scalar, TensorId{}, 2.5, StringId{}},
            {2, OperandRole::Output, OperandKind::Tensor, out.id, 0, w->intern("[Replicate()]")}};
        OpSeq seq = w->submit(std::move(op));
        w->close();

        RunReader run = RunReader::open(dir);
        const RankReader& rank = run.ranks().at(0);
        std::optional<OpDetail> detail = describeOp(rank, seq);
        QVERIFY(detail);
        QCOMPARE(detail->rank, 1);
        QVERIFY(detail->seq == seq);
        QCOMPARE(QString::fromStdString(detail->name), QString("aten::mm"));
        QCOMPARE(QString::fromStdString(detail->threadName), QString("pt_autograd_0"));
        QCOMPARE(detail->thread, 3u);
        QCOMPARE(detail->startNs, int64_t(1000));
        QCOMPARE(detail->endNs, int64_t(4000));
        QCOMPARE(detail->step, int64_t(2));
        QVERIFY(detail->phase == Phase::Forward);
        QCOMPARE(detail->depth, 1);
        QVERIFY(detail->reconciles == IncidentSeq{5});
        QCOMPARE(detail->operands.size(), size_t(3));
        // Placements from the tensor, from the operand record, none for a scalar.
        QCOMPARE(QString::fromStdString(detail->operands[0].placements), QString("[Shard(0)]"));
        QCOMPARE(QString::fromStdString(detail->operands[0].label), QString("fc.weight"));
        QCOMPARE(QString::fromStdString(detail->operands[0].localShape), QString("[4, 4]"));
        QVERIFY(detail->operands[1].scalar);
        QCOMPARE(detail->operands[1].scalarValue, 2.5);
        QVERIFY(detail->operands[2].output);
        QCOMPARE(QString::fromStdString(detail->operands[2].placements), QString("[Replicate()]"));
        QVERIFY(detail->mesh);
        QVERIFY(detail->mesh->dimNames == std::vector<std::string>{"model"});
        QCOMPARE(detail->stack.size(), size_t(2));
        QCOMPARE(QString::fromStdString(formatLocation(detail->stack[0])), QString("model.py:41"));
        QCOMPARE(QString::fromStdString(detail->stack[0].function), QString("forward"));
        QVERIFY(!describeOp(rank, OpSeq{seq.value() + 5}));
        QVERIFY(!describeOp(rank, OpSeq{}));

        InspectorWidget view;
        view.showOp(*detail, nullptr);
        QVERIFY(view.plainText().contains("thread: pt_autograd_0 (thread 3)"));
        QVERIFY(view.plainText().contains(QString::fromUtf8("duration: 3.00 µs")));
        QVERIFY(view.plainText().contains("model.py:41  forward"));
        QVERIFY(view.meshView().cellLines(1) ==
                (std::vector<std::string>{"rank 1 (here)", "op0 rows 4-7 of [8, 4]",
                                          "out2 all of [8, 4]"}));
        fs::remove_all(dir);
    }
};

QTEST_MAIN(InspectorTest)
#include "inspector_test.moc"
