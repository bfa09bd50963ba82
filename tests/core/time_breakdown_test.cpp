// Where the time goes (core/analysis/time_breakdown.h): op statistics, steps
// split into time outside collectives and with one in flight, the slowest
// rank of each step, stragglers, the overview order, columns for long runs,
// and the sections of the JSON, Markdown and HTML reports.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/analysis/run_analysis.h"
#include "core/report/html_report.h"
#include "core/report/report.h"
#include "core/store/run_directory.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

constexpr int64_t kMs = 1'000'000;

// Each step of a rank: its own work (an aten::mm on a Shard(0) and a
// Replicate() input), then an all_reduce that lasts until the slowest rank
// arrives, then optimizer.step() (100 ns).
struct Timing {
    std::function<int64_t(int rank, int64_t step)> own;
    int64_t steps = 10;
    int64_t firstStep = 0;
    int64_t setupNs = 0;  // > 0: an op of the first step before its training (phase other)
};

void writeTimedRank(const std::filesystem::path& dir, int world, int rank, const Timing& timing) {
    Manifest initial;
    initial.runId = "time-run";
    initial.worldSize = world;
    auto w = createRankWriter(dir, initial, rank);
    StringId mm = w->intern("aten::mm"), shard = w->intern("[Shard(0)]"),
             replicate = w->intern("[Replicate()]"), allReduce = w->intern("all_reduce"),
             group = w->intern("default_pg"), adam = w->intern("torch.optim.Adam");
    int64_t t = 0;
    if (timing.setupNs > 0) {  // e.g. the process group starting
        OpRecord setup;
        setup.startNs = 0;
        setup.endNs = timing.setupNs;
        setup.name = w->intern("aten::empty.memory_format");
        setup.step = timing.firstStep;
        w->submit(std::move(setup));
        t = timing.setupNs;
    }
    for (int64_t s = timing.firstStep; s < timing.firstStep + timing.steps; ++s) {
        int64_t own = timing.own(rank, s);
        int64_t slowest = 0;
        for (int r = 0; r < world; ++r)
            slowest = std::max(slowest, timing.own(r, s));
        OpRecord op;
        op.startNs = t;
        op.endNs = t + own;
        op.name = mm;
        op.step = s;
        op.phase = Phase::Forward;
        op.operands = {{0, OperandRole::Input, OperandKind::Tensor, TensorId{1}, 0, shard},
                       {1, OperandRole::Input, OperandKind::Tensor, TensorId{2}, 0, replicate},
                       {2, OperandRole::Output, OperandKind::Tensor, TensorId{3}, 0, shard}};
        w->submit(std::move(op));
        CollectiveRecord c;
        c.kind = allReduce;
        c.group = group;
        c.bytes = 1024;
        c.startNs = t + own;
        c.endNs = t + slowest + kMs;  // everyone leaves 1 ms after the slowest arrives
        c.issuedNs = c.startNs;
        c.step = s;
        w->submit(Record{c});
        t = c.endNs;
        w->submit(Record{OptimizerStepRecord{s, adam, t, t + 100, 4}});
        t += 100;
    }
    w->close();
}

RunAnalysis analyzeTimed(const test::TempDir& dir, int world, const Timing& timing) {
    for (int r = 0; r < world; ++r)
        writeTimedRank(dir.path(), world, r, timing);
    return analyze(RunReader::open(dir.path()));
}

const RankSteps& rankRow(const TimeBreakdown& t, int rank) {
    for (const RankSteps& r : t.ranks)
        if (r.rank == rank) return r;
    throw std::runtime_error("no row for the rank");
}

