// Chrome trace export checked against the Trace Event Format: field types,
// proper nesting per track, metadata names, flows and counters.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/export/trace_json.h"
#include "core/store/run_directory.h"
#include "core/synth/synthetic_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

// Two ranks: a parent op with two children (the second ends 5 ns after its
// parent, as recorded clocks sometimes do), a collective, an incident and
// the op that reconciled it; names carry quotes, </script> and bad UTF-8.
void writeFixture(const std::filesystem::path& dir) {
    Manifest initial;
    initial.runId = "trace-run";
    initial.worldSize = 2;
    for (int rank = 0; rank < 2; ++rank) {
        auto w = createRankWriter(dir, initial, rank);
        w->submit(Record{MetaRecord{"thread.0", "MainThread"}});
        auto op = [&](int64_t start, int64_t end, uint16_t depth, const char* name,
                      IncidentSeq incident = {}) {
            OpRecord r;
            r.startNs = start;
            r.endNs = end;
            r.depth = depth;
            r.name = w->intern(name);
            r.incident = incident;
            r.step = 0;
            w->submit(std::move(r));
        };
        // Recorded at their end: children before the parent.
        op(1100, 1500, 1, "aten::mm");
        op(1600, 2005, 1, "aten::add \"x\" </script> \xff");
        op(1000, 2000, 0, "aten::linear");
        IncidentRecord inc;
        inc.timeNs = 2100;
        inc.op = w->intern("aten::sub.Tensor");
        inc.origin = OriginClass::InputData;
        inc.action = Action::ShardedFromLocal;
        inc.outcome = Outcome::Reconciled;
        inc.evidence = w->intern("batch <img src=x>");
        IncidentSeq seq = w->submit(std::move(inc));
        op(2200, 2600, 0, "aten::sub.Tensor", seq);
        CollectiveRecord c;
        c.kind = w->intern("all_reduce");
        c.bytes = 4096;
        c.startNs = 2300;
        c.endNs = 2500;
        w->submit(std::move(c));
        w->submit(Record{OptimizerStepRecord{0, w->intern("torch.optim.Adam"), 2700, 2900, 4}});
        w->close();
    }
}

// Checks one exported trace against the format; returns the events.
nlohmann::json validate(const std::string& text, const char* displayUnit = "ns") {
    nlohmann::json doc = nlohmann::json::parse(text);
    EXPECT_TRUE(doc["traceEvents"].is_array());
    EXPECT_EQ(doc["displayTimeUnit"], displayUnit);
    const auto& events = doc["traceEvents"];
    // Spans in whole nanoseconds, as Perfetto reads them: the exporter writes
    // exact decimal microseconds, and adding two parsed doubles can round a
    // child's end past its parent's (3562.481 + 0.4 > 3561.881 + 1.0).
    auto ns = [](const nlohmann::json& us) { return std::llround(us.get<double>() * 1000.0); };
    std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> tracks;
    std::set<std::pair<int, int>> used, named;
    std::set<int> processes;
    std::map<int64_t, int> flowStarts, flowEnds;
    for (const auto& e : events) {
        EXPECT_TRUE(e["ph"].is_string()) << e;
        EXPECT_TRUE(e["pid"].is_number_integer()) << e;
        EXPECT_TRUE(e["tid"].is_number_integer()) << e;
        EXPECT_TRUE(e["name"].is_string()) << e;
        std::string ph = e["ph"];
        std::pair<int, int> track{e["pid"].get<int>(), e["tid"].get<int>()};
        if (ph == "M") {
            if (e["name"] == "thread_name") named.insert(track);
            if (e["name"] == "process_name") processes.insert(track.first);
            EXPECT_TRUE(e["args"].is_object());
            continue;
        }
        EXPECT_TRUE(e["ts"].is_number()) << e;
        used.insert(track);
        if (ph == "X") {
            EXPECT_TRUE(e["dur"].is_number()) << e;
            EXPECT_GE(e["dur"].get<double>(), 0);
            int64_t ts = ns(e["ts"]), dur = ns(e["dur"]);
            tracks[track].emplace_back(ts, ts + dur);
        } else if (ph == "i") {
            EXPECT_EQ(e["s"], "t");
        } else if (ph == "C") {
            for (const auto& [k, v] : e["args"].items())
                EXPECT_TRUE(v.is_number()) << e;
        } else if (ph == "s") {
            ++flowStarts[e["id"].get<int64_t>()];
        } else if (ph == "f") {
            EXPECT_EQ(e["bp"], "e");
            ++flowEnds[e["id"].get<int64_t>()];
        } else {
            ADD_FAILURE() << "unexpected phase " << ph;
        }
    }
    EXPECT_EQ(flowStarts, flowEnds);
    for (const auto& t : used) {
        EXPECT_TRUE(named.count(t)) << "track " << t.first << "/" << t.second << " has no name";
        EXPECT_TRUE(processes.count(t.first));
    }
    // Proper nesting: sorted by start (longest first on ties), every span
    // lies inside the enclosing open span or after it.
    for (auto& [track, spans] : tracks) {
        std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
            return a.first != b.first ? a.first < b.first : a.second > b.second;
        });
        std::vector<int64_t> open;
        for (const auto& [b, e] : spans) {
            while (!open.empty() && open.back() <= b)
                open.pop_back();
            if (!open.empty()) {
                EXPECT_LE(e, open.back()) << "span [" << b << "," << e << ") crosses its parent";
            }
            open.push_back(e);
        }
    }
    return events;
}

