// Analyses of a whole run: grouping by call site, cross-rank verification of
// promotions, divergent sequences, missing ranks and the findings `check`
// gates on. Fixtures are written through the same RankWriter the agent uses.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <span>

#include <sqlite3.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/analysis/run_analysis.h"
#include "core/store/run_directory.h"
#include "core/store/schema.h"
#include "core/synth/synthetic_run.h"
#include "tests/core/fixture_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

using test::FixtureIncident;
using test::writeRank;

const Finding* findingOf(const RunAnalysis& a, FindingKind kind) {
    auto found = findingsOf(a, {kind});
    return found.empty() ? nullptr : found.front();
}

TEST(RunAnalysis, GroupsIncidentsByCallSiteAcrossRanks) {
    test::TempDir dir;
    std::vector<FixtureIncident> incidents = {
        {"aten::sub.Tensor", OriginClass::InputData, "model.py", 41, 0, Action::ShardedFromLocal,
         Outcome::Reconciled, 11, "created by DataLoader batch #0"},
        {"aten::sub.Tensor", OriginClass::InputData, "model.py", 41, 1, Action::ShardedFromLocal,
         Outcome::Reconciled, 12, "created by DataLoader batch #1"},
        {"aten::mul.Tensor", OriginClass::OptimizerState, "opt.py", 9, 1, Action::Scalarized,
         Outcome::Reconciled, 5},
    };
    writeRank(dir.path(), 2, 0, 60, incidents);
    writeRank(dir.path(), 2, 1, 60, incidents);
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.groups.size(), 2u);
    const IncidentGroup& g = a.groups[0];
    EXPECT_EQ(g.op, "aten::sub.Tensor");
    EXPECT_EQ(g.site.file, "model.py");
    EXPECT_EQ(g.site.line, 41);
    EXPECT_EQ(g.count, 4);
    EXPECT_EQ(g.perRank, (std::map<int, int64_t>{{0, 2}, {1, 2}}));
    EXPECT_EQ(g.perStep, (std::map<int64_t, int64_t>{{0, 2}, {1, 2}}));
    EXPECT_EQ(g.distinctEvidence, 2);
    EXPECT_EQ(g.unreconciled, 0);
    // the fixture's mesh has only a "model" dim: no batch to shard over
    EXPECT_NE(g.fix.code.find("[Replicate()]"), std::string::npos) << g.fix.code;
    // The example carries what the inspector draws: both operands, the mesh.
    ASSERT_EQ(g.example.operands.size(), 2u);
    EXPECT_TRUE(g.example.operands[0].plain);
    EXPECT_EQ(g.example.operands[0].label, "batch");
    EXPECT_FALSE(g.example.operands[1].plain);
    EXPECT_EQ(g.example.operands[1].placements, "[Shard(0)]");
    ASSERT_TRUE(g.example.mesh);
    EXPECT_EQ(g.example.mesh->ranks, (std::vector<int64_t>{0, 1}));
    // Shard promotions differ by design; equal scalars verify.
    EXPECT_EQ(g.invalid + g.verified, 0);
    EXPECT_EQ(a.groups[1].verified, 2);
    EXPECT_TRUE(a.findings.empty()) << a.findings.front().message;
    EXPECT_TRUE(a.divergences.empty());
    EXPECT_EQ(a.incidents.size(), 6u);
}