TEST(TimeBreakdown, StepsSplitIntoOwnWorkAndCollectivesAndTheSlowestRankIsNamed) {
    test::TempDir dir;
    // rank 2 computes 30 ms a step, the others 10 ms: they wait for it
    Timing timing{[](int rank, int64_t) { return rank == 2 ? 30 * kMs : 10 * kMs; }};
    RunAnalysis a = analyzeTimed(dir, 3, timing);
    const TimeBreakdown& t = a.time;
    ASSERT_TRUE(t.computed);
    ASSERT_EQ(t.ranks.size(), 3u);
    ASSERT_EQ(t.columns.size(), 10u);
    EXPECT_EQ(t.stepsPerColumn, 1);

    const RankSteps& slow = rankRow(t, 2);
    const RankSteps& fast = rankRow(t, 0);
    EXPECT_EQ(slow.steps, 10);
    // a step: own work + (slowest - own + 1 ms) in the all_reduce + 100 ns optimizer
    EXPECT_EQ(slow.medianStepNs, 31 * kMs + 100);
    EXPECT_EQ(fast.medianStepNs, 31 * kMs + 100);
    EXPECT_EQ(slow.medianOutsideNs, 30 * kMs + 100);
    EXPECT_EQ(slow.medianCollectiveNs, 1 * kMs);
    EXPECT_EQ(fast.medianOutsideNs, 10 * kMs + 100);
    EXPECT_EQ(fast.medianCollectiveNs, 21 * kMs);
    EXPECT_EQ(slow.slowestIn, 10);
    EXPECT_EQ(fast.slowestIn, 0);
    // the outlier first
    EXPECT_EQ(t.ranks.front().rank, 2);
    EXPECT_GT(t.ranks.front().deviation, 1.5);

    ASSERT_EQ(t.slowest.size(), 10u);
    for (const SlowestRank& s : t.slowest) {
        EXPECT_EQ(s.rank, 2);
        EXPECT_EQ(s.ranks, 3);
        EXPECT_EQ(s.outsideNs, 30 * kMs + 100);
        EXPECT_EQ(s.meanOthersNs, 10 * kMs + 100);
    }
    const StepCell& cell = slow.cells[4];
    EXPECT_EQ(cell.steps, 1);
    EXPECT_EQ(cell.slowest, 1);
    EXPECT_EQ(cell.outsideNs(), 30 * kMs + 100);

    std::vector<Finding> stragglers = stragglerFindings(t);
    ASSERT_EQ(stragglers.size(), 1u);
    EXPECT_EQ(stragglers[0].kind, FindingKind::Straggler);
    EXPECT_EQ(stragglers[0].rank, 2);
    EXPECT_NE(stragglers[0].message.find("rank 2 is the slowest rank in 10 of 10 steps: 30.0 ms "
                                         "a step outside collectives, against 10.0 ms for the "
                                         "other ranks (median; 3.00x)"),
              std::string::npos)
        << stragglers[0].message;
    EXPECT_NE(stragglers[0].message.find("21.0 ms a step with a collective in flight"),
              std::string::npos)
        << stragglers[0].message;
    // not a finding of `check` unless asked for
    EXPECT_TRUE(findingsOf(a, {FindingKind::Straggler}).empty());
    EXPECT_FALSE(findingKindInfo(FindingKind::Straggler).inAny);
}

TEST(TimeBreakdown, OpsAndCollectivesHaveTheirCountsTimesRanksAndPlacements) {
    test::TempDir dir;
    Timing timing{[](int rank, int64_t step) { return (rank + 1) * kMs + step; }};
    RunAnalysis a = analyzeTimed(dir, 2, timing);
    const TimeBreakdown& t = a.time;
    ASSERT_EQ(t.ops.size(), 2u);
    const OpStat* mm = nullptr;
    const OpStat* allReduce = nullptr;
    for (const OpStat& o : t.ops)
        (o.collective ? allReduce : mm) = &o;
    ASSERT_TRUE(mm && allReduce);
    EXPECT_EQ(mm->name, "aten::mm");
    EXPECT_EQ(mm->count, 20);
    // rank 0: 1 ms + step, rank 1: 2 ms + step, steps 0-9
    EXPECT_EQ(mm->totalNs, 10 * kMs + 20 * kMs + 2 * 45);
    EXPECT_EQ(mm->maxNs, 2 * kMs + 9);
    EXPECT_EQ(mm->meanNs(), (30 * kMs + 90) / 20);
    EXPECT_EQ(mm->ranks, 2);
    EXPECT_EQ(mm->placements, std::vector<std::string>{"[Shard(0)] x [Replicate()]"});
    EXPECT_EQ(allReduce->name, "all_reduce");
    EXPECT_EQ(allReduce->count, 20);
    EXPECT_EQ(allReduce->bytes, 20 * 1024);
    EXPECT_EQ(allReduce->ranks, 2);
    // ordered by total time: the collectives here last longer than the ops
    EXPECT_GE(t.ops[0].totalNs, t.ops[1].totalNs);
    EXPECT_EQ(rankRow(t, 1).slowestIn, 10);
}

