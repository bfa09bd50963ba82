// Every record type written through RankWriter comes back from RankReader
// unchanged; ordering, interning and ids behave as documented.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <array>

#include "core/report/run_json.h"
#include "core/store/rank_reader.h"
#include "core/store/rank_writer.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

class RoundTrip : public ::testing::Test {
  protected:
    std::unique_ptr<RankWriter> open() {
        return RankWriter::create(m_dir / "rank-00000.msdb", RankIdentity{3, 8, "run-xyz"});
    }
    RankReader reopen() { return RankReader::open(m_dir / "rank-00000.msdb"); }
    test::TempDir m_dir;
};

TEST_F(RoundTrip, RankIdentityAndMeta) {
    auto w = open();
    w->submit(Record{MetaRecord{"torch_version", "2.11.0"}});
    w->close();
    RankReader r = reopen();
    EXPECT_EQ(r.info().rank, 3);
    EXPECT_EQ(r.info().worldSize, 8);
    EXPECT_EQ(r.info().runId, "run-xyz");
    EXPECT_EQ(r.info().meta.at("torch_version"), "2.11.0");
    EXPECT_GT(r.info().clockOriginWallNs, 0);
    ASSERT_TRUE(r.info().endedNs.has_value());
}

TEST_F(RoundTrip, MeshAndTensor) {
    auto w = open();
    MeshRecord mesh{
        w->newMeshId(), "cpu", {2, 4}, {"dp", "tp \"quoted\""}, {0, 1, 2, 3, 4, 5, 6, 7}};
    w->submit(Record{mesh});
    StackId created =
        w->internStack(std::array{Frame{w->intern("model.py"), 41, w->intern("forward")}});
    TensorRecord t{w->newTensorId(),
                   w->intern("torch.float32"),
                   w->intern("[8, 16]"),
                   w->intern("[4, 16]"),
                   w->intern("cpu"),
                   mesh.id,
                   w->intern("[Shard(0), Replicate()]"),
                   w->intern("lm_head.weight"),
                   created,
                   128,
                   true};
    w->submit(Record{t});
    w->close();

    RankReader r = reopen();
    auto meshes = r.meshes();
    ASSERT_EQ(meshes.size(), 1u);
    EXPECT_EQ(meshes[0].id, mesh.id);
    EXPECT_EQ(meshes[0].shape, mesh.shape);
    EXPECT_EQ(meshes[0].dimNames, mesh.dimNames);
    EXPECT_EQ(meshes[0].ranks, mesh.ranks);
    auto back = r.tensor(t.id);
    ASSERT_TRUE(back);
    EXPECT_EQ(r.string(back->dtype), "torch.float32");
    EXPECT_EQ(r.string(back->globalShape), "[8, 16]");
    EXPECT_EQ(r.string(back->localShape), "[4, 16]");
    EXPECT_EQ(r.string(back->placements), "[Shard(0), Replicate()]");
    EXPECT_EQ(r.string(back->label), "lm_head.weight");
    EXPECT_EQ(back->mesh, mesh.id);
    EXPECT_EQ(back->numel, 128);
    EXPECT_TRUE(back->isDTensor);
    auto frames = r.stack(back->createdAt);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(r.string(frames[0].file), "model.py");
    EXPECT_EQ(frames[0].line, 41);
    EXPECT_FALSE(r.tensor(TensorId{999}));
}