TEST(RunAnalysis, ReplicatePromotionWithDifferentContentIsInvalid) {
    test::TempDir dir;
    auto replicated = [](int64_t step, uint64_t fp) {
        return FixtureIncident{
            "aten::add.Tensor", OriginClass::CreatedInForward, "model.py", 7, step,
            Action::Replicated, Outcome::Reconciled,           fp};
    };
    writeRank(dir.path(), 2, 0, 30, {replicated(0, 100), replicated(1, 200)});
    writeRank(dir.path(), 2, 1, 30, {replicated(0, 100), replicated(1, 201)});
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.groups.size(), 1u);
    EXPECT_EQ(a.groups[0].invalid, 2);
    EXPECT_EQ(a.groups[0].verified, 2);
    ASSERT_EQ(a.promotionChecks.size(), 2u);
    EXPECT_EQ(a.promotionChecks[0].verdict, Verdict::Verified);
    EXPECT_EQ(a.promotionChecks[1].verdict, Verdict::Invalid);
    const Finding* f = findingOf(a, FindingKind::Invalid);
    ASSERT_TRUE(f);
    EXPECT_NE(f->message.find("model.py:7"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("step 1"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("00000000000000c8"), std::string::npos) << f->message;
    for (const IncidentRef& ref : a.incidents)
        EXPECT_EQ(ref.verdict, ref.step == 1 ? Verdict::Invalid : Verdict::Verified);
}

TEST(RunAnalysis, UnreconciledIncidentsAreFindings) {
    test::TempDir dir;
    FixtureIncident raised{"aten::sub.Tensor", OriginClass::InputData, "train.py",  12, 0,
                           Action::Observed,   Outcome::Raised,        std::nullopt};
    writeRank(dir.path(), 2, 0, 30, {raised});
    writeRank(dir.path(), 2, 1, 30, {raised});
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    const Finding* f = findingOf(a, FindingKind::Unreconciled);
    ASSERT_TRUE(f);
    // every finding ends with its fix (issue #44)
    EXPECT_EQ(f->message,
              "train.py:12: aten::sub.Tensor mixed a plain tensor from D (input data not "
              "distributed) with DTensors; 2 unreconciled (2 raised) on rank(s) 0,1; fix: "
              "the mesh has only model dims: every rank must feed the same batch, replicated "
              "(or add a data-parallel mesh dim and shard the batch over it), e.g. batch = "
              "DTensor.from_local(batch, mesh, [Replicate()])");
    EXPECT_EQ(a.groups[0].example.createdAt, "");
}

TEST(RunAnalysis, RankThatStopsEarlyDivergesInOpsAndIncidents) {
    test::TempDir dir;
    FixtureIncident a0{"aten::sub.Tensor",       OriginClass::InputData, "train.py", 12, 0,
                       Action::ShardedFromLocal, Outcome::Reconciled,    1};
    FixtureIncident a1{"aten::mul.Tensor", OriginClass::Unknown, "train.py", 20, 1,
                       Action::Replicated, Outcome::Reconciled,  2};
    writeRank(dir.path(), 2, 0, 100, {a0, a1});
    writeRank(dir.path(), 2, 1, 70, {a0});
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.divergences.size(), 2u);
    const Divergence& inc = a.divergences[0];
    EXPECT_EQ(inc.kind, Divergence::Kind::Incidents);
    EXPECT_EQ(inc.rank, 1);
    EXPECT_EQ(inc.index, 1);
    EXPECT_EQ(inc.actual, "");
    EXPECT_NE(inc.expected.find("aten::mul.Tensor at train.py:20"), std::string::npos);
    const Divergence& ops = a.divergences[1];
    EXPECT_EQ(ops.kind, Divergence::Kind::Ops);
    EXPECT_EQ(ops.rank, 1);
    EXPECT_EQ(ops.index, 70);
    EXPECT_EQ(ops.expected, "aten::add.Tensor");  // op 70: names[70 % 3]
    EXPECT_EQ(ops.actual, "");
    EXPECT_EQ(ops.step, 2);
    EXPECT_EQ(ops.others, (std::vector<int>{0}));
    EXPECT_EQ(a.opsCompared, 170);
    const Finding* f = findingOf(a, FindingKind::Divergent);
    ASSERT_TRUE(f);
    // The single replicated promotion on rank 0 cannot be verified.
    EXPECT_EQ(a.groups[1].unverified, 1);
}

TEST(RunAnalysis, DifferentOpOnOneRankOfThree) {
    test::TempDir dir;
    writeRank(dir.path(), 3, 0, 50, {});
    writeRank(dir.path(), 3, 2, 50, {});
    {
        // rank 1 runs aten::relu where the others run aten::mm at op 3.
        Manifest initial;
        initial.runId = "analysis-run";
        initial.worldSize = 3;
        auto w = createRankWriter(dir.path(), initial, 1);
        const std::array<const char*, 3> names = {"aten::mm", "aten::add.Tensor", "aten::relu"};
        for (int i = 0; i < 50; ++i) {
            OpRecord op;
            op.name = w->intern(i == 3 ? "aten::relu" : names[size_t(i % 3)]);
            w->submit(std::move(op));
        }
        w->close();
    }
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.divergences.size(), 1u);
    EXPECT_EQ(a.divergences[0].rank, 1);
    EXPECT_EQ(a.divergences[0].index, 3);
    EXPECT_EQ(a.divergences[0].expected, "aten::mm");
    EXPECT_EQ(a.divergences[0].actual, "aten::relu");
    EXPECT_EQ(a.divergences[0].others, (std::vector<int>{0, 2}));
}

