// diff of two runs: incident groups that appear, disappear or change, and
// where each rank's op sequence first differs.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/analysis/run_diff.h"
#include "core/store/run_directory.h"
#include "tests/core/fixture_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

using test::FixtureIncident;
using test::writeRank;

RunDiff diffOf(const test::TempDir& a, const test::TempDir& b) {
    RunReader ra = RunReader::open(a.path()), rb = RunReader::open(b.path());
    return diffRuns(ra, analyze(ra), rb, analyze(rb));
}

const FixtureIncident kBatch{"aten::sub.Tensor", OriginClass::InputData, "train.py",  12, 0,
                             Action::Observed,   Outcome::Raised,        std::nullopt};
const FixtureIncident kState{"aten::mul.Tensor", OriginClass::OptimizerState, "opt.py", 5, 0,
                             Action::Scalarized, Outcome::Reconciled,         7};

TEST(RunDiff, SameRecordingHasNoDifferences) {
    test::TempDir a, b;
    for (const auto* dir : {&a, &b})
        for (int r = 0; r < 2; ++r)
            writeRank(dir->path(), 2, r, 40, {kBatch, kState});
    RunDiff d = diffOf(a, b);
    EXPECT_TRUE(d.empty());
    EXPECT_EQ(d.opsCompared, 160);
    EXPECT_NE(formatDiffText(d).find("no differences"), std::string::npos);
}

TEST(RunDiff, AFixedCallSiteDisappearsAndANewOneAppears) {
    test::TempDir a, b;
    FixtureIncident batchFixed = kBatch;
    batchFixed.action = Action::ShardedFromLocal;
    batchFixed.outcome = Outcome::Reconciled;
    FixtureIncident mask{"aten::add.Tensor", OriginClass::CreatedInForward, "model.py", 30, 0,
                         Action::Replicated, Outcome::Reconciled,           3};
    for (int r = 0; r < 2; ++r) {
        writeRank(a.path(), 2, r, 40, {kBatch, kState, kState});
        writeRank(b.path(), 2, r, 40, {batchFixed, kState, mask});
    }
    RunDiff d = diffOf(a, b);
    ASSERT_EQ(d.disappeared.size(), 0u);  // same call site, now reconciled
    ASSERT_EQ(d.changed.size(), 2u);
    ASSERT_EQ(d.appeared.size(), 1u);
    EXPECT_EQ(d.appeared[0].site.file, "model.py");
    EXPECT_EQ(d.appeared[0].countB, 2);
    // opt.py:5 went from 4 to 2 incidents; train.py:12 from 2 unreconciled to 0.
    for (const GroupChange& c : d.changed) {
        if (c.site.file == "opt.py") {
            EXPECT_EQ(std::pair(c.countA, c.countB), std::pair(4L, 2L));
        } else {
            EXPECT_EQ(c.site.file, "train.py");
            EXPECT_EQ(std::pair(c.unreconciledA, c.unreconciledB), std::pair(2L, 0L));
        }
    }
    std::string text = formatDiffText(d);
    EXPECT_NE(text.find("+ new      model.py:30 aten::add.Tensor origin B"), std::string::npos)
        << text;
    nlohmann::json j = diffToJson(d);
    EXPECT_EQ(j["appeared"][0]["count_b"], 2);
}

TEST(RunDiff, WhereOpSequencesFirstDiffer) {
    test::TempDir a, b;
    writeRank(a.path(), 2, 0, 40, {});
    writeRank(a.path(), 2, 1, 40, {});
    writeRank(b.path(), 2, 0, 40, {});
    writeRank(b.path(), 2, 1, 25, {});  // rank 1 stopped early in B
    RunDiff d = diffOf(a, b);
    EXPECT_TRUE(d.appeared.empty() && d.disappeared.empty());
    ASSERT_EQ(d.opChanges.size(), 1u);
    EXPECT_EQ(d.opChanges[0].rank, 1);
    EXPECT_EQ(d.opChanges[0].index, 25);
    EXPECT_EQ(d.opChanges[0].a, "aten::add.Tensor");  // op 25: index mod 3 == 1
    EXPECT_EQ(d.opChanges[0].b, "");
    EXPECT_NE(formatDiffText(d).find("A has aten::add.Tensor, B has nothing more"),
              std::string::npos);
}

// `n` all_reduces of `bytes` each, issued at train.py:30, as rank 0's file.
void writeCollectives(const std::filesystem::path& dir, int n, int64_t bytes) {
    Manifest m;
    m.worldSize = 1;
    auto w = createRankWriter(dir, m, 0);
    std::vector<Frame> frames{Frame{w->intern("train.py"), 30, w->intern("step")}};
    StackId stack = w->internStack(frames);
    for (int i = 0; i < n; ++i) {
        CollectiveRecord c;
        c.kind = w->intern("all_reduce");
        c.bytes = bytes;
        c.stack = stack;
        w->submit(c);
    }
    w->close();
}

// The case: collectives per rank went from 28 to 48, and `diff`
// said "no differences".
TEST(RunDiff, CollectivesByKindCountBytesAndCallSite) {
    test::TempDir a, b;
    writeCollectives(a.path(), 28, 64);
    writeCollectives(b.path(), 48, 64);
    RunDiff d = diffOf(a, b);
    ASSERT_EQ(d.collectiveChanges.size(), 1u);
    const CollectiveChange& c = d.collectiveChanges[0];
    EXPECT_EQ(c.kind, "all_reduce");
    EXPECT_EQ(c.site, "train.py:30");
    EXPECT_EQ(std::pair(c.countA, c.countB), std::pair(28L, 48L));
    EXPECT_EQ(std::pair(c.bytesA, c.bytesB), std::pair(28L * 64, 48L * 64));
    EXPECT_FALSE(d.empty());
    EXPECT_NE(formatDiffText(d).find(
                  "collectives: rank 0 all_reduce at train.py:30: 28 -> 48 call(s), 1792 -> 3072 "
                  "bytes"),
              std::string::npos)
        << formatDiffText(d);
    EXPECT_EQ(diffToJson(d)["collective_changes"][0]["count_b"], 48);
    test::TempDir same;
    writeCollectives(same.path(), 28, 64);
    EXPECT_TRUE(diffOf(a, same).collectiveChanges.empty());
}

TEST(RunDiff, RanksPresentInOnlyOneRun) {
    test::TempDir a, b;
    writeRank(a.path(), 2, 0, 10, {});
    writeRank(a.path(), 2, 1, 10, {});
    writeRank(b.path(), 2, 0, 10, {});
    RunDiff d = diffOf(a, b);
    EXPECT_EQ(d.ranksOnlyInA, (std::vector<int>{1}));
    EXPECT_TRUE(d.ranksOnlyInB.empty());
    EXPECT_FALSE(d.empty());
}

}  // namespace
}  // namespace meshscope