TEST_F(RoundTrip, OpsWithOperands) {
    auto w = open();
    OpRecord op;
    op.startNs = 100;
    op.endNs = 250;
    op.thread = 2;
    op.name = w->intern("aten::sub.Tensor");
    op.phase = Phase::Backward;
    op.step = 7;
    op.depth = 1;
    op.incident = IncidentSeq{5};
    op.operands = {
        {0, OperandRole::Input, OperandKind::Tensor, TensorId{1}, 0, w->intern("[Shard(0)]")},
        {1, OperandRole::Input, OperandKind::Scalar, {}, 2.5, {}},
        {0, OperandRole::Output, OperandKind::Tensor, TensorId{2}, 0, w->intern("[Replicate()]")}};
    OpSeq seq = w->submit(op);
    EXPECT_EQ(seq, OpSeq{1});
    w->close();

    RankReader r = reopen();
    auto ops = r.opsAfter(OpSeq{});
    ASSERT_EQ(ops.size(), 1u);
    const OpRecord& back = ops[0];
    EXPECT_EQ(back.seq, seq);
    EXPECT_EQ(back.startNs, 100);
    EXPECT_EQ(back.endNs, 250);
    EXPECT_EQ(back.thread, 2u);
    EXPECT_EQ(r.string(back.name), "aten::sub.Tensor");
    EXPECT_EQ(back.phase, Phase::Backward);
    EXPECT_EQ(back.step, 7);
    EXPECT_EQ(back.depth, 1);
    EXPECT_EQ(back.incident, IncidentSeq{5});
    const auto& operands = back.operands;
    ASSERT_EQ(operands.size(), 3u);
    EXPECT_EQ(operands[0], op.operands[0]);
    EXPECT_EQ(operands[1], op.operands[1]);
    EXPECT_EQ(operands[2], op.operands[2]);
}

TEST_F(RoundTrip, CollectivesAndOptimizerSteps) {
    auto w = open();
    CollectiveRecord c;
    c.op = OpSeq{4};
    c.kind = w->intern("all_gather");
    c.group = w->intern("tp");
    c.srcPlacements = w->intern("[Shard(0)]");
    c.dstPlacements = w->intern("[Replicate()]");
    c.bytes = 1 << 20;
    c.startNs = 1000;
    c.endNs = 5000;
    c.thread = 1;
    c.step = 3;
    CollectiveSeq seq = w->submit(c);
    w->submit(Record{OptimizerStepRecord{3, w->intern("torch.optim.AdamW"), 6000, 9000, 12}});
    w->close();

    RankReader r = reopen();
    auto cs = r.collectivesInTimeRange(0, 10000);
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_EQ(cs[0].seq, seq);
    EXPECT_EQ(cs[0].op, OpSeq{4});
    EXPECT_EQ(r.string(cs[0].kind), "all_gather");
    EXPECT_EQ(r.string(cs[0].group), "tp");
    EXPECT_EQ(r.string(cs[0].srcPlacements), "[Shard(0)]");
    EXPECT_EQ(r.string(cs[0].dstPlacements), "[Replicate()]");
    EXPECT_EQ(cs[0].bytes, 1 << 20);
    EXPECT_EQ(cs[0].endNs, 5000);
    EXPECT_EQ(cs[0].step, 3);
    EXPECT_TRUE(r.collectivesInTimeRange(5000, 6000).empty());
    auto steps = r.optimizerSteps();
    ASSERT_EQ(steps.size(), 1u);
    EXPECT_EQ(steps[0].step, 3);
    EXPECT_EQ(r.string(steps[0].optimizer), "torch.optim.AdamW");
    EXPECT_EQ(steps[0].paramCount, 12);
}

TEST_F(RoundTrip, DeviceTimesOfOpsAndCollectives) {
    auto w = open();
    CollectiveRecord c;
    c.kind = w->intern("AllReduce");
    CollectiveSeq coll = w->submit(c);
    w->submit(Record{DeviceTimeRecord{coll, 7500, int64_t(1) << 60}});
    w->submit(Record{DeviceTimeRecord{OpSeq{9}, 1200, std::nullopt}});
    w->close();

    auto times = reopen().deviceTimes();
    ASSERT_EQ(times.size(), 2u);  // ops first
    EXPECT_EQ(std::get<OpSeq>(times[0].subject), OpSeq{9});
    EXPECT_EQ(times[0].durationNs, 1200);
    EXPECT_FALSE(times[0].deviceStartNs);
    EXPECT_EQ(std::get<CollectiveSeq>(times[1].subject), coll);
    EXPECT_EQ(times[1].durationNs, 7500);
    EXPECT_EQ(times[1].deviceStartNs, int64_t(1) << 60);

    nlohmann::json rank = runToJson(RunReader::open(m_dir / "rank-00000.msdb"))["rank_details"][0];
    EXPECT_EQ(rank["op_device_times"], nlohmann::json({{"count", 1}, {"total_ns", 1200}}));
    EXPECT_EQ(rank["collectives"]["AllReduce"]["device_ns"], 7500);
}