// Ranks are read side by side in batches and taken in rank order: a tie for
// the slowest rank goes to the lower rank, as one rank after another gave;
// progress is told on the calling thread only, and a callback that throws
// (the GUI's cancel) ends the breakdown with its exception.
TEST(TimeBreakdown, ManyRanksReadSideBySideAreTakenInRankOrder) {
    test::TempDir dir;
    constexpr int kWorld = 70;  // three batches
    // ranks 13 and 20 (one batch) take 5 ms a step, the others 1-2 ms
    Timing timing{[](int rank, int64_t step) {
        return rank == 13 || rank == 20 ? 5 * kMs : (1 + (rank + step) % 2) * kMs;
    }};
    for (int r = 0; r < kWorld; ++r)
        writeTimedRank(dir.path(), kWorld, r, timing);
    RunReader run = RunReader::open(dir.path());
    std::vector<std::thread::id> told;
    int64_t lastDone = 0, lastTotal = 0;
    TimeBreakdownOptions options;
    options.progress = [&](int64_t done, int64_t total) {
        told.push_back(std::this_thread::get_id());
        lastDone = done, lastTotal = total;
    };
    TimeBreakdown t = computeTimeBreakdown(run, {}, options);
    ASSERT_EQ(t.ranks.size(), size_t(kWorld));
    ASSERT_EQ(t.slowest.size(), 10u);
    for (const SlowestRank& s : t.slowest) {
        EXPECT_EQ(s.rank, 13) << "step " << s.step;
        EXPECT_EQ(s.ranks, kWorld);
    }
    EXPECT_EQ(rankRow(t, 13).slowestIn, 10);
    EXPECT_EQ(rankRow(t, 20).slowestIn, 0);
    for (const OpStat& o : t.ops) {
        EXPECT_EQ(o.count, 10 * kWorld) << o.name;
        EXPECT_EQ(o.ranks, kWorld) << o.name;
    }
    ASSERT_FALSE(told.empty());
    for (const std::thread::id& id : told)
        EXPECT_EQ(id, std::this_thread::get_id());
    EXPECT_LE(lastDone, int64_t(10) * kWorld);
    EXPECT_EQ(lastTotal, int64_t(10) * kWorld);

    struct Cancelled {};
    int calls = 0;
    options.progress = [&](int64_t, int64_t) {
        ++calls;
        throw Cancelled{};
    };
    EXPECT_THROW(computeTimeBreakdown(run, {}, options), Cancelled);
    EXPECT_EQ(calls, 1);
}

TEST(TimeBreakdown, BalancedRanksHaveNoStraggler) {
    test::TempDir dir;
    // the slowest rank changes from step to step, each 10-13 ms
    Timing timing{[](int rank, int64_t step) { return (10 + (rank + step) % 4) * kMs; }};
    RunAnalysis a = analyzeTimed(dir, 4, timing);
    EXPECT_EQ(a.time.slowest.size(), 10u);
    EXPECT_TRUE(stragglerFindings(a.time).empty());
}

TEST(TimeBreakdown, ManyStepsShareColumnsAndEveryStepIsCounted) {
    test::TempDir dir;
    Timing timing{[](int rank, int64_t) { return (rank + 1) * kMs; }, 600, 5};
    RunAnalysis a = analyzeTimed(dir, 2, timing);
    const TimeBreakdown& t = a.time;
    EXPECT_EQ(t.stepsPerColumn, 3);
    ASSERT_EQ(t.columns.size(), 200u);
    EXPECT_EQ(t.columns.front().firstStep, 5);
    EXPECT_EQ(t.columns.front().lastStep, 7);
    EXPECT_EQ(t.columns.back().lastStep, 604);
    for (const RankSteps& r : t.ranks) {
        int64_t steps = 0;
        for (const StepCell& c : r.cells)
            steps += c.steps;
        EXPECT_EQ(steps, 600);
        EXPECT_EQ(r.cells[0].steps, 3);
    }
    EXPECT_EQ(rankRow(t, 1).cells[10].slowest, 3);
}