// Ranks' op pages are read side by side in batches (32 ranks) and compared
// in rank order: a divergence in a rank of the third batch, far into its
// ops, is found and named as in a rank of the first; every op is counted.
TEST(RunAnalysis, ManyRanksReadSideBySideAreComparedInRankOrder) {
    test::TempDir dir;
    constexpr int kWorld = 70, kOps = 1500;
    for (int rank = 0; rank < kWorld; ++rank) {
        Manifest initial;
        initial.runId = "analysis-run";
        initial.worldSize = kWorld;
        auto w = createRankWriter(dir.path(), initial, rank);
        const std::array<const char*, 3> names = {"aten::mm", "aten::add.Tensor", "aten::relu"};
        for (int i = 0; i < kOps; ++i) {
            OpRecord op;
            op.name = w->intern(rank == 66 && i == 1234 ? "aten::gelu" : names[size_t(i % 3)]);
            w->submit(std::move(op));
        }
        w->close();
    }
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    EXPECT_EQ(a.opsCompared, int64_t(kWorld) * kOps);
    ASSERT_EQ(a.divergences.size(), 1u);
    EXPECT_EQ(a.divergences[0].rank, 66);
    EXPECT_EQ(a.divergences[0].index, 1234);
    EXPECT_EQ(a.divergences[0].expected, "aten::add.Tensor");
    EXPECT_EQ(a.divergences[0].actual, "aten::gelu");
    EXPECT_EQ(a.divergences[0].others.size(), size_t(kWorld - 1));
}

// A damaged op chunk in a rank read on another thread is the StoreError a
// read on the calling thread gives, not the end of the process.
TEST(RunAnalysis, ADamagedRankReadSideBySideThrowsItsStoreError) {
    test::TempDir dir;
    for (int rank = 0; rank < 40; ++rank)
        writeRank(dir.path(), 40, rank, 50, {});
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(rankFilePath(dir.path(), 37).c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "UPDATE op_chunks SET count=count-1", nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    RunReader run = RunReader::open(dir.path());
    ASSERT_EQ(run.ranks().size(), 40u);
    try {
        analyze(run);
        ADD_FAILURE() << "a damaged op chunk was compared";
    } catch (const StoreError& e) {
        std::string file = rankFilePath(dir.path(), 37).filename().string();
        EXPECT_NE(std::string(e.what()).find(file + ": corrupt op chunk"), std::string::npos)
            << e.what();
    }
}

// Three collectives per rank from train.py lines 10, 20, 30 (+ rank): the
// last of `kinds` differs by rank where asked.
void writeCollectives(const std::filesystem::path& dir, int rank,
                      const std::array<const char*, 3>& kinds, int64_t bytes) {
    Manifest initial;
    initial.runId = "analysis-run";
    initial.worldSize = 2;
    auto w = createRankWriter(dir, initial, rank);
    for (int i = 0; i < 3; ++i) {
        OpRecord op;
        op.name = w->intern("c10d::op");
        Frame f{w->intern("train.py"), 10 * (i + 1) + rank, w->intern("step")};
        op.stack = w->internStack(std::span<const Frame>(&f, 1));
        OpSeq seq = w->submit(std::move(op));
        CollectiveRecord c;
        c.op = seq;
        c.kind = w->intern(kinds[size_t(i)]);
        c.group = w->intern("default_pg");
        c.bytes = bytes;
        c.step = 0;
        w->submit(c);
    }
    w->close();
}

const Divergence* collectiveDivergence(const RunAnalysis& a) {
    auto it = std::find_if(a.divergences.begin(), a.divergences.end(), [](const Divergence& d) {
        return d.kind == Divergence::Kind::Collectives;
    });
    return it == a.divergences.end() ? nullptr : &*it;
}

TEST(RunAnalysis, CollectivesIssuedInADifferentOrderAreNamedWithTheirCallSites) {
    // rank 1 broadcasts where rank 0 all-reduces: each waits for the other.
    // Scatter and all-to-all send as much as each rank's share: their bytes
    // differ legitimately and are not compared.
    test::TempDir dir;
    for (int rank : {0, 1})
        writeCollectives(dir.path(), rank,
                         {"scatter", "all_to_all_single", rank ? "broadcast" : "all_reduce"},
                         rank ? 0 : 100);
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    const Divergence* d = collectiveDivergence(a);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->rank, 1);
    EXPECT_EQ(d->index, 2);
    EXPECT_EQ(d->actual, "broadcast on default_pg, 0 B at train.py:31");
    EXPECT_EQ(d->expected, "all_reduce on default_pg, 100 B at train.py:30");
    EXPECT_FALSE(d->sizeOnly);
    EXPECT_EQ(toString(d->kind), "collectives");
}