TEST_F(RoundTrip, FileFromBeforeDeviceTimesReadsAsNone) {
    auto w = open();
    w->submit(CollectiveRecord{});
    w->close();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((m_dir / "rank-00000.msdb").c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "DROP TABLE device_times", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);

    RankReader r = reopen();
    EXPECT_TRUE(r.deviceTimes().empty());
    EXPECT_EQ(r.collectivesInTimeRange(INT64_MIN, INT64_MAX).size(), 1u);
}

TEST_F(RoundTrip, IncidentWithEveryField) {
    auto w = open();
    IncidentRecord in;
    in.timeNs = 42;
    in.step = 9;
    in.thread = 1;
    in.op = w->intern("aten::index.Tensor");
    in.operandIndex = 1;
    in.plainTensor = TensorId{17};
    in.origin = OriginClass::InputData;
    in.evidence = w->intern("created by DataLoader batch #12");
    in.policyRule = w->intern("auto: per-rank data -> Shard(0)");
    in.action = Action::ShardedFromLocal;
    in.outcome = Outcome::Reconciled;
    in.error = w->intern("none");
    in.fingerprint = 0xfedcba9876543210ull;  // high bit set: survives the int64 column
    in.promotedPlacements = w->intern("[Shard(0)]");
    in.stack =
        w->internStack(std::array{Frame{w->intern("data.py"), 23, w->intern("__getitems__")}});
    in.operands = {
        {0, OperandRole::Input, OperandKind::Tensor, TensorId{3}, 0, w->intern("[Shard(1)]")},
        {1, OperandRole::Input, OperandKind::Tensor, TensorId{17}, 0, {}}};
    IncidentSeq seq = w->submit(in);
    w->close();

    RankReader r = reopen();
    auto incidents = r.incidentsAfter(IncidentSeq{});
    ASSERT_EQ(incidents.size(), 1u);
    const IncidentRecord& back = incidents[0];
    EXPECT_EQ(back.seq, seq);
    EXPECT_EQ(back.timeNs, 42);
    EXPECT_EQ(back.step, 9);
    EXPECT_EQ(r.string(back.op), "aten::index.Tensor");
    EXPECT_EQ(back.operandIndex, 1);
    EXPECT_EQ(back.plainTensor, TensorId{17});
    EXPECT_EQ(back.origin, OriginClass::InputData);
    EXPECT_EQ(r.string(back.evidence), "created by DataLoader batch #12");
    EXPECT_EQ(r.string(back.policyRule), "auto: per-rank data -> Shard(0)");
    EXPECT_EQ(back.action, Action::ShardedFromLocal);
    EXPECT_EQ(back.outcome, Outcome::Reconciled);
    ASSERT_TRUE(back.fingerprint);
    EXPECT_EQ(*back.fingerprint, 0xfedcba9876543210ull);
    EXPECT_EQ(r.string(back.promotedPlacements), "[Shard(0)]");
    EXPECT_EQ(r.stack(back.stack).at(0).line, 23);
    ASSERT_EQ(back.operands.size(), 2u);
    EXPECT_EQ(back.operands[0], in.operands[0]);
    EXPECT_EQ(back.operands[1], in.operands[1]);
    EXPECT_EQ(r.incidentsInStepRange(9, 9).size(), 1u);
    EXPECT_TRUE(r.incidentsInStepRange(10, 20).empty());
}

TEST_F(RoundTrip, IncidentWithoutFingerprintStaysEmpty) {
    auto w = open();
    IncidentRecord in;
    in.op = w->intern("aten::mul.Tensor");
    w->submit(in);
    w->close();
    auto incidents = reopen().incidentsAfter(IncidentSeq{});
    ASSERT_EQ(incidents.size(), 1u);
    EXPECT_FALSE(incidents[0].fingerprint);
    EXPECT_EQ(incidents[0].origin, OriginClass::Unknown);
}