TEST(TimeBreakdown, StepNumbersFromADamagedFileSizeNothing) {
    test::TempDir dir;
    Manifest initial;
    initial.runId = "time-run";
    initial.worldSize = 1;
    auto w = createRankWriter(dir.path(), initial, 0);
    StringId adam = w->intern("torch.optim.Adam");
    for (int64_t step : {int64_t(0), std::numeric_limits<int64_t>::max() - 1,
                         std::numeric_limits<int64_t>::max(), int64_t(-5)})
        w->submit(Record{OptimizerStepRecord{step, adam, 10, 20, 1}});
    w->close();
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    EXPECT_LE(a.time.columns.size(), kMaxStepColumns);
    EXPECT_FALSE(a.time.columns.empty());
    ASSERT_EQ(a.time.ranks.size(), 1u);
    EXPECT_EQ(a.time.ranks[0].steps, 3);  // the negative one is not a step
    std::ostringstream html;
    writeHtmlReport(RunReader::open(dir.path()), a, html);
    EXPECT_NE(html.str().find("Where the time goes"), std::string::npos);
}

TEST(TimeBreakdown, ReportsCarryTheBreakdownAndTheStraggler) {
    test::TempDir dir;
    Timing timing{[](int rank, int64_t) { return rank == 1 ? 25 * kMs : 5 * kMs; }};
    RunAnalysis a = analyzeTimed(dir, 3, timing);
    nlohmann::json j = reportToJson(a);
    ASSERT_TRUE(j.contains("time"));
    EXPECT_EQ(j["time"]["ranks"][0]["rank"], 1);
    EXPECT_EQ(j["time"]["ranks"][0]["slowest_in"], 10);
    EXPECT_EQ(j["time"]["stragglers"].size(), 1u);
    EXPECT_EQ(j["time"]["stragglers"][0]["rank"], 1);
    EXPECT_EQ(j["time"]["ops"][0]["name"], "all_reduce");
    EXPECT_EQ(j["time"]["cell_fields"][2], "collective_ns");
    EXPECT_EQ(j["time"]["ranks"][0]["cells"].size(), 10u);
    // not among the run's findings: only `check --fail-on straggler` reports it
    for (const auto& f : j["findings"])
        EXPECT_NE(f["kind"], "straggler");

    std::ostringstream md;
    writeMarkdownReport(a, md);
    EXPECT_NE(md.str().find("## Where the time goes"), std::string::npos);
    EXPECT_NE(md.str().find("| ` aten::mm ` |"), std::string::npos) << md.str();
    EXPECT_NE(md.str().find("**Straggler:** rank 1 is the slowest rank in 10 of 10 steps"),
              std::string::npos);

    std::ostringstream html;
    writeHtmlReport(RunReader::open(dir.path()), a, html);
    std::string page = html.str();
    EXPECT_NE(page.find("<h2>Where the time goes</h2>"), std::string::npos);
    EXPECT_NE(page.find("aria-label='Step time by rank and step'"), std::string::npos);
    EXPECT_NE(page.find("<a href='#rank-steps-1'><text"), std::string::npos);
    EXPECT_NE(page.find("<tr id='rank-steps-1'>"), std::string::npos);
    EXPECT_NE(page.find("class='finding straggler'"), std::string::npos);
    // rank 1's row comes first in the heat map
    size_t section = page.find("<h2>Where the time goes</h2>");
    EXPECT_LT(page.find("rank 1</text>", section), page.find("rank 0</text>", section));
}

TEST(TimeBreakdown, TheFirstStepStartsWithItsTraining) {
    test::TempDir dir;
    Timing timing{[](int, int64_t) { return 5 * kMs; }};
    timing.setupNs = 2'000 * kMs;
    timing.firstStep = 3;
    writeTimedRank(dir.path(), 1, 0, timing);
    RunReader run = RunReader::open(dir.path());
    const RankReader& r = run.ranks().front();
    std::vector<OptimizerStepRecord> steps = r.optimizerSteps();
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(firstStepStart(r, steps.front()), timing.setupNs);  // not the set-up op's 0
}