TEST(RunAnalysis, TheSameCollectiveWithAnotherSizeIsOneARankDidNotIssue) {
    // rank 0 all-reduces a metric of 8 floats rank 1 never does; rank 1's
    // all_reduce of 2 meets it (gloo aborts, NCCL hangs)
    test::TempDir dir;
    for (int rank : {0, 1})
        writeCollectives(dir.path(), rank, {"all_reduce", "all_reduce", "barrier"}, rank ? 8 : 32);
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    const Divergence* d = collectiveDivergence(a);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->index, 0);
    EXPECT_EQ(d->actual, "all_reduce on default_pg, 8 B at train.py:11");
    EXPECT_EQ(d->expected, "all_reduce on default_pg, 32 B at train.py:10");
    EXPECT_TRUE(d->sizeOnly);
    const Finding* f = findingOf(a, FindingKind::Divergent);
    ASSERT_TRUE(f);
    EXPECT_NE(f->message.find("the same collective with another size"), std::string::npos)
        << f->message;
}

// Makes rank `rank`'s file look like one whose process died before closing
// it, as launch.json tells (`ended`; "" for no launch.json).
void unclose(const std::filesystem::path& dir, int rank, const std::string& ended) {
    sqlite3* db = nullptr;
    std::filesystem::path file = rankFilePath(dir, rank);
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db, "DELETE FROM meta WHERE key = 'ended_ns'", nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
    if (ended.empty()) return;
    std::ofstream(dir / "launch.json") << nlohmann::json{
        {"ranks", {{{"rank", 0}, {"ended", "exited with 1"}}, {{"rank", rank}, {"ended", ended}}}}};
}

TEST(RunAnalysis, AKilledRankIsComparedOnlyAsFarAsItRecorded) {
    // the same two ranks as RankThatStopsEarly, but rank 1 was SIGKILLed: the
    // end of its recording is not the end of what it did
    test::TempDir dir;
    FixtureIncident a0{"aten::sub.Tensor",       OriginClass::InputData, "train.py", 12, 0,
                       Action::ShardedFromLocal, Outcome::Reconciled,    1};
    FixtureIncident a1{"aten::mul.Tensor", OriginClass::Unknown, "train.py", 20, 1,
                       Action::Replicated, Outcome::Reconciled,  2};
    writeRank(dir.path(), 2, 0, 100, {a0, a1});
    writeRank(dir.path(), 2, 1, 70, {a0});
    unclose(dir.path(), 1, "killed by SIGKILL");
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    EXPECT_TRUE(a.divergences.empty());
    EXPECT_FALSE(findingOf(a, FindingKind::Divergent));
    ASSERT_EQ(a.reach.size(), 2u);
    EXPECT_EQ(a.reach[1].end, RecordingReach::End::Killed);
    EXPECT_TRUE(a.reach[1].truncated);
    EXPECT_NE(
        a.reach[1].note.find(
            "rank 1: killed by SIGKILL without closing its file; its recording reaches into step"),
        std::string::npos)
        << a.reach[1].note;
    EXPECT_EQ(a.reach[0].note, "");
    EXPECT_EQ(a.stops[1].end, RecordingReach::End::Killed);
    EXPECT_NE(a.stops[1].state().find("killed by SIGKILL"), std::string::npos)
        << a.stops[1].state();
}

TEST(RunAnalysis, ARankThatLostRecordsIsComparedUpToTheFirstLoss) {
    // rank 1 records a different op after its first loss: not compared
    test::TempDir dir;
    writeRank(dir.path(), 2, 0, 100, {});
    writeRank(dir.path(), 2, 1, 100, {});
    sqlite3* db = nullptr;
    std::filesystem::path file = rankFilePath(dir.path(), 1);
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    std::string sql =
        "INSERT OR REPLACE INTO drops VALUES ('queue_full', 5); "
        "INSERT OR REPLACE INTO meta VALUES ('" +
        std::string(schema::kMetaFirstLossNs) + "', '0')";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    EXPECT_TRUE(a.divergences.empty());
    EXPECT_TRUE(a.reach[1].truncated);
    EXPECT_EQ(a.reach[1].untilNs, 0);
    EXPECT_NE(a.reach[1].note.find("5 record(s) were lost"), std::string::npos) << a.reach[1].note;
}

