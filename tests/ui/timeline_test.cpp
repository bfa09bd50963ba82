// The Qt-free timeline logic: clock alignment, culling and folding, the
// feeder (one path for loading and live following) and replay stepping.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "core/synth/synthetic_run.h"
#include "tests/ui/resident_memory.h"
#include "ui/app/replay_controller.h"
#include "ui/timeline/timeline_feeder.h"
#include "ui/timeline/timeline_tracks.h"
#include "ui/timeline/timeline_view.h"

namespace meshscope::ui {
namespace {

namespace fs = std::filesystem;

fs::path freshDir(const std::string& name) {
    fs::path dir =
        fs::temp_directory_path() / ("meshscope-ui-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    return dir;
}

Lane laneOf(std::vector<std::pair<int64_t, int64_t>> spans) {
    Lane lane;
    int64_t seq = 0;
    for (auto [a, b] : spans) {
        lane.spans.push_back({a, b, ++seq, 1, Phase::Forward, false});
        lane.maxDuration = std::max(lane.maxDuration, b - a);
    }
    return lane;
}

// A span is 20 bytes: exact to 2^30 ns, longer durations rounded up (a
// parent still covers its children), times near the int64 limit saturate,
// and the seq, name, phase and reconciliation flag survive the packing.
TEST(TimelineSpan, PacksWithoutLosingWhatTheTimelineShows) {
    EXPECT_EQ(sizeof(Span), 20u);
    Span exact(1000, 1000 + (int64_t(1) << 30) - 1, 7, 42, Phase::Backward, true);
    EXPECT_EQ(exact.end(), 1000 + (int64_t(1) << 30) - 1);
    EXPECT_EQ(exact.seq(), 7);
    EXPECT_EQ(exact.name(), 42u);
    EXPECT_EQ(exact.phase(), Phase::Backward);
    EXPECT_TRUE(exact.reconciles());
    // 3.5 s and a bit: microseconds, rounded up
    Span longer(0, 3'500'000'001, 1, 1, Phase::Forward, false);
    EXPECT_EQ(longer.end(), 3'500'001'000);
    EXPECT_FALSE(longer.reconciles());
    // two hours: milliseconds; a day and more: still covered
    Span hang(5, 5 + 7'200'000'000'123, 2, 1, Phase::Other, false);
    EXPECT_GE(hang.end(), 5 + 7'200'000'000'123);
    EXPECT_LE(hang.end(), 5 + 7'200'000'000'123 + 1'000'000);
    Span days(0, int64_t(3) * 86'400'000'000'000 + 1, 3, 1, Phase::Other, false);
    EXPECT_GE(days.end(), int64_t(3) * 86'400'000'000'000 + 1);
    // hostile times: an end before its start is a zero span; near the limit it saturates
    EXPECT_EQ(Span(100, 50, 4, 1, Phase::Other, false).end(), 100);
    Span edge(INT64_MAX - 10, INT64_MAX, 5, 1, Phase::Other, false);
    EXPECT_EQ(edge.end(), INT64_MAX);
    Span wide(INT64_MIN, INT64_MAX, 6, 1, Phase::Other, false);
    EXPECT_EQ(wide.start, INT64_MIN);
    // past 34 years (only a damaged file): the longest a span holds, never wrapped
    EXPECT_EQ(wide.duration(), ((int64_t(1) << 30) - 1) * 1'000'000'000);
    EXPECT_GT(wide.end(), wide.start);
    // a name index past 2^24 shows as none rather than as another name
    EXPECT_EQ(Span(0, 1, 1, Span::kMaxName + 1, Phase::Data, false).name(), 0u);
    EXPECT_EQ(Span(0, 1, 1, Span::kMaxName, Phase::Data, false).phase(), Phase::Data);
    // seqs up to 2^36 - 1 exactly; a damaged file's beyond are clamped, each
    // field keeping to its own bits
    Span big(0, 1, Span::kMaxSeq, Span::kMaxName, Phase::Optimizer, true);
    EXPECT_EQ(big.seq(), Span::kMaxSeq);
    EXPECT_EQ(big.name(), Span::kMaxName);
    EXPECT_EQ(big.phase(), Phase::Optimizer);
    EXPECT_TRUE(big.reconciles());
    EXPECT_EQ(Span(0, 1, INT64_MAX, 3, Phase::Other, false).seq(), Span::kMaxSeq);
    EXPECT_EQ(Span(0, 1, -5, 3, Phase::Other, false).seq(), 0);
    EXPECT_EQ(Span(0, 1, 9, 3, Phase(200), false).phase(), Phase::Other);
}

int64_t anonymousKiB() {
    return test::residentKiB("RssAnon:");
}

std::vector<Span> spansFrom(size_t n, int64_t stride = 10) {
    std::vector<Span> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i)
        out.emplace_back(int64_t(i) * stride, int64_t(i) * stride + 5, int64_t(i) + 1,
                         uint32_t(i % 7), Phase(i % 5), i % 3 == 0);
    return out;
}

void expectSame(const SpanColumn& column, const std::vector<Span>& spans) {
    ASSERT_EQ(column.size(), spans.size());
    for (size_t i = 0; i < spans.size(); ++i) {
        const Span &a = column[i], &b = spans[i];
        ASSERT_TRUE(a.start == b.start && a.end() == b.end() && a.seq() == b.seq() &&
                    a.name() == b.name() && a.phase() == b.phase() &&
                    a.reconciles() == b.reconciles())
            << "span " << i;
    }
}

// A long lane's full blocks go to the spill file and come back as they
// were; the process's own memory does not grow with them, and a column's
// blocks are given back when it goes (another run opened).
TEST(SpanColumn, FullBlocksAreSpilledReadBackAndGivenBack) {
    fs::path dir = freshDir("spill");
    ::setenv("MESHSCOPE_GUI_SPILL_DIR", dir.c_str(), 1);
    const size_t n = 40 * SpanColumn::kSpansPerBlock + 123;  // 2.6M spans, 52 MB
    std::vector<Span> spans = spansFrom(n);
    int64_t before = anonymousKiB();
    {
        SpanColumn column;
        for (const Span& s : spans)
            column.push_back(s);
        int64_t grown = anonymousKiB() - before;
        EXPECT_EQ(column.spilledBlocks(), 40u);
        EXPECT_EQ(spillStatus().blocks, 40u);
        EXPECT_EQ(spillStatus().why, "");
        // the tail (under 1.25 MiB, doubled at most) and the block table;
        // ASan's shadow memory grows with what the test's own vector holds
#ifndef __SANITIZE_ADDRESS__
        EXPECT_LT(grown, 8 * 1024) << "KiB of anonymous memory for 52 MB of spans";
#endif
        std::printf("anonymous memory grew by %lld KiB for %zu spans\n", (long long)grown, n);
        expectSame(column, spans);
        // searches run over the whole column, blocks and tail alike
        auto it = std::lower_bound(column.begin(), column.end(), int64_t(n - 50) * 10,
                                   [](const Span& s, int64_t v) { return s.start < v; });
        EXPECT_EQ(size_t(it - column.begin()), n - 50);
        EXPECT_EQ(column.back().seq(), int64_t(n));
        SpanColumn copy = column;
        expectSame(copy, spans);
        EXPECT_EQ(spillStatus().blocks, 80u);
    }
    EXPECT_EQ(spillStatus().blocks, 0u);
    // nothing is left in the folder: the file had no name
    EXPECT_TRUE(fs::is_empty(dir));
    fs::remove_all(dir);
}

// A lane that received spans out of order is sorted in place, across the
// mapped blocks (the feeder's repair of out-of-order rows).
TEST(SpanColumn, SortsInPlaceAcrossBlocks) {
    fs::path dir = freshDir("spill-sort");
    ::setenv("MESHSCOPE_GUI_SPILL_DIR", dir.c_str(), 1);
    std::vector<Span> spans = spansFrom(3 * SpanColumn::kSpansPerBlock + 77);
    std::vector<Span> shuffled = spans;
    std::reverse(shuffled.begin(), shuffled.end());
    SpanColumn column;
    for (const Span& s : shuffled)
        column.push_back(s);
    EXPECT_EQ(column.spilledBlocks(), 3u);
    std::stable_sort(column.begin(), column.end(),
                     [](const Span& a, const Span& b) { return a.start < b.start; });
    expectSame(column, spans);
    fs::remove_all(dir);
}

// Where no spill file can be made, the blocks stay in memory, nothing is
// lost, and why is said once.
TEST(SpanColumn, WithoutASpillFileBlocksStayInMemory) {
    fs::path file = freshDir("spill-blocked");
    std::ofstream(file) << "a file where the folder would be";
    ::setenv("MESHSCOPE_GUI_SPILL_DIR", (file / "sub").c_str(), 1);
    std::vector<Span> spans = spansFrom(2 * SpanColumn::kSpansPerBlock + 5);
    {
        SpanColumn column;
        for (const Span& s : spans)
            column.push_back(s);
        EXPECT_EQ(column.spilledBlocks(), 0u);
        SpillStatus status = spillStatus();
        EXPECT_NE(status.why.find("cannot create the spill file"), std::string::npos) << status.why;
        EXPECT_EQ(status.inMemory, 2u);
        expectSame(column, spans);
    }
    EXPECT_EQ(spillStatus().inMemory, 0u);
    fs::remove(file);
}

// The searches that read one bucket find what std::lower_bound finds.
TEST(SpanColumn, BucketSearchesAgreeWithAWholeSearch) {
    fs::path dir = freshDir("spill-search");
    ::setenv("MESHSCOPE_GUI_SPILL_DIR", dir.c_str(), 1);
    std::vector<Span> spans = spansFrom(2 * SpanColumn::kSpansPerBlock + 999, 7);
    SpanColumn column;
    for (const Span& s : spans)
        column.push_back(s);
    const int64_t last = spans.back().end();
    for (int64_t t = -5; t < last + 20; t += 997) {
        auto byStart = std::lower_bound(spans.begin(), spans.end(), t,
                                        [](const Span& s, int64_t v) { return s.start < v; });
        auto byEnd = std::lower_bound(spans.begin(), spans.end(), t,
                                      [](const Span& s, int64_t v) { return s.end() < v; });
        size_t want = size_t(byStart - spans.begin());
        EXPECT_EQ(column.firstStartingAt(0, t), want) << t;
        EXPECT_EQ(column.firstEndingAt(t), size_t(byEnd - spans.begin())) << t;
        size_t from = size_t(t / 11) % spans.size();
        EXPECT_EQ(column.firstStartingAt(from, t), std::max(want, from)) << t;
        // counted exactly in the tail, within one bucket in the full blocks
        bool inTail = want > 0 && want - 1 >= 2 * SpanColumn::kSpansPerBlock;
        EXPECT_NEAR(column.startsBefore(t), double(want), inTail ? 0.0 : 512.0) << t;
    }
    fs::remove_all(dir);
}

// The level of detail: a whole spilled lane on 1,000 px is folded from the
// buckets' summaries, so drawing it and its minimap pages in almost none of
// the spill file, and every span is still counted once; zoomed in, the
// window's own spans are read and stand alone.
TEST(SpanColumn, AZoomedOutViewReadsSummariesNotSpans) {
    fs::path dir = freshDir("spill-lod");
    ::setenv("MESHSCOPE_GUI_SPILL_DIR", dir.c_str(), 1);
    const size_t n = 40 * SpanColumn::kSpansPerBlock + 321;
    Lane lane;
    for (const Span& s : spansFrom(n)) {
        lane.spans.push_back(s);
        lane.maxDuration = std::max(lane.maxDuration, s.duration());
    }
    ASSERT_EQ(lane.spans.spilledBlocks(), 40u);
    AlignMap id = AlignMap::offset(0);
    Projection whole{&id, 0, 1000.0 / double(n * 10)};
    int64_t before = test::residentKiB("RssFile:");
    std::vector<DrawItem> items;
    visibleItems(lane, whole, 1000, 3, items);
    RankTimeline rank;
    rank.lanes.push_back(std::move(lane));
    std::vector<uint32_t> bins = density(rank, 0, double(n * 10), 1000);
    int64_t paged = test::residentKiB("RssFile:") - before;
    std::printf("whole view of %zu spilled spans: %zu items, %lld KiB of the file paged in\n", n,
                items.size(), (long long)paged);
    EXPECT_LT(paged, 2048) << "KiB paged in for a view of 52 MB of spans";
    EXPECT_LE(items.size(), 1000u / 3 + 2);
    uint64_t total = 0, binned = 0;
    for (const DrawItem& it : items)
        total += it.count;
    for (uint32_t b : bins)
        binned += b;
    EXPECT_EQ(total, n);
    EXPECT_EQ(binned, n);
    // each item covers its spans, in order
    const SpanColumn& spans = rank.lanes[0].spans;
    for (size_t k = 0; k < items.size(); ++k) {
        const DrawItem& it = items[k];
        EXPECT_EQ(it.start, spans[it.first].start);
        EXPECT_GE(it.end, spans[it.first + it.count - 1].end());
        if (k > 0) {
            EXPECT_EQ(items[k - 1].first + items[k - 1].count, it.first);
        }
    }
    // 1 px per ns in the middle: each span of the window on its own
    visibleItems(rank.lanes[0], {&id, 13'000'000.0, 1.0}, 200, 3, items);
    ASSERT_EQ(items.size(), 21u);
    for (const DrawItem& it : items) {
        EXPECT_EQ(it.count, 1u);
        EXPECT_EQ(it.start, spans[it.first].start);
    }
    EXPECT_EQ(items.front().start, 13'000'000);
    fs::remove_all(dir);
}

// The analysis says how each rank's recording ended; a rank the GUI still
// follows stays live when its file is closed (the live poll that reads its
// last rows finishes it), while a killed one is stopped at once.
TEST(TimelineReach, ALiveRankIsFinishedByItsLastPollNotByTheAnalysis) {
    TimelineData data;
    data.ranks.resize(3);
    for (int i = 0; i < 3; ++i)
        data.ranks[size_t(i)].rank = i;
    data.ranks[0].state = RankState::Live;
    data.ranks[1].state = RankState::Live;
    data.ranks[2].state = RankState::Stopped;
    RecordingReach closed{0, RecordingReach::End::Closed, "ended"};
    RecordingReach killed{1, RecordingReach::End::Killed, "killed by SIGKILL"};
    RecordingReach closedLater{2, RecordingReach::End::Closed, "ended"};
    data.applyReach({closed, killed, closedLater});
    EXPECT_EQ(data.ranks[0].state, RankState::Live);
    EXPECT_EQ(data.ranks[1].state, RankState::Stopped);
    EXPECT_EQ(data.ranks[1].endLabel, "killed by SIGKILL");
    EXPECT_EQ(data.ranks[2].state, RankState::Finished);
}

TEST(AlignMap, OffsetRoundTrips) {
    AlignMap m = AlignMap::offset(1000);
    EXPECT_DOUBLE_EQ(m.toAligned(5), 1005);
    EXPECT_EQ(m.toRaw(1005), 5);
}

TEST(AlignMap, PiecewiseStretchesStepsOntoTheReference) {
    // This rank's steps end at 100 and 300; the reference's at 1000 and 1100.
    AlignMap m = AlignMap::piecewise({{100, 1000}, {300, 1100}}, 0);
    EXPECT_DOUBLE_EQ(m.toAligned(100), 1000);
    EXPECT_DOUBLE_EQ(m.toAligned(200), 1050);  // halfway through the step
    EXPECT_DOUBLE_EQ(m.toAligned(50), 950);    // slope 1 before the first knot
    EXPECT_DOUBLE_EQ(m.toAligned(400), 1200);  // and after the last
    for (int64_t raw : {0, 99, 100, 150, 299, 300, 301, 1000})
        EXPECT_NEAR(double(m.toRaw(m.toAligned(raw))), double(raw), 2.0) << raw;
}

TEST(AlignMap, DropsKnotsThatWouldReverseTime) {
    AlignMap m = AlignMap::piecewise({{100, 1000}, {200, 900}, {300, 1200}}, 0);
    double last = -1e18;
    for (int64_t raw = 0; raw < 500; raw += 7) {
        EXPECT_GT(m.toAligned(raw), last);
        last = m.toAligned(raw);
    }
}

TEST(VisibleItems, WideSpansStayNarrowOnesFoldWithTheirCount) {
    // Ten 1-ns spans then one 100-ns span; 1 px per ns, fold below 3 px.
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (int i = 0; i < 10; ++i)
        spans.emplace_back(i * 2, i * 2 + 1);
    spans.emplace_back(100, 200);
    Lane lane = laneOf(spans);
    AlignMap id = AlignMap::offset(0);
    Projection p{&id, 0, 1.0};
    std::vector<DrawItem> items;
    visibleItems(lane, p, 1000, 3, items);
    uint32_t total = 0;
    for (const DrawItem& it : items)
        total += it.count;
    EXPECT_EQ(total, 11u);  // nothing lost, nothing counted twice
    ASSERT_FALSE(items.empty());
    EXPECT_GT(items.front().count, 1u);
    EXPECT_EQ(items.back().count, 1u);
    EXPECT_EQ(items.back().start, 100);
    // Zoomed in 10x every span is wide enough to stand alone.
    visibleItems(lane, {&id, 0, 10.0}, 100000, 3, items);
    EXPECT_EQ(items.size(), 11u);
}

TEST(VisibleItems, CullsToTheViewAndCostsPixelsNotSpans) {
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (int64_t i = 0; i < 1'000'000; ++i)
        spans.emplace_back(i * 10, i * 10 + 5);
    Lane lane = laneOf(spans);
    AlignMap id = AlignMap::offset(0);
    std::vector<DrawItem> items;
    // The whole million on 1000 px: at most one item per 3 px.
    visibleItems(lane, {&id, 0, 1000.0 / 1e7}, 1000, 3, items);
    EXPECT_LE(items.size(), 340u);
    uint64_t total = 0;
    for (const DrawItem& it : items)
        total += it.count;
    EXPECT_EQ(total, 1'000'000u);
    // A window in the middle sees only its own spans.
    visibleItems(lane, {&id, 5'000'000.0, 1.0}, 100, 3, items);
    ASSERT_FALSE(items.empty());
    EXPECT_GE(items.front().end, 5'000'000);
    EXPECT_LE(items.back().start, 5'000'100);
}

TEST(VisibleItems, SpanAtFindsTheCoveringSpan) {
    Lane lane = laneOf({{0, 10}, {20, 30}, {40, 50}});
    EXPECT_EQ(spanAt(lane, 25), 1);
    EXPECT_EQ(spanAt(lane, 15), -1);
    EXPECT_EQ(spanAt(lane, 50), 2);
}

TEST(TimelineView, ZoomKeepsTheAnchorAndClampsDepth) {
    TimelineView v;
    v.setWidth(1000);
    v.setRange(0, 1e6);
    double before = v.toAligned(250);
    v.zoomAt(250, 4);
    EXPECT_NEAR(v.toAligned(250), before, 1e-6);
    EXPECT_NEAR(v.range(), 2.5e5, 1e-6);
    for (int i = 0; i < 100; ++i)
        v.zoomAt(500, 10);
    EXPECT_GE(v.range(), TimelineView::kMinRangeNs);
}

TEST(TimelineView, TickLabelsTellNeighbouringTicksApart) {
    // Deep in a run, ticks 50 ns apart: each label must differ from the next.
    EXPECT_EQ(formatTick(644'670'050, 50), "644.67005 ms");
    EXPECT_EQ(formatTick(644'670'100, 50), "644.67010 ms");
    EXPECT_EQ(formatTick(600e6, 100e6), "600 ms");
    EXPECT_EQ(formatTick(1.5e9, 0.5e9), "1.5 s");
    EXPECT_EQ(formatTick(250, 50), "250 ns");
    EXPECT_EQ(formatTick(0, 100e6), "0 ms");
    EXPECT_EQ(formatTick(12'500, 500), "12.5 us");
    for (double origin : {0.0, 3e6, 644.67e6, 7.2e9})
        for (double step : {50.0, 200.0, 1e3, 2e4, 5e6})
            EXPECT_NE(formatTick(origin, step), formatTick(origin + step, step))
                << origin << " " << step;
}

// Every rank of `run` fed whole, as the GUI loads a finished run.
TimelineData loadTimeline(const RunReader& run) {
    TimelineData data;
    data.ranks.resize(run.ranks().size());
    for (size_t i = 0; i < run.ranks().size(); ++i) {
        initRank(run.ranks()[i], data.ranks[i]);
        feedRank(run.ranks()[i], data.ranks[i], kNoLimit);
    }
    return data;
}

class FeederTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir = freshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
        SyntheticRunSpec spec;
        spec.ranks = 2;
        spec.steps = 6;
        spec.layers = 2;
        spec.incidentsPerStep = 2;
        totals = writeSyntheticRun(dir, spec);
    }
    void TearDown() override { fs::remove_all(dir); }
    TimelineData loadAll() const { return loadTimeline(RunReader::open(dir)); }

    fs::path dir;
    SyntheticRankTotals totals;
};

TEST_F(FeederTest, LoadsEveryRowIntoSortedLanes) {
    RunReader run = RunReader::open(dir);
    TimelineData data;
    data.ranks.resize(run.ranks().size());
    for (size_t i = 0; i < run.ranks().size(); ++i) {
        initRank(run.ranks()[i], data.ranks[i]);
        FeedResult r = feedRank(run.ranks()[i], data.ranks[i], kNoLimit);
        EXPECT_TRUE(r.error.empty()) << r.error;
        // Totals are summed over both ranks, which are alike.
        EXPECT_EQ(r.ops, totals.ops / 2);
        EXPECT_EQ(r.incidents, totals.incidents / 2);
        EXPECT_EQ(r.collectives, totals.collectives / 2);
        EXPECT_EQ(r.steps, totals.steps);
        EXPECT_FALSE(feedRank(run.ranks()[i], data.ranks[i], kNoLimit).grew());
    }
    EXPECT_EQ(data.totalOps(), totals.ops);
    for (const RankTimeline& r : data.ranks) {
        EXPECT_EQ(r.state, RankState::Finished);
        for (const Lane& lane : r.lanes)
            EXPECT_TRUE(
                std::is_sorted(lane.spans.begin(), lane.spans.end(),
                               [](const Span& a, const Span& b) { return a.start < b.start; }));
        EXPECT_FALSE(r.string(r.lanes.front().spans.front().name()).empty());
    }
}

TEST_F(FeederTest, FeedingInSmallPiecesGivesTheSameTimeline) {
    RunReader run = RunReader::open(dir);
    RankTimeline whole, pieces;
    feedRank(run.ranks()[0], whole, kNoLimit);
    while (feedRank(run.ranks()[0], pieces, 7).ops > 0) {
    }
    ASSERT_EQ(whole.lanes.size(), pieces.lanes.size());
    for (size_t i = 0; i < whole.lanes.size(); ++i) {
        ASSERT_EQ(whole.lanes[i].spans.size(), pieces.lanes[i].spans.size());
        for (size_t k = 0; k < whole.lanes[i].spans.size(); ++k)
            EXPECT_EQ(whole.lanes[i].spans[k].seq(), pieces.lanes[i].spans[k].seq());
    }
}

// A live run's two halves (rows read on a worker, added on the GUI thread)
// build the same timeline as feeding, also in pieces and when a poll reads
// rows again.
TEST_F(FeederTest, ReadingThenApplyingGivesTheSameTimelineAsFeeding) {
    RunReader run = RunReader::open(dir);
    const RankReader& reader = run.ranks()[0];
    RankTimeline fed, applied;
    initRank(reader, fed);
    initRank(reader, applied);
    feedRank(reader, fed, kNoLimit);
    for (;;) {
        FeedCursor cursor = cursorOf(applied);
        RankRows rows = readRows(reader, cursor, 7);
        ASSERT_EQ(rows.error, "");
        FeedResult again = applyRows(rows, applied);
        EXPECT_EQ(applyRows(rows, applied).grew(), false);  // the same rows twice: nothing new
        if (!again.grew()) break;
    }
    EXPECT_EQ(applied.opCount, fed.opCount);
    ASSERT_EQ(fed.lanes.size(), applied.lanes.size());
    for (size_t i = 0; i < fed.lanes.size(); ++i) {
        ASSERT_EQ(fed.lanes[i].spans.size(), applied.lanes[i].spans.size());
        for (size_t k = 0; k < fed.lanes[i].spans.size(); ++k) {
            EXPECT_EQ(fed.lanes[i].spans[k].seq(), applied.lanes[i].spans[k].seq());
            EXPECT_EQ(fed.string(fed.lanes[i].spans[k].name()),
                      applied.string(applied.lanes[i].spans[k].name()));
        }
    }
    ASSERT_EQ(fed.incidents.size(), applied.incidents.size());
    for (size_t k = 0; k < fed.incidents.size(); ++k)
        EXPECT_EQ(fed.string(fed.incidents[k].op), applied.string(applied.incidents[k].op));
    EXPECT_EQ(fed.collectives.size(), applied.collectives.size());
    EXPECT_EQ(fed.steps.size(), applied.steps.size());
    EXPECT_GT(applied.incidents.size(), 0u);
}

TEST_F(FeederTest, StepAlignmentLinesUpStepEnds) {
    TimelineData data = loadAll();
    data.realign(AlignMode::Step);
    const RankTimeline &a = data.ranks[0], &b = data.ranks[1];
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (size_t k = 0; k < a.steps.size(); ++k)
        EXPECT_NEAR(a.align.toAligned(a.steps[k].end), b.align.toAligned(b.steps[k].end), 1.0);
}

TEST_F(FeederTest, ReplayVisitsEveryIncidentInTimeOrderBothWays) {
    TimelineData data = loadAll();
    data.realign(AlignMode::WallClock);
    ReplayStop at = stopAt(data.alignedRange().first - 1);
    int64_t seen = 0;
    while (auto stop = nextIncident(data, at, 1)) {
        EXPECT_GT(stop->key(), at.key());
        EXPECT_EQ(stop->item.kind, TimelineSelection::Kind::Incident);
        at = *stop;
        ++seen;
    }
    EXPECT_EQ(seen, totals.incidents);  // every incident of both ranks, once
    int64_t back = 0;
    while (auto stop = nextIncident(data, at, -1)) {
        EXPECT_LT(stop->key(), at.key());
        at = *stop;
        ++back;
    }
    EXPECT_EQ(back, seen - 1);
    auto firstOp = nextOp(data, stopAt(data.alignedRange().first - 1), 1);
    ASSERT_TRUE(firstOp);
    EXPECT_EQ(firstOp->item.kind, TimelineSelection::Kind::Op);
    auto secondOp = nextOp(data, *firstOp, 1);
    ASSERT_TRUE(secondOp);
    EXPECT_GT(secondOp->key(), firstOp->key());
}

// A run that ends in failures (SyntheticRunSpec::failures): markers carry
// their kind and colour, and each rank's stop is placed at its hang.
TEST(FeederFailures, MarkersCarryTheirKindAndEachRankItsStop) {
    fs::path dir = freshDir("failures");
    SyntheticRunSpec spec;
    spec.steps = 3;
    spec.failures = true;
    writeSyntheticRun(dir, spec);
    RunReader run = RunReader::open(dir);
    TimelineData data = loadTimeline(run);
    std::map<IncidentKind, int> kinds;
    for (const RankTimeline& r : data.ranks)
        for (const IncidentMark& m : r.incidents) {
            ++kinds[m.kind];
            if (m.kind == IncidentKind::MixedTensor) continue;
            EXPECT_EQ(markColor(m), kindColor(m.kind));
        }
    EXPECT_EQ(kinds[IncidentKind::NoShardingStrategy], 1);
    EXPECT_EQ(kinds[IncidentKind::DTensorError], 1);
    EXPECT_EQ(kinds[IncidentKind::CollectiveHang], 2);
    EXPECT_NE(kindColor(IncidentKind::CollectiveHang), kindColor(IncidentKind::DTensorError));

    RunAnalysis analysis = analyze(run);
    data.applyStops(analysis);
    for (const RankTimeline& r : data.ranks) {
        ASSERT_TRUE(r.stop) << r.rank;
        EXPECT_EQ(r.stop->kind, IncidentKind::CollectiveHang);
        EXPECT_EQ(r.stop->label, "stopped: hang");
        EXPECT_EQ(r.stop->state, analysis.stops[size_t(r.rank)].state());
        // At the hang's incident marker.
        EXPECT_EQ(r.stop->time, r.incidents.back().time);
        EXPECT_EQ(r.incidents.back().kind, IncidentKind::CollectiveHang);
    }
    // Each rank waits in its collective until its recording ended: a bar of
    // its whole length, drawn as pending.
    for (const RankTimeline& r : data.ranks) {
        auto hung = std::find_if(
            r.collectives.begin(), r.collectives.end(),
            [](const CollectiveSpan& c) { return c.state == CollectiveState::Pending; });
        ASSERT_NE(hung, r.collectives.end()) << r.rank;
        EXPECT_GT(hung->end - hung->start, int64_t(599'000'000'000)) << r.rank;
    }
    // A killed rank of a finished run is shown as such, never as live.
    ASSERT_EQ(analysis.reach.size(), 2u);
    analysis.reach[1].end = RecordingReach::End::Killed;
    analysis.reach[1].how = "killed by SIGKILL";
    data.ranks[1].state = RankState::Live;
    data.applyStops(analysis);
    EXPECT_EQ(data.ranks[1].state, RankState::Stopped);
    EXPECT_EQ(data.ranks[1].endLabel, "killed by SIGKILL");
    EXPECT_EQ(data.ranks[0].state, RankState::Finished);
    // No hang: the last collective, labelled as such.
    analysis.stops[1].stoppedIn.reset();
    data.applyStops(analysis);
    ASSERT_TRUE(data.ranks[1].stop);
    EXPECT_EQ(data.ranks[1].stop->label, "last collective");
    EXPECT_EQ(data.ranks[1].stop->time, analysis.stops[1].lastCollectiveNs);
    // A clean end: no stops at all.
    for (RankStop& s : analysis.stops) {
        s.stoppedIn.reset();
        s.closed = true;
        s.ended = "exited with 0";
    }
    data.applyStops(analysis);
    for (const RankTimeline& r : data.ranks)
        EXPECT_FALSE(r.stop);
    fs::remove_all(dir);
}

TEST(FeederLive, PicksUpRowsAWriterAppendsLater) {
    fs::path dir = freshDir("live");
    Manifest initial;
    initial.runId = "live";
    initial.worldSize = 1;
    auto w = createRankWriter(dir, initial, 0);
    auto writeOps = [&](int from, int n) {
        for (int i = from; i < from + n; ++i) {
            OpRecord op;
            op.startNs = i * 100;
            op.endNs = i * 100 + 50;
            op.name = w->intern("aten::mm");
            w->submit(std::move(op));
        }
        ASSERT_TRUE(w->flushNow());
    };
    writeOps(0, 10);
    RankReader reader = RankReader::open(rankFilePath(dir, 0));
    RankTimeline track;
    initRank(reader, track);
    EXPECT_EQ(track.state, RankState::Live);
    EXPECT_EQ(feedRank(reader, track, kNoLimit).ops, 10);
    writeOps(10, 5);
    EXPECT_EQ(feedRank(reader, track, kNoLimit).ops, 5);
    EXPECT_EQ(track.opCount, 15);
    EXPECT_EQ(track.lanes.at(0).spans.back().start, 1400);
    w->close();
    fs::remove_all(dir);
}

}  // namespace
}  // namespace meshscope::ui
