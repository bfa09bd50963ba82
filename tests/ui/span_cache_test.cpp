// The timeline cache (ui/timeline/span_cache.h): a finished rank's spilled
// lanes kept as a file and mapped back on the next open.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "core/store/run_reader.h"
#include "core/synth/synthetic_run.h"
#include "tests/core/test_support.h"
#include "ui/timeline/span_cache.h"
#include "ui/timeline/timeline_feeder.h"

namespace meshscope::ui {
namespace {

namespace fs = std::filesystem;

// The op spans of a finished rank kept between sessions (span_cache.h).
class SpanCacheTest : public ::testing::Test {
  protected:
    void SetUp() override {
        cacheDir = dir / "cache";
        ::setenv("MESHSCOPE_GUI_CACHE_DIR", cacheDir.c_str(), 1);
        ::setenv("MESHSCOPE_GUI_SPILL_DIR", (dir / "spill").c_str(), 1);
        SyntheticRunSpec spec;
        spec.ranks = 1;
        spec.opsPerRank = 150'000;  // its longest lane fills spill blocks
        spec.incidentsPerStep = 2;
        writeSyntheticRun(dir / "run", spec);
        run.emplace(RunReader::open(dir / "run"));
    }
    void TearDown() override {
        run.reset();  // before the run's folder goes
        ::unsetenv("MESHSCOPE_GUI_CACHE_DIR");
    }
    const RankReader& reader() const { return run->ranks().at(0); }
    const fs::path& rankFile() const { return reader().path(); }
    fs::path cacheFile() const { return spanCacheFile(cacheDir, rankFile()); }
    // The rank read from its file, and cached on the way when `cache`.
    RankTimeline read(bool cache) const {
        RankTimeline track;
        initRank(reader(), track);
        std::string why;
        if (cache) {
            EXPECT_TRUE(beginSpanCache(rankFile(), track, why)) << why;
        }
        EXPECT_EQ(feedRank(reader(), track, kNoLimit).error, "");
        if (cache) {
            EXPECT_TRUE(finishSpanCache(rankFile(), track, why)) << why;
        }
        return track;
    }
    void overwrite(std::streamoff at, char byte) const {
        std::fstream f(cacheFile(), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(at);
        f.put(byte);
    }

    test::TempDir dir;
    fs::path cacheDir;
    std::optional<RunReader> run;
};

// A cached rank opens as it was read from its file, without reading an op:
// every span of every lane (its full blocks mapped from the cache), the
// summaries the zoomed-out view reads, names, step starts and the op
// cursor; its incidents, collectives and steps still come from the file.
TEST_F(SpanCacheTest, AFinishedRankComesBackAsItWasRead) {
    RankTimeline plain = read(false);
    ASSERT_EQ(plain.state, RankState::Finished);
    ASSERT_GE(plain.opCount, 150'000);
    std::string why;
    RankTimeline none;
    initRank(reader(), none);
    EXPECT_FALSE(loadSpanCache(rankFile(), none, why));
    EXPECT_EQ(why, "no cache yet");
    {
        RankTimeline written = read(true);
        EXPECT_EQ(written.opCount, plain.opCount);
    }
    ASSERT_TRUE(fs::exists(cacheFile()));

    RankTimeline cached;
    initRank(reader(), cached);
    ASSERT_TRUE(loadSpanCache(rankFile(), cached, why)) << why;
    FeedResult rest = feedRank(reader(), cached, kNoLimit);
    EXPECT_EQ(rest.error, "");
    EXPECT_EQ(rest.ops, 0);  // every op came from the cache
    EXPECT_GT(rest.incidents, 0);
    EXPECT_EQ(cached.opCount, plain.opCount);
    EXPECT_EQ(cached.lastOpSeq, plain.lastOpSeq);
    EXPECT_EQ(cached.firstNs, plain.firstNs);
    EXPECT_EQ(cached.lastNs, plain.lastNs);
    EXPECT_EQ(cached.stepStarts, plain.stepStarts);
    ASSERT_EQ(cached.lanes.size(), plain.lanes.size());
    size_t mapped = 0;
    for (size_t i = 0; i < plain.lanes.size(); ++i) {
        const Lane &a = plain.lanes[i], &b = cached.lanes[i];
        EXPECT_EQ(a.thread, b.thread);
        EXPECT_EQ(a.depth, b.depth);
        EXPECT_EQ(a.maxDuration, b.maxDuration);
        EXPECT_EQ(a.endsSorted, b.endsSorted);
        ASSERT_EQ(a.spans.size(), b.spans.size());
        mapped += b.spans.spilledBlocks();
        for (size_t k = 0; k < a.spans.size(); ++k) {
            ASSERT_EQ(std::memcmp(&a.spans[k], &b.spans[k], sizeof(Span)), 0) << i << " " << k;
            ASSERT_EQ(plain.string(a.spans[k].name()), cached.string(b.spans[k].name()));
        }
        ASSERT_EQ(a.spans.buckets(), b.spans.buckets());
        for (size_t k = 0; k < a.spans.buckets(); ++k) {
            EXPECT_EQ(a.spans.bucket(k).minStart, b.spans.bucket(k).minStart);
            EXPECT_EQ(a.spans.bucket(k).maxEnd, b.spans.bucket(k).maxEnd);
        }
    }
    EXPECT_GE(mapped, 1u);  // full blocks are mapped from the cache, not read
    ASSERT_EQ(cached.incidents.size(), plain.incidents.size());
    for (size_t k = 0; k < cached.incidents.size(); ++k)
        EXPECT_EQ(cached.string(cached.incidents[k].op), plain.string(plain.incidents[k].op));
    EXPECT_EQ(cached.collectives.size(), plain.collectives.size());
    EXPECT_EQ(cached.steps.size(), plain.steps.size());
    EXPECT_EQ(spillStatus().inMemory, 0u);
}

// A damaged cache, an unfinished one or one of a rank file that changed is
// ignored (the rank is then read from its file), removed, and says why;
// the timeline it was to fill is left as it was.
TEST_F(SpanCacheTest, ADamagedOrStaleCacheIsIgnoredAndRemoved) {
    RankTimeline plain = read(false);
    std::string why;
    auto expectIgnored = [&](const std::string& reason) {
        RankTimeline track;
        initRank(reader(), track);
        EXPECT_FALSE(loadSpanCache(rankFile(), track, why));
        EXPECT_NE(why.find(reason), std::string::npos) << why;
        EXPECT_NE(why.find(cacheFile().string()), std::string::npos) << why;
        EXPECT_EQ(track.opCount, 0);
        EXPECT_TRUE(track.lanes.empty());
        EXPECT_EQ(track.strings.size(), 1u);
        EXPECT_FALSE(fs::exists(cacheFile()));
    };
    auto size = [&] { return std::streamoff(fs::file_size(cacheFile())); };

    read(true);
    overwrite(size() - 200, 'x');  // in the index
    expectIgnored("damaged");

    read(true);
    fs::resize_file(cacheFile(), fs::file_size(cacheFile()) - 1000);
    expectIgnored("not a finished timeline cache");

    read(true);
    std::ofstream(cacheFile(), std::ios::trunc) << "not a cache";
    expectIgnored("not a finished timeline cache");

    read(true);
    fs::last_write_time(rankFile(), fs::last_write_time(rankFile()) + std::chrono::seconds(1));
    expectIgnored("the rank file changed since");

    // cached again while read from the file, it serves the next open
    read(true);
    RankTimeline track;
    EXPECT_TRUE(loadSpanCache(rankFile(), track, why)) << why;
    EXPECT_EQ(track.opCount, plain.opCount);
}

// A load cancelled midway leaves no cache behind; where none can be made,
// the rank is read as without one and the reason is given; "off" turns the
// cache off.
TEST_F(SpanCacheTest, AnAbandonedOrImpossibleCacheLeavesNothingBehind) {
    std::string why;
    {
        RankTimeline track;
        initRank(reader(), track);
        ASSERT_TRUE(beginSpanCache(rankFile(), track, why)) << why;
        feedRank(reader(), track, 100'000);  // cancelled after this
        abandonSpanCache(track);
        EXPECT_EQ(track.opCount, 100'000);  // what was read stays shown
        EXPECT_TRUE(fs::is_empty(cacheDir));
    }
    EXPECT_FALSE(fs::exists(cacheFile()));

    // The run opened again while its first load still reads (then
    // cancelled): each load caches into a file of its own.
    {
        RankTimeline first, second;
        initRank(reader(), first);
        initRank(reader(), second);
        ASSERT_TRUE(beginSpanCache(rankFile(), first, why)) << why;
        feedRank(reader(), first, 100'000);
        ASSERT_TRUE(beginSpanCache(rankFile(), second, why)) << why;
        feedRank(reader(), first, 10'000);  // the first still reads a chunk
        feedRank(reader(), second, kNoLimit);
        abandonSpanCache(first);
        ASSERT_TRUE(finishSpanCache(rankFile(), second, why)) << why;
        EXPECT_EQ(first.opCount, 110'000);
        size_t i = first.lanes.size() - 1;  // its spans still read as they were
        EXPECT_EQ(
            std::memcmp(&first.lanes[i].spans.back(),
                        &second.lanes[i].spans[first.lanes[i].spans.size() - 1], sizeof(Span)),
            0);
        RankTimeline again;
        EXPECT_TRUE(loadSpanCache(rankFile(), again, why)) << why;
        EXPECT_EQ(again.opCount, second.opCount);
        EXPECT_EQ(std::distance(fs::directory_iterator(cacheDir), fs::directory_iterator()), 1);
    }
    fs::remove(cacheFile());

    std::ofstream(dir / "a-file") << "x";
    ::setenv("MESHSCOPE_GUI_CACHE_DIR", (dir / "a-file" / "cache").c_str(), 1);
    RankTimeline track;
    initRank(reader(), track);
    EXPECT_FALSE(beginSpanCache(rankFile(), track, why));
    EXPECT_NE(why.find("a-file"), std::string::npos) << why;
    EXPECT_EQ(track.spill, nullptr);
    ::setenv("MESHSCOPE_GUI_CACHE_DIR", "off", 1);
    EXPECT_EQ(spanCacheDirectory(), fs::path());
    EXPECT_FALSE(beginSpanCache(rankFile(), track, why));
    EXPECT_EQ(why, "the cache is off");
    EXPECT_FALSE(loadSpanCache(rankFile(), track, why));
    EXPECT_EQ(why, "the cache is off");
}

// The folder keeps within its size by dropping the least recently used
// caches (a load counts as a use) and the unfinished ones of processes that
// are gone; other files are left alone.
TEST(SpanCacheTrim, DropsTheLeastRecentlyUsedFirst) {
    test::TempDir dir;
    auto make = [&](const std::string& name, size_t bytes, int ageSeconds) {
        std::ofstream(dir / name) << std::string(bytes, 'x');
        fs::last_write_time(dir / name,
                            fs::file_time_type::clock::now() - std::chrono::seconds(ageSeconds));
    };
    make("old.spans", 4000, 300);
    make("middle.spans", 4000, 200);
    make("new.spans", 4000, 100);
    make("notes.txt", 50000, 400);
    std::string mine = "a.spans.tmp." + std::to_string(::getpid()) + ".1";
    make(mine, 10, 0);
    make("b.spans.tmp.999999999.1", 10, 0);  // no such process
    trimSpanCache(dir.path(), 9000);
    EXPECT_FALSE(fs::exists(dir / "old.spans"));
    EXPECT_TRUE(fs::exists(dir / "middle.spans"));
    EXPECT_TRUE(fs::exists(dir / "new.spans"));
    EXPECT_TRUE(fs::exists(dir / "notes.txt"));
    EXPECT_TRUE(fs::exists(dir / mine));
    EXPECT_FALSE(fs::exists(dir / "b.spans.tmp.999999999.1"));
    trimSpanCache(dir.path(), 0);
    EXPECT_FALSE(fs::exists(dir / "new.spans"));
    EXPECT_TRUE(fs::exists(dir / "notes.txt"));
}

}  // namespace
}  // namespace meshscope::ui