TEST(RunAnalysis, AnEndedRankStillDiverges) {
    // the same as the killed rank, but rank 1 closed its file: it did stop early
    test::TempDir dir;
    writeRank(dir.path(), 2, 0, 100, {});
    writeRank(dir.path(), 2, 1, 70, {});
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.divergences.size(), 1u);
    EXPECT_EQ(a.divergences[0].actual, "");
    EXPECT_FALSE(a.reach[1].truncated);
}

TEST(RunAnalysis, MissingRankIsAFinding) {
    test::TempDir dir;
    writeRank(dir.path(), 3, 0, 10, {});
    writeRank(dir.path(), 3, 1, 10, {});
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    EXPECT_EQ(a.missingRanks, (std::vector<int>{2}));
    ASSERT_TRUE(findingOf(a, FindingKind::MissingRank));
    EXPECT_TRUE(findingOf(a, FindingKind::MissingRank)
                    ->message.starts_with("rank 2: missing from the run (world size 3); fix: a "
                                          "rank that never started under `meshscope record`"));
}

TEST(RunAnalysis, SyntheticRunAgreesWithItsGenerator) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 2;
    spec.steps = 4;
    spec.incidentsPerStep = 3;
    writeSyntheticRun(dir.path(), spec);
    int progressCalls = 0;
    AnalysisOptions options;
    options.progress = [&](std::string_view, int64_t done, int64_t total) {
        ++progressCalls;
        EXPECT_LE(done, total);
    };
    RunAnalysis a = analyze(RunReader::open(dir.path()), options);
    EXPECT_EQ(a.incidents.size(), 2u * 4 * 3);
    int64_t grouped = 0;
    for (const IncidentGroup& g : a.groups)
        grouped += g.count;
    EXPECT_EQ(grouped, 24);
    EXPECT_GT(progressCalls, 0);
    EXPECT_TRUE(a.opsComparedFully);
}

// A large job's findings stay one readable line: ranks in ranges, a
// promotion's fingerprints grouped by value instead of one per rank.
TEST(RunAnalysis, FindingsOfALargeJobNameRanksInRangesAndFingerprintsByValue) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 20;
    spec.steps = 6;
    spec.layers = 4;
    spec.incidentsPerStep = 1;
    writeSyntheticRun(dir.path(), spec);
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    const Finding* invalid = nullptr;
    const Finding* unreconciled = nullptr;
    for (const Finding& f : a.findings) {
        if (f.kind == FindingKind::Invalid) invalid = &f;
        if (f.kind == FindingKind::Unreconciled) unreconciled = &f;
    }
    ASSERT_NE(invalid, nullptr);
    ASSERT_NE(unreconciled, nullptr);
    // each rank's batch differs: 20 values, 4 spelled out, the rest counted
    EXPECT_NE(invalid->message.find("20 different value(s) on 20 ranks: rank 0 "),
              std::string::npos)
        << invalid->message;
    EXPECT_NE(invalid->message.find(" and 16 more value(s) on 16 rank(s)"), std::string::npos);
    EXPECT_EQ(invalid->message.find("rank 19 "), std::string::npos);
    EXPECT_NE(unreconciled->message.find("on rank(s) 0-19;"), std::string::npos)
        << unreconciled->message;
}