TEST_F(RoundTrip, SequencesAreMonotonicAndOrdered) {
    auto w = open();
    StringId name = w->intern("aten::add.Tensor");
    for (int i = 0; i < 1000; ++i) {
        OpRecord op;
        op.name = name;
        op.startNs = i * 10;
        op.endNs = i * 10 + 5;
        op.step = i / 100;
        EXPECT_EQ(w->submit(op), OpSeq{i + 1});
    }
    w->close();
    RankReader r = reopen();
    auto ops = r.opsAfter(OpSeq{});
    ASSERT_EQ(ops.size(), 1000u);
    for (size_t i = 0; i < ops.size(); ++i)
        EXPECT_EQ(ops[i].seq, OpSeq{int64_t(i) + 1});
    EXPECT_EQ(r.opsAfter(OpSeq{990}).size(), 10u);
    EXPECT_EQ(r.opsAfter(OpSeq{0}, 5).size(), 5u);
    EXPECT_EQ(r.opsInStepRange(3, 4).size(), 200u);
    auto window = r.opsInTimeRange(1003, 1050);
    ASSERT_EQ(window.size(), 5u);  // starts 1000 (overlaps), 1010, 1020, 1030, 1040
    EXPECT_EQ(window.front().startNs, 1000);
}

TEST_F(RoundTrip, TimeRangeFindsLongOpsStartingEarlier) {
    auto w = open();
    OpRecord parent;
    parent.name = w->intern("aten::linear");
    parent.startNs = 0;
    parent.endNs = 1'000'000;
    OpRecord child = parent;
    child.startNs = 500'000;
    child.endNs = 500'100;
    w->submit(child);
    w->submit(parent);
    w->close();
    auto ops = reopen().opsInTimeRange(900'000, 901'000);
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].endNs, 1'000'000);
}

TEST_F(RoundTrip, InternedStringsAreSharedAndStoredOnce) {
    auto w = open();
    StringId a = w->intern("aten::mm");
    StringId b = w->intern("aten::mm");
    StringId c = w->intern("aten::addmm");
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    Frame f{a, 1, c};
    EXPECT_EQ(w->internStack(std::array{f, f}), w->internStack(std::array{f, f}));
    EXPECT_NE(w->internStack(std::array{f}), w->internStack(std::array{f, f}));
    EXPECT_FALSE(w->internStack(std::span<const Frame>{}).valid());
    w->close();
    RankReader r = reopen();
    EXPECT_EQ(r.string(a), "aten::mm");
    EXPECT_EQ(r.string(c), "aten::addmm");
    EXPECT_EQ(r.string(StringId{}), "");
    EXPECT_EQ(r.string(StringId{100000}), "<missing string #100000>");
}

TEST_F(RoundTrip, StringsSurviveUnusualBytes) {
    auto w = open();
    std::string hostile =
        std::string("</script><img src=x onerror=alert(1)>\"'\xff\xfe") + '\0' + "tail";
    StringId id = w->intern(hostile);
    w->close();
    EXPECT_EQ(reopen().string(id), hostile);
}

TEST_F(RoundTrip, RefusesToOverwriteARankFile) {
    open()->close();
    EXPECT_THROW(open(), StoreError);
}

TEST_F(RoundTrip, SummaryCountsEverything) {
    auto w = open();
    IncidentRecord in;
    in.op = w->intern("aten::sub.Tensor");
    in.origin = OriginClass::InputData;
    in.action = Action::Observed;
    w->submit(in);
    in.origin = OriginClass::OptimizerState;
    in.action = Action::Scalarized;
    in.outcome = Outcome::Reconciled;
    w->submit(in);
    CollectiveRecord c;
    c.kind = w->intern("all_reduce");
    c.bytes = 100;
    w->submit(c);
    w->submit(c);
    OpRecord op;
    op.name = in.op;
    op.startNs = 5;
    op.endNs = 50;
    w->submit(op);
    w->close();
    RankSummary s = reopen().summary();
    EXPECT_EQ(s.ops, 1);
    EXPECT_EQ(s.firstNs, 5);
    EXPECT_EQ(s.lastNs, 50);
    EXPECT_EQ(s.incidents, 2);
    EXPECT_EQ(s.incidentsByOrigin[OriginClass::InputData], 1);
    EXPECT_EQ(s.incidentsByOrigin[OriginClass::OptimizerState], 1);
    EXPECT_EQ(s.incidentsByAction[Action::Scalarized], 1);
    EXPECT_EQ(s.incidentsByOutcome[Outcome::Raised], 1);
    EXPECT_EQ(s.collectives, 2);
    EXPECT_EQ(s.collectiveBytes, 200);
}

}  // namespace
}  // namespace meshscope