TEST(ChromeTrace, FixtureFollowsTheFormat) {
    test::TempDir dir;
    writeFixture(dir.path());
    RunReader run = RunReader::open(dir.path());
    std::ostringstream out;
    TraceExportStats stats = writeChromeTrace(run, out);
    EXPECT_EQ(stats.ops, 8);
    EXPECT_EQ(stats.flows, 2);
    EXPECT_EQ(stats.clamped, 2);  // the child that outlived its parent, on each rank
    nlohmann::json events = validate(out.str());
    int incidents = 0, names = 0;
    bool clampedChild = false;
    // Per rank, the end of aten::linear and of its clamped child, in ns.
    std::map<int, int64_t> parentEnd, childEnd;
    auto endNs = [](const nlohmann::json& e) {
        return std::llround(e["ts"].get<double>() * 1000.0) +
               std::llround(e["dur"].get<double>() * 1000.0);
    };
    for (const auto& e : events) {
        if (e["ph"] == "i") {
            ++incidents;
            EXPECT_EQ(e["name"], "mixed: aten::sub.Tensor");
            EXPECT_EQ(e["args"]["evidence"], "batch <img src=x>");
        }
        if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "MainThread")
            ++names;
        if (e["ph"] == "X" && e["name"] == "aten::add \"x\" </script> \xEF\xBF\xBD") {
            clampedChild = true;
            EXPECT_EQ(e["dur"].get<double>(), 0.4);  // 1600..2000 ns
            childEnd[e["pid"].get<int>()] = endNs(e);
        }
        if (e["ph"] == "X" && e["name"] == "aten::linear")
            parentEnd[e["pid"].get<int>()] = endNs(e);
    }
    EXPECT_EQ(incidents, 2);
    EXPECT_EQ(names, 2);
    EXPECT_TRUE(clampedChild);
    // Rank 1's clock origin is later than rank 0's by however long rank 0's
    // writer took to open; the clamped child still ends exactly where its
    // parent does on both ranks.
    EXPECT_EQ(childEnd.size(), 2u);
    EXPECT_EQ(childEnd, parentEnd);
}

TEST(ChromeTrace, SyntheticRunFollowsTheFormat) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 2;
    spec.steps = 3;
    writeSyntheticRun(dir.path(), spec);
    RunReader run = RunReader::open(dir.path());
    std::ostringstream out;
    int64_t lastDone = 0;
    TraceExportStats stats = writeChromeTrace(
        run, out, [&](int64_t done, int64_t total) { lastDone = done, (void)total; });
    EXPECT_GT(stats.ops, 0);
    EXPECT_EQ(lastDone, stats.ops);
    validate(out.str());
}

// Collectives that overlap on one thread (async ones, one left pending
// while others complete) go on the first of its collective tracks they do
// not overlap, placed in start order whatever order they were recorded in.
TEST(ChromeTrace, OverlappingCollectivesGoOnTracksOfTheirOwn) {
    test::TempDir dir;
    Manifest initial;
    initial.runId = "overlap-run";
    initial.worldSize = 1;
    auto w = createRankWriter(dir.path(), initial, 0);
    auto collective = [&](const char* kind, int64_t start, int64_t end) {
        CollectiveRecord c;
        c.kind = w->intern(kind);
        c.startNs = start;
        c.endNs = end;
        c.step = 0;
        w->submit(std::move(c));
    };
    // Recorded when their lives end: the long one after those inside it.
    collective("broadcast", 200, 300);
    collective("all_gather", 400, 500);
    collective("all_reduce", 100, 1000);
    collective("reduce_scatter", 1100, 1200);
    collective("barrier", 250, 450);  // overlaps the long one and both inside it
    w->close();
    RunReader run = RunReader::open(dir.path());
    std::ostringstream out;
    TraceExportStats stats = writeChromeTrace(run, out);
    EXPECT_EQ(stats.collectives, 5);
    nlohmann::json events = validate(out.str());
    std::map<std::string, int> tid;
    std::map<int, std::string> trackName;
    for (const auto& e : events) {
        if (e["ph"] == "X" && e["cat"] == "collective") tid[e["name"]] = e["tid"].get<int>();
        if (e["ph"] == "M" && e["name"] == "thread_name")
            trackName[e["tid"].get<int>()] = e["args"]["name"];
    }
    EXPECT_EQ(tid["all_reduce"], 1000);
    EXPECT_EQ(tid["reduce_scatter"], 1000);
    EXPECT_EQ(tid["broadcast"], 1100);
    EXPECT_EQ(tid["all_gather"], 1100);
    EXPECT_EQ(tid["barrier"], 1200);
    EXPECT_EQ(trackName[1000], "collectives (thread 0)");
    EXPECT_EQ(trackName[1100], "collectives (thread 0, overlapping 1)");
    EXPECT_EQ(trackName[1200], "collectives (thread 0, overlapping 2)");
}