// The failure kinds and fixes meshscope gives DTensor's own messages
// (torch 2.11: _sharding_prop.py, _op_schema.py, _api.py, _view_ops.py,
// gloo's transport).
TEST(FailureKinds, DTensorsMessagesGetTheirKindAndFix) {
    struct Case {
        const char* message;
        IncidentKind kind;
        const char* inFix;
    };
    const std::array cases = {
        Case{"NotImplementedError: Operator aten._scaled_dot_product_flash_attention_for_cpu."
             "default does not have a sharding strategy registered.",
             IncidentKind::NoShardingStrategy,
             "register_sharding(aten._scaled_dot_product_flash_attention_for_cpu.default)"},
        Case{"RuntimeError: DTensor does not support cross-mesh operation on aten.add.Tensor! "
             "Got meshes: DeviceMesh((2,)) DeviceMesh((1, 2)). Please make sure all the "
             "arguments have the same DeviceMesh.",
             IncidentKind::DTensorError, "different DeviceMeshes"},
        Case{"ValueError: Cannot distribute a DTensor with device mesh DeviceMesh((2,)) to a "
             "different device mesh DeviceMesh((1, 2)).",
             IncidentKind::DTensorError, "different DeviceMeshes"},
        Case{"RuntimeError: Attempted to flatten unevenly sharded dimension 0, which is not "
             "supported.",
             IncidentKind::DTensorError, "redistribute that dim to Replicate() before the view"},
        Case{"RuntimeError: The size of tensor a (8) must match the size of tensor b (4) at "
             "non-singleton dimension 1",
             IncidentKind::DTensorError, "global shapes"},
        Case{"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection "
             "closed by peer [127.0.0.1]:4321",
             IncidentKind::CollectiveError, "call full_tensor() on every rank"},
    };
    for (const Case& c : cases) {
        std::optional<IncidentKind> kind = classifyFailure(c.message);
        ASSERT_TRUE(kind) << c.message;
        EXPECT_EQ(*kind, c.kind) << c.message;
        FixSuggestion fix = fixForFailure(*kind, "aten::add.Tensor", {"[Shard(0)]"}, c.message);
        EXPECT_NE(fix.summary.find(c.inFix), std::string::npos) << c.message << "\n" << fix.summary;
    }
    EXPECT_FALSE(classifyFailure("KeyboardInterrupt: "));
    EXPECT_EQ(opWithoutStrategy("Operator aten.detach_.default does not have a sharding strategy "
                                "registered.",
                                "aten::detach_"),
              "aten.detach_.default");
}

// A no-strategy fix reasons about the op's arguments (issue #44): local_map
// only along dims no operand is sharded on, with output placements that fit
// the output's dims; else the sharded dim is gathered first, at a named cost.
TEST(FailureKinds, NoStrategyFixesFitTheOpsArguments) {
    auto fix = [](std::string_view op, std::string placements, int ndim, std::string_view args) {
        FailedCall call{op, {std::move(placements)}, ndim, args, "h"};
        return fixForFailure(IncidentKind::NoShardingStrategy, call,
                             "NotImplementedError: Operator aten.x.default does not have a "
                             "sharding strategy registered.");
    };
    constexpr std::string_view kImport =
        "  # from torch.distributed.tensor.experimental import local_map";
    // GLU halves its dim: on the sharded dim each shard would pair the wrong
    // halves, so the dim is gathered first (local_map redistributes it)
    FixSuggestion glu = fix("aten::glu", "[Shard(dim=1)]", 2, "dim=-1");
    EXPECT_EQ(glu.code,
              "out = local_map(F.glu, out_placements=[Replicate()], in_placements=("
              "[Replicate()],), redistribute_inputs=True)(h, dim=-1)" +
                  std::string(kImport));
    EXPECT_NE(glu.summary.find("works along dim 1"), std::string::npos) << glu.summary;
    EXPECT_NE(glu.summary.find("all-gathers h"), std::string::npos) << glu.summary;
    // the same call on rows: each shard's GLU is its rows of the result
    EXPECT_EQ(fix("aten::glu", "[Shard(dim=0)]", 2, "dim=-1").code,
              "out = local_map(F.glu, out_placements=[Shard(0)], in_placements=([Shard(dim=0)],))"
              "(h, dim=-1)" +
                  std::string(kImport));
    // no dim: the whole tensor (a 0-d median has no dim to shard)
    EXPECT_EQ(fix("aten::median", "[Shard(dim=0)]", 2, "").code,
              "out = local_map(torch.median, out_placements=[Replicate()], in_placements=("
              "[Replicate()],), redistribute_inputs=True)(h)" +
                  std::string(kImport));
    // a scan along the sharded dim
    EXPECT_NE(fix("aten::logcumsumexp", "[Shard(0)]", 2, "dim=0").code.find("redistribute_inputs"),
              std::string::npos);
    // a reduction without keepdim drops its dim: a later sharded dim moves down
    EXPECT_NE(fix("aten::nanmedian", "[Shard(2)]", 3, "dim=0, keepdim=False")
                  .code.find("out_placements=[Shard(1)]"),
              std::string::npos);
    EXPECT_NE(fix("aten::nanmedian", "[Shard(2)]", 3, "dim=0, keepdim=True")
                  .code.find("out_placements=[Shard(2)]"),
              std::string::npos);
    // on a 2-D mesh only the mesh dim that shards the op's dim is gathered
    EXPECT_NE(fix("aten::glu", "[Shard(dim=0), Shard(dim=1)]", 2, "dim=1")
                  .code.find("in_placements=([Shard(0), Replicate()],)"),
              std::string::npos);
    // attention works along its last two dims: heads may stay sharded
    FailedCall sdpa{"aten::_scaled_dot_product_flash_attention_for_cpu",
                    {"[Shard(dim=1)]", "[Shard(dim=1)]", "[Shard(dim=1)]"},
                    4,
                    "dropout_p=0",
                    "q"};
    std::string heads = fixForFailure(IncidentKind::NoShardingStrategy, sdpa, "").code;
    EXPECT_NE(heads.find("local_map(F.scaled_dot_product_attention, out_placements=[Shard(1)]"),
              std::string::npos);
    EXPECT_EQ(heads.find("redistribute_inputs"), std::string::npos) << heads;
    sdpa.placements = {"[Shard(dim=2)]", "[Shard(dim=2)]", "[Shard(dim=2)]"};
    EXPECT_NE(fixForFailure(IncidentKind::NoShardingStrategy, sdpa, "")
                  .code.find("redistribute_inputs=True)(...)"),
              std::string::npos);
}

