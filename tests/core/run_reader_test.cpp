// Whole runs: manifest and rank registration, partial and damaged runs, and
// the synthetic run that the demo and benchmarks use.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/analysis/run_summary.h"
#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "core/store/schema.h"
#include "core/synth/synthetic_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

TEST(RunDirectory, RankFileNames) {
    EXPECT_EQ(rankFilePath("run", 3).filename(), "rank-00003.msdb");
    EXPECT_EQ(rankFromFileName("x/rank-00012.msdb"), 12);
    EXPECT_FALSE(rankFromFileName("rank-.msdb"));
    EXPECT_FALSE(rankFromFileName("rank-1a.msdb"));
    EXPECT_FALSE(rankFromFileName("rank-00001.msdb-wal"));
    EXPECT_FALSE(rankFromFileName("manifest.json"));
}

TEST(RunDirectory, ConcurrentRanksRegisterInOneManifest) {
    test::TempDir dir;
    Manifest initial;
    initial.worldSize = 8;
    initial.runId = "shared-run";
    initial.command = {"torchrun", "--nproc_per_node=8", "train.py"};
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 8; ++rank)
        threads.emplace_back([&, rank] { createRankWriter(dir.path(), initial, rank)->close(); });
    for (auto& t : threads)
        t.join();
    Manifest m = Manifest::read(dir / "manifest.json");
    EXPECT_EQ(m.runId, "shared-run");
    EXPECT_EQ(m.worldSize, 8);
    EXPECT_EQ(m.ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(m.schemaVersion, schema::kSchemaVersion);
    EXPECT_EQ(m.command, initial.command);
    RunReader run = RunReader::open(dir.path());
    EXPECT_TRUE(run.problems().empty());
    ASSERT_EQ(run.ranks().size(), 8u);
    for (int rank = 0; rank < 8; ++rank) {
        EXPECT_EQ(run.ranks()[size_t(rank)].info().rank, rank);
        EXPECT_EQ(run.ranks()[size_t(rank)].info().runId, "shared-run");
    }
}

TEST(RunReader, SyntheticRunHasWhatTheGeneratorWrote) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 3;
    spec.steps = 5;
    spec.layers = 2;
    spec.incidentsPerStep = 2;
    SyntheticRankTotals totals = writeSyntheticRun(dir / "run", spec);
    RunReader run = RunReader::open(dir / "run");
    ASSERT_TRUE(run.problems().empty());
    ASSERT_EQ(run.ranks().size(), 3u);
    EXPECT_EQ(run.worldSize(), 3);
    int64_t ops = 0, incidents = 0;
    for (const auto& r : run.ranks()) {
        RankSummary s = r.summary();
        ops += s.ops;
        incidents += s.incidents;
        EXPECT_EQ(s.steps, 5);
        EXPECT_EQ(s.collectives, 5);
        EXPECT_TRUE(s.drops.empty());
        EXPECT_EQ(s.ops, 5 * syntheticOpsPerStep(2) + s.incidentsByOutcome[Outcome::Reconciled]);
        EXPECT_EQ(r.meshes().size(), 1u);
    }
    EXPECT_EQ(ops, totals.ops);
    EXPECT_EQ(incidents, totals.incidents);
    EXPECT_EQ(incidents, 3 * 5 * 2);
}

TEST(RunReader, OpensASingleRankFile) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 2;
    writeSyntheticRun(dir / "run", spec);
    RunReader run = RunReader::open(rankFilePath(dir / "run", 1));
    ASSERT_EQ(run.ranks().size(), 1u);
    EXPECT_EQ(run.ranks()[0].info().rank, 1);
    EXPECT_TRUE(run.problems().empty());
    ASSERT_TRUE(run.manifest());
}

TEST(RunReader, PartialRunOpensWhatIsReadableAndSaysWhatIsNot) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 3;
    writeSyntheticRun(dir / "run", spec);
    std::filesystem::remove(rankFilePath(dir / "run", 1));
    std::ofstream(rankFilePath(dir / "run", 2), std::ios::trunc) << "garbage";
    RunReader run = RunReader::open(dir / "run");
    ASSERT_EQ(run.ranks().size(), 1u);
    ASSERT_EQ(run.problems().size(), 2u);
    std::string all = std::string(run.problems()[0].what()) + "\n" + run.problems()[1].what();
    EXPECT_NE(all.find("rank-00001.msdb: missing (rank 1 is listed in the manifest)"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("rank-00002.msdb: not a meshscope rank file"), std::string::npos) << all;
    RunSummary summary = summarize(run);
    EXPECT_EQ(summary.problems.size(), 2u);
    EXPECT_NE(formatSummaryText(summary).find("problem: "), std::string::npos);
}