// One rank's file in torch.profiler's shape, as HTA reads it: the rank on
// the header line in the pattern HTA searches ("rank":\s+N), times after a
// baseTimeNanoseconds shared by the ranks, ops as cpu_op with an External id,
// the step's records inside ProfilerStep#N, the optimizer.step() inside it.
TEST(ProfilerTrace, OneRankInTorchProfilersShape) {
    test::TempDir dir;
    writeFixture(dir.path());
    RunReader run = RunReader::open(dir.path());
    ASSERT_EQ(run.ranks().size(), 2u);
    int64_t base =
        std::min(run.ranks()[0].info().clockOriginWallNs, run.ranks()[1].info().clockOriginWallNs);
    for (const RankReader& rank : run.ranks()) {
        std::ostringstream out;
        TraceExportStats stats = writeProfilerTrace(run, rank, out);
        EXPECT_EQ(stats.ops, 4);
        EXPECT_EQ(stats.collectives, 1);
        std::string text = out.str();
        std::string header = text.substr(0, text.find('\n'));
        std::smatch rankMatch;
        ASSERT_TRUE(std::regex_search(header, rankMatch, std::regex(R"("rank":\s+(\d+))")));
        EXPECT_EQ(std::stoi(rankMatch[1]), rank.info().rank);
        nlohmann::json doc = nlohmann::json::parse(text);
        EXPECT_EQ(doc["distributedInfo"]["world_size"], 2);
        EXPECT_EQ(doc["baseTimeNanoseconds"], base);
        nlohmann::json events = validate(text, "ms");
        const int64_t offset = rank.info().clockOriginWallNs - base;
        auto ns = [](const nlohmann::json& us) { return std::llround(us.get<double>() * 1000.0); };
        std::map<std::string, nlohmann::json> byName;
        for (const auto& e : events) {
            if (e["ph"] != "X") continue;
            EXPECT_EQ(e["pid"], rank.info().pid) << e;
            byName[e["name"]] = e;
            if (e["cat"] == "cpu_op" && e["name"] != "all_reduce") {
                EXPECT_TRUE(e["args"]["External id"].is_number_integer()) << e;
            }
        }
        ASSERT_TRUE(byName.contains("aten::linear"));
        EXPECT_EQ(byName["aten::linear"]["cat"], "cpu_op");
        EXPECT_EQ(ns(byName["aten::linear"]["ts"]), offset + 1000);
        const nlohmann::json& step = byName["ProfilerStep#0"];
        EXPECT_EQ(step["cat"], "user_annotation");
        EXPECT_EQ(ns(step["ts"]), offset + 1000);                    // aten::linear's start
        EXPECT_EQ(ns(step["ts"]) + ns(step["dur"]), offset + 2900);  // optimizer.step()'s end
        const nlohmann::json& optimizer = byName["Optimizer.step#Adam.step"];
        EXPECT_EQ(optimizer["cat"], "user_annotation");
        EXPECT_EQ(ns(optimizer["ts"]), offset + 2700);
        const nlohmann::json& collective = byName["all_reduce"];
        EXPECT_EQ(collective["args"]["Collective name"], "all_reduce");
        EXPECT_EQ(collective["args"]["bytes"], 4096);
    }
}

TEST(ProfilerTrace, FileNamesAsTensorboardTraceHandlerWritesThem) {
    RankInfo info;
    info.hostname = "node-3.cluster";
    info.pid = 4242;
    info.clockOriginWallNs = 1795710488476449499;
    EXPECT_EQ(profilerTraceFileName(info, false),
              "node-3.cluster_4242.1795710488476449499.pt.trace.json");
    EXPECT_EQ(profilerTraceFileName(info, true),
              "node-3.cluster_4242.1795710488476449499.pt.trace.json.gz");
    info.rank = 3;
    EXPECT_EQ(profilerTraceFileName(info, false, true),
              "node-3.cluster_4242_rank3.1795710488476449499.pt.trace.json");
    info.hostname = "../etc/pass wd";  // recorded text is untrusted
    EXPECT_EQ(profilerTraceFileName(info, false),
              ".._etc_pass_wd_4242.1795710488476449499.pt.trace.json");
}

}  // namespace
}  // namespace meshscope