// The issue's example: rank 0 logs `float(w.abs().mean())` and so runs ops
// rank 1 does not. The finding names both call sites; an op recorded without
// a user frame (autograd's thread) takes the nearest earlier one.
TEST(RunAnalysis, DivergentOpsNameTheCallSitesOfBothSides) {
    test::TempDir dir;
    for (int rank = 0; rank < 2; ++rank) {
        Manifest initial;
        initial.runId = "divergent-ops";
        initial.worldSize = 2;
        auto w = createRankWriter(dir.path(), initial, rank);
        StringId file = w->intern("train.py"), fn = w->intern("main");
        auto op = [&](const char* name, int line, int64_t step) {
            OpRecord r;
            r.name = w->intern(name);
            r.step = step;
            if (line > 0) r.stack = w->internStack(std::array{Frame{file, line, fn}});
            w->submit(std::move(r));
        };
        op("aten::mul.Tensor", 14, 0);
        op("aten::sum.default", 14, 0);
        op("aten::ones_like", 0, 0);  // backward: no user frame of its own
        if (rank == 0) op("aten::abs.default", 19, 0);
        op("aten::mul.Tensor", 14, 1);
        w->close();
    }
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.divergences.size(), 1u);
    const Divergence& d = a.divergences[0];
    EXPECT_EQ(d.rank, 1);
    EXPECT_EQ(d.actual, "aten::mul.Tensor at train.py:14");
    EXPECT_EQ(d.expected, "aten::abs.default at train.py:19");
    EXPECT_EQ(d.site.line, 14);
    EXPECT_EQ(d.expectedSite.line, 19);
    const Finding* f = findingOf(a, FindingKind::Divergent);
    ASSERT_TRUE(f);
    EXPECT_NE(f->message.find("is aten::mul.Tensor at train.py:14 where rank(s) 0 have "
                              "aten::abs.default at train.py:19"),
              std::string::npos)
        << f->message;
}

TEST(RunAnalysis, AnOpWithoutAUserFrameTakesTheNearestEarlierOne) {
    test::TempDir dir;
    for (int rank = 0; rank < 2; ++rank) {
        Manifest initial;
        initial.runId = "nearest-frame";
        initial.worldSize = 2;
        auto w = createRankWriter(dir.path(), initial, rank);
        OpRecord first;
        first.name = w->intern("aten::mm");
        first.stack =
            w->internStack(std::array{Frame{w->intern("train.py"), 30, w->intern("step")}});
        w->submit(std::move(first));
        OpRecord frameless;  // autograd's thread: no Python frame
        frameless.name = w->intern(rank == 0 ? "aten::mm" : "aten::add.Tensor");
        w->submit(std::move(frameless));
        w->close();
    }
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.divergences.size(), 1u);
    EXPECT_TRUE(a.divergences[0].siteIsNearest);
    EXPECT_EQ(a.divergences[0].actual, "aten::add.Tensor near train.py:30");
}

}  // namespace
}  // namespace meshscope