// Rank files are opened side by side; the readers and the problems come out
// in file order all the same, and each rank's summary is its own.
TEST(RunReader, ManyRankFilesOpenedSideBySideKeepTheirOrder) {
    test::TempDir dir;
    writeSyntheticRun(dir / "run", SyntheticRunSpec{.ranks = 24, .steps = 2});
    for (int rank : {5, 17})
        std::ofstream(rankFilePath(dir / "run", rank), std::ios::trunc) << "garbage";
    RunReader run = RunReader::open(dir / "run");
    ASSERT_EQ(run.ranks().size(), 22u);
    for (size_t i = 1; i < run.ranks().size(); ++i)
        EXPECT_LT(run.ranks()[i - 1].info().rank, run.ranks()[i].info().rank);
    ASSERT_EQ(run.problems().size(), 2u);
    EXPECT_NE(std::string(run.problems()[0].what()).find("rank-00005.msdb"), std::string::npos);
    EXPECT_NE(std::string(run.problems()[1].what()).find("rank-00017.msdb"), std::string::npos);
    std::vector<RankSummary> counted = rankSummaries(run);
    ASSERT_EQ(counted.size(), run.ranks().size());
    for (size_t i = 0; i < counted.size(); ++i)
        EXPECT_EQ(counted[i].ops, run.ranks()[i].summary().ops) << "rank index " << i;
}

TEST(RunReader, BadManifestIsAProblemNotACrash) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 1;
    writeSyntheticRun(dir / "run", spec);
    std::ofstream(dir / "run" / "manifest.json", std::ios::trunc)
        << "{\"format\": \"meshscope-run\", ";
    RunReader run = RunReader::open(dir / "run");
    EXPECT_EQ(run.ranks().size(), 1u);
    ASSERT_EQ(run.problems().size(), 1u);
    EXPECT_NE(std::string(run.problems()[0].what()).find("manifest.json: not valid JSON"),
              std::string::npos);
}

TEST(RunReader, ManifestWithMissingFieldNamesIt) {
    test::TempDir dir;
    std::ofstream(dir / "manifest.json") << R"({"format": "meshscope-run", "run_id": "x"})";
    try {
        Manifest::read(dir / "manifest.json");
        FAIL();
    } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("missing field 'created'"), std::string::npos);
    }
}

TEST(RunReader, NothingToReadThrows) {
    test::TempDir dir;
    EXPECT_THROW(RunReader::open(dir / "absent"), StoreError);
    EXPECT_THROW(RunReader::open(dir.path()), StoreError);
}

TEST(RunSummary, JsonAndTextAgree) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 2;
    spec.steps = 7;
    writeSyntheticRun(dir / "run", spec);
    RunSummary s = summarize(RunReader::open(dir / "run"));
    nlohmann::json j = summaryToJson(s);
    ASSERT_EQ(j["ranks"].size(), 2u);
    EXPECT_EQ(j["ranks"][0]["steps"], 7);
    EXPECT_EQ(j["ranks"][1]["incidents"], 14);
    EXPECT_TRUE(j["ranks"][0]["closed"].get<bool>());
    std::string text = formatSummaryText(s);
    EXPECT_NE(text.find("world size 2"), std::string::npos) << text;
    EXPECT_NE(text.find("by origin:"), std::string::npos) << text;
}

// A large job's table: the ranks that need a look, then the first ranks,
// 16 rows in all, the others summed up in one line; --all lists every rank.
TEST(RunSummary, ALargeJobsTableListsTheRanksThatNeedALookAndSumsUpTheRest) {
    RunSummary s;
    s.runId = "big";
    s.worldSize = 40;
    for (int r = 0; r < 40; ++r) {
        RankSummaryRow row;
        row.rank = r;
        row.summary.ops = r == 3 ? 90 : 100;
        row.summary.steps = 5;
        row.summary.incidents = 2;
        row.summary.incidentsByKind[IncidentKind::MixedTensor] = 2;
        row.status = r == 30 ? "open or killed" : "closed";
        if (r == 35) row.summary.drops["disk_full"] = 3;
        s.ranks.push_back(row);
    }
    std::string text = formatSummaryText(s);
    size_t rows = 0;
    for (int r = 0; r < 40; ++r)
        rows += text.find(fmt::format("\n{:>5} ", r)) != std::string::npos;
    EXPECT_EQ(rows, 16u) << text;
    EXPECT_NE(text.find(fmt::format("\n{:>5} ", 30)), std::string::npos);  // killed
    EXPECT_NE(text.find(fmt::format("\n{:>5} ", 35)), std::string::npos);  // lost records
    EXPECT_NE(text.find("  ... 24 more rank(s) (14-29,31-34,36-39): ops 100, steps 5, "
                        "collectives 0, 0 B, incidents 2; closed 24 (summary --all lists every "
                        "rank)"),
              std::string::npos)
        << text;
    std::string all = formatSummaryText(s, 0);
    EXPECT_EQ(all.find("more rank(s)"), std::string::npos);
    EXPECT_NE(all.find(fmt::format("\n{:>5} ", 39)), std::string::npos);
}

}  // namespace
}  // namespace meshscope