// The HTML timeline folds a long set-up into a narrow band: the steps take
// the width, the set-up's incidents and records stay in view.
TEST(TimeBreakdown, TheHtmlTimelineFoldsTheSetUpBeforeTheFirstStep) {
    auto stepBandX = [](const std::string& page, int64_t step) {
        size_t title = page.find(fmt::format("<title>step {}</title>", step));
        size_t rect = page.rfind("<rect x='", title);
        return std::stod(page.substr(rect + 9));
    };
    for (int64_t setup : {int64_t(0), 2'000 * kMs}) {
        SCOPED_TRACE(setup);
        test::TempDir dir;
        // one rank: ranks written one after the other have their wall
        // clocks apart by the time that takes, which moves the bands
        Timing timing{[](int, int64_t) { return 5 * kMs; }};
        timing.setupNs = setup;
        RunAnalysis a = analyzeTimed(dir, 1, timing);
        std::ostringstream html;
        HtmlReportOptions options;
        writeHtmlReport(RunReader::open(dir.path()), a, html, options);
        const std::string page = html.str();
        const int left = 70;
        if (setup == 0) {
            EXPECT_EQ(page.find("set-up before the first step"), std::string::npos);
            EXPECT_EQ(page.find("(first step)"), std::string::npos);
            EXPECT_LT(stepBandX(page, 0), left + 1);
            continue;
        }
        EXPECT_NE(page.find("set-up 2.00 s</text>"), std::string::npos) << page;
        EXPECT_NE(page.find("0 ms (first step)"), std::string::npos);
        EXPECT_NE(page.find("grey band: the set-up before the first step, folded"),
                  std::string::npos);
        // step 0 starts after the fold (8 % of the width and its gap), and the
        // ten steps (about 70 ms against 2 s of set-up) take the rest
        double width = options.timelineWidth;
        EXPECT_GE(stepBandX(page, 0), left + width * 0.08);
        EXPECT_LE(stepBandX(page, 0), left + width * 0.08 + 12);
        EXPECT_GT(stepBandX(page, 9), left + width * 0.8);
    }
}

// A large job's timeline draws at most 64 lanes: the rank furthest from
// the median first, then the others in overview order, drawn in rank order.
TEST(TimeBreakdown, TheHtmlTimelineOfALargeJobDrawsTheRanksThatNeedALook) {
    test::TempDir dir;
    constexpr int kRanks = 70;
    Timing timing{[](int rank, int64_t) { return rank == 68 ? 30 * kMs : 5 * kMs; }};
    timing.steps = 4;
    RunAnalysis a = analyzeTimed(dir, kRanks, timing);
    std::ostringstream html;
    writeHtmlReport(RunReader::open(dir.path()), a, html);
    const std::string page = html.str();
    size_t from = page.find("<h2>Timeline</h2>"), to = page.find("<h2>Where the time goes</h2>");
    ASSERT_NE(from, std::string::npos);
    ASSERT_NE(to, std::string::npos);
    const std::string timeline = page.substr(from, to - from);
    EXPECT_NE(timeline.find("64 of 70 ranks drawn"), std::string::npos);
    size_t lanes = 0;
    for (size_t at = timeline.find("'>rank "); at != std::string::npos;
         at = timeline.find("'>rank ", at + 1))
        ++lanes;
    EXPECT_EQ(lanes, 64u);
    EXPECT_NE(timeline.find("'>rank 68</text>"), std::string::npos);  // the outlier
    EXPECT_EQ(timeline.find("'>rank 63</text>"), std::string::npos);  // left to the heat maps
    EXPECT_LT(timeline.find("'>rank 62</text>"), timeline.find("'>rank 68</text>"));
    // the ranks table lists the same ranks and sums up the others in a row
    const std::string ranks =
        page.substr(page.find("<h2>Ranks</h2>"), from - page.find("<h2>Ranks</h2>"));
    size_t rows = 0;
    for (size_t at = ranks.find("<tr><td class=n>"); at != std::string::npos;
         at = ranks.find("<tr><td class=n>", at + 1))
        ++rows;
    EXPECT_EQ(rows, 64u);
    EXPECT_NE(ranks.find("<td colspan=2>6 more: 63-67,69</td>"), std::string::npos) << ranks;
}

}  // namespace
}  // namespace meshscope
