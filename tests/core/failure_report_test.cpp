// Every report format on a run that ends the way a broken job ends
// (SyntheticRunSpec::failures): rank 0 meets an op with no sharding
// strategy and a DTensor error, both ranks hang in mismatched collectives
// (with the threads' stacks) and launch.json says they were killed. Each
// format must show the kind, the fix and, where it has room, the stacks.

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/analysis/fix_suggestion.h"
#include "core/export/trace_json.h"
#include "core/report/html_report.h"
#include "core/report/report.h"
#include "core/report/report_text.h"
#include "core/synth/synthetic_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
// "#212121", as the reports write a colour.
std::string hexColour(uint32_t rgb) {
    char text[8];
    std::snprintf(text, sizeof text, "#%06x", unsigned(rgb));
    return text;
}

// A line of the hang's thread dump (synthetic_run.cpp).
constexpr std::string_view kStackLine = "Thread 0x7f01 (pin_memory):";

class FailureReports : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        s_dir = new test::TempDir;
        SyntheticRunSpec spec;
        spec.steps = 3;
        spec.failures = true;
        writeSyntheticRun(s_dir->path() / "run", spec);
        s_run = new RunReader(RunReader::open(s_dir->path() / "run"));
        s_analysis = new RunAnalysis(analyze(*s_run));
    }
    static void TearDownTestSuite() {
        delete s_analysis;
        delete s_run;
        delete s_dir;
    }

    static std::string render(std::string_view format) {
        std::ostringstream out;
        writeReport(*reportFormatFromString(format), *s_run, *s_analysis, out);
        return out.str();
    }
    static const IncidentGroup& group(IncidentKind kind) {
        for (const IncidentGroup& g : s_analysis->groups)
            if (g.kind == kind) return g;
        throw std::runtime_error("no group of that kind");
    }
    static bool contains(const std::string& text, std::string_view part) {
        return text.find(part) != std::string::npos;
    }

    static test::TempDir* s_dir;
    static RunReader* s_run;
    static RunAnalysis* s_analysis;
};

test::TempDir* FailureReports::s_dir = nullptr;
RunReader* FailureReports::s_run = nullptr;
RunAnalysis* FailureReports::s_analysis = nullptr;

TEST_F(FailureReports, TheRunHasEveryFailureKind) {
    EXPECT_EQ(group(IncidentKind::NoShardingStrategy).perRank.count(0), 1u);
    EXPECT_EQ(group(IncidentKind::DTensorError).perRank.count(0), 1u);
    EXPECT_FALSE(group(IncidentKind::CollectiveHang).example.detail.empty());
    ASSERT_EQ(s_analysis->stops.size(), 2u);
    for (const RankStop& s : s_analysis->stops)
        EXPECT_EQ(s.stoppedIn, IncidentKind::CollectiveHang);
}

TEST_F(FailureReports, JsonHasKindsStopsAndTheStacks) {
    nlohmann::json j = nlohmann::json::parse(render("json"));
    std::map<std::string, const nlohmann::json*> byKind;
    for (const nlohmann::json& g : j["groups"]) {
        ASSERT_TRUE(g.contains("kind"));
        EXPECT_EQ(g["kind"], g["example"]["kind"]);
        EXPECT_EQ(g["kind"], g["example"]["explanation"]["kind"]);
        byKind[g["kind"].get<std::string>()] = &g;
    }
    for (const char* key :
         {"mixed-tensor", "no-sharding-strategy", "dtensor-error", "collective-hang"})
        ASSERT_TRUE(byKind.count(key)) << key;
    const nlohmann::json& none = *byKind["no-sharding-strategy"];
    EXPECT_EQ(none["fix"]["summary"], group(IncidentKind::NoShardingStrategy).fix.summary);
    EXPECT_FALSE(none["fix"]["summary"].get<std::string>().empty());
    EXPECT_EQ(none["example"]["explanation"]["placements"], "[Shard(0)], [Shard(0)]");
    EXPECT_NE(none["example"]["error"].get<std::string>().find("does not have a sharding strategy"),
              std::string::npos);
    const nlohmann::json& hang = *byKind["collective-hang"];
    EXPECT_TRUE(contains(hang["example"]["detail"].get<std::string>(), kStackLine));
    EXPECT_EQ(hang["example"]["explanation"]["kind_title"],
              incidentKindInfo(IncidentKind::CollectiveHang).title);

    ASSERT_EQ(j["stops"].size(), 2u);
    for (int rank = 0; rank < 2; ++rank) {
        const nlohmann::json& s = j["stops"][size_t(rank)];
        EXPECT_EQ(s["rank"], rank);
        EXPECT_EQ(s["stopped_in"], "collective-hang");
        EXPECT_TRUE(s["closed"].is_boolean());
        EXPECT_TRUE(contains(s["ended"].get<std::string>(), "killed by SIGKILL"));
        EXPECT_GT(s["collectives"].get<int64_t>(), 0);
        EXPECT_FALSE(s["last_collective"].get<std::string>().empty());
        EXPECT_EQ(s["pending_site"]["file"], "model.py");
        EXPECT_EQ(s["state"], s_analysis->stops[size_t(rank)].state());
        EXPECT_TRUE(
            contains(s["pending"].get<std::string>(), rank == 0 ? "all_reduce" : "broadcast"));
    }
}

TEST_F(FailureReports, HtmlShowsKindErrorFixStopsAndFoldedStacks) {
    std::string html = render("html");
    for (const IncidentKind kind : {IncidentKind::NoShardingStrategy, IncidentKind::DTensorError,
                                    IncidentKind::CollectiveHang}) {
        const IncidentKindInfo& k = incidentKindInfo(kind);
        EXPECT_TRUE(contains(html, "<span class='tag kind-" + std::string(k.key) + "'")) << k.key;
        EXPECT_TRUE(contains(html, htmlEscape(group(kind).fix.summary))) << k.key;
    }
    EXPECT_TRUE(contains(html, "Attempted to flatten sharded dimension 0"));
    EXPECT_TRUE(contains(html, "<code>[Shard(0)], [Shard(0)]</code>"));
    // The stacks: folded in a <details> block, escaped ("File &quot;train.py&quot;").
    size_t stacks = html.find("<details class=stacks>");
    ASSERT_NE(stacks, std::string::npos);
    size_t end = html.find("</details>", stacks);
    std::string block = html.substr(stacks, end - stacks);
    EXPECT_TRUE(contains(block, kStackLine)) << block;
    EXPECT_TRUE(contains(block, "File &quot;train.py&quot;, line 100")) << block;
    EXPECT_FALSE(contains(block, "File \"train.py\"")) << block;
    // Where each rank stopped: both ranks, with their state lines.
    size_t section = html.find("<h2>Where each rank stopped</h2>");
    ASSERT_NE(section, std::string::npos);
    for (const RankStop& s : s_analysis->stops)
        EXPECT_TRUE(contains(html.substr(section), htmlEscape(s.state()))) << s.state();
    // Failure markers in their kind's colour on the timeline.
    EXPECT_TRUE(contains(
        html, "fill='" + hexColour(incidentKindInfo(IncidentKind::CollectiveHang).rgb) + "'"));
}

TEST_F(FailureReports, MarkdownShowsKindErrorFixStopsAndFencedStacks) {
    std::string md = render("md");
    EXPECT_TRUE(contains(md, "## Where each rank stopped\n\n| rank | state |"));
    EXPECT_TRUE(contains(md, "| 0 | waited in all\\_reduce"));
    EXPECT_TRUE(contains(md, "| 1 | waited in broadcast"));
    // Each failure group: its kind in the heading, its fix and its code.
    for (const IncidentKind kind : {IncidentKind::NoShardingStrategy, IncidentKind::DTensorError,
                                    IncidentKind::CollectiveHang}) {
        const IncidentKindInfo& k = incidentKindInfo(kind);
        size_t heading = md.find(": " + std::string(k.title) + "\n");
        ASSERT_NE(heading, std::string::npos) << k.key;
        std::string section = md.substr(heading, md.find("\n### ", heading) - heading);
        EXPECT_TRUE(contains(section, "(" + std::string(k.key) + ")")) << section;
        EXPECT_TRUE(contains(section, "\n**Fix:** ")) << section;
        EXPECT_FALSE(contains(section, "..\n")) << section;
        const FixSuggestion& fix = group(kind).fix;
        if (fix.code.empty()) continue;
        EXPECT_TRUE(contains(section, "```python\n" + fix.code)) << section;
    }
    // The error and the stacks in fenced blocks, verbatim.
    EXPECT_TRUE(contains(md, "```text\nNotImplementedError: Operator "));
    size_t fence = md.find("Python stacks of all threads (rank 0):\n\n```text\n");
    ASSERT_NE(fence, std::string::npos) << md;
    EXPECT_TRUE(contains(md.substr(fence), "  File \"train.py\", line 100, in train_step\n"));
    EXPECT_TRUE(contains(md.substr(fence), kStackLine));
}

TEST_F(FailureReports, CsvHasAKindColumn) {
    std::istringstream in(render("csv"));
    std::string header, line;
    std::getline(in, header);
    EXPECT_EQ(header.rfind("rank,seq,step,time_ns,thread,group,kind,op,origin,", 0), 0u) << header;
    std::map<std::string, int> kinds;
    while (std::getline(in, line)) {
        std::vector<std::string> cells;
        std::stringstream row(line);
        for (std::string cell; std::getline(row, cell, ',');)
            cells.push_back(cell);
        ASSERT_GT(cells.size(), 8u) << line;
        ++kinds[cells[6]];
        if (cells[6] != "mixed-tensor") {
            EXPECT_EQ(cells[8], "") << "no origin: " << line;
        }
    }
    EXPECT_EQ(kinds["no-sharding-strategy"], 1);
    EXPECT_EQ(kinds["dtensor-error"], 1);
    EXPECT_EQ(kinds["collective-hang"], 2);
    EXPECT_GT(kinds["mixed-tensor"], 0);
}

TEST_F(FailureReports, SarifUsesEachKindsRuleAtLevelError) {
    nlohmann::json log = nlohmann::json::parse(render("sarif"));
    const nlohmann::json& run = log["runs"][0];
    std::map<std::string, size_t> ruleIndex;
    const nlohmann::json& rules = run["tool"]["driver"]["rules"];
    for (size_t i = 0; i < rules.size(); ++i)
        ruleIndex[rules[i]["id"].get<std::string>()] = i;
    std::map<std::string, int> results;
    for (const nlohmann::json& r : run["results"]) {
        std::string id = r["ruleId"];
        ASSERT_TRUE(ruleIndex.count(id)) << id;
        EXPECT_EQ(r["ruleIndex"].get<size_t>(), ruleIndex[id]);
        ++results[id];
        if (id.rfind("meshscope/mixed-tensor", 0) == 0) continue;
        if (!r.contains("properties") || !r["properties"].contains("kind")) continue;
        EXPECT_EQ(r["level"], "error") << id;
        auto kind = incidentKindFromString(r["properties"]["kind"].get<std::string>());
        ASSERT_TRUE(kind);
        EXPECT_EQ(id, incidentKindInfo(*kind).sarifRule);
        EXPECT_EQ(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "model.py");
        EXPECT_TRUE(contains(r["message"]["text"].get<std::string>(), "Fix: ")) << r.dump();
    }
    // One result per group: no strategy and DTensor error once, the hang on
    // each rank's call site (no second result from its finding).
    EXPECT_EQ(results["meshscope/no-sharding-strategy"], 1);
    EXPECT_EQ(results["meshscope/dtensor-error"], 1);
    EXPECT_EQ(results["meshscope/collective-hang"], 2);
    EXPECT_EQ(rules[ruleIndex["meshscope/collective-hang"]]["defaultConfiguration"]["level"],
              "error");
}

TEST_F(FailureReports, TraceLabelsIncidentsByKind) {
    std::ostringstream out;
    writeChromeTrace(*s_run, out);
    nlohmann::json trace = nlohmann::json::parse(out.str());
    std::map<std::string, int> names;
    for (const nlohmann::json& e : trace["traceEvents"])
        if (e.value("cat", "") == "incident") {
            std::string name = e["name"];
            names[name.substr(0, name.find(':'))]++;
            EXPECT_EQ(e["args"].contains("error"), e["args"]["kind"] != "mixed-tensor");
        }
    EXPECT_EQ(names["hang"], 2);
    EXPECT_EQ(names["no strategy"], 1);
    EXPECT_EQ(names["DTensor error"], 1);
    EXPECT_GT(names["mixed"], 0);
}

TEST_F(FailureReports, AHungCollectiveIsTheLongBarItWas) {
    // each rank waits in its collective until its recording ends: 600 s
    std::ostringstream out;
    writeChromeTrace(*s_run, out);
    nlohmann::json trace = nlohmann::json::parse(out.str());
    int pending = 0;
    for (const nlohmann::json& e : trace["traceEvents"])
        if (e.value("args", nlohmann::json::object()).value("state", "") == "pending") {
            ++pending;
            EXPECT_GT(e["dur"].get<double>(), 599e6) << e.dump();  // microseconds
            EXPECT_TRUE(e["args"].contains("error")) << e.dump();
        }
    EXPECT_EQ(pending, 2);
    std::string html = render("html");
    EXPECT_TRUE(contains(html,
                         "fill='#212121'><title>all_reduce on default_pg (2 ranks), 16 "
                         "bytes, pending after 600.0"))
        << "the hang as a bar in the report's timeline";
}

// A clean run's reports have no stops section: the golden reports stay as
// they were.
TEST(CleanRunReports, ShowNoStopsSection) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.steps = 2;
    writeSyntheticRun(dir.path() / "run", spec);
    RunReader run = RunReader::open(dir.path() / "run");
    RunAnalysis a = analyze(run);
    std::ostringstream html, md;
    writeReport(*reportFormatFromString("html"), run, a, html);
    writeMarkdownReport(a, md);
    EXPECT_EQ(html.str().find("Where each rank stopped"), std::string::npos);
    EXPECT_EQ(md.str().find("Where each rank stopped"), std::string::npos);
    nlohmann::json j = reportToJson(a);
    ASSERT_EQ(j["stops"].size(), 2u);
    EXPECT_TRUE(j["stops"][0]["stopped_in"].is_null());
    EXPECT_TRUE(j["stops"][0]["pending_site"].is_null());
}

// A large job's Markdown, HTML and SARIF stay readable: 16 rows of the
// ranks table and one for the others, a group's count per rank by value
// ("3 on rank(s) 0-19"), and where the ranks stopped grouped by state.
TEST(LargeJobReports, GroupRanksInsteadOfListingEachOne) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 20;
    spec.steps = 3;
    spec.failures = true;
    writeSyntheticRun(dir.path() / "run", spec);
    RunReader run = RunReader::open(dir.path() / "run");
    RunAnalysis a = analyze(run);
    std::ostringstream md, html;
    writeMarkdownReport(a, md);
    writeReport(*reportFormatFromString("html"), run, a, html);
    std::string sarif = sarifLog(a).dump(0, ' ', false, kReplace);
    const std::string m = md.str();

    // the ranks table: every rank needs a look (its hang), so ranks 0-15, then one summing row
    size_t section = m.find("## Ranks");
    size_t end = m.find("\n## ", section + 1);
    std::string ranks = m.substr(section, end - section);
    int rows = 0;
    for (int r = 0; r < 20; ++r)
        rows += ranks.find(fmt::format("\n| {} | ", r)) != std::string::npos;
    EXPECT_EQ(rows, 16) << ranks;
    EXPECT_NE(ranks.find("\n| 4 more: 16-19 | "), std::string::npos) << ranks;
    EXPECT_NE(ranks.find("meshscope summary --all"), std::string::npos);

    // a group of mixed tensors seen on every rank the same number of times
    const IncidentGroup* mixed = nullptr;
    for (const IncidentGroup& g : a.groups)
        if (g.kind == IncidentKind::MixedTensor && g.perRank.size() == 20) mixed = &g;
    ASSERT_NE(mixed, nullptr);
    std::string perRank = report_text::perRankCounts(mixed->perRank, [](int r) { return r; });
    EXPECT_TRUE(perRank.ends_with(" on rank(s) 0-19") || perRank.find("; ") != std::string::npos)
        << perRank;
    EXPECT_NE(m.find("per rank: " + perRank + ";"), std::string::npos) << perRank;
    EXPECT_NE(html.str().find(perRank), std::string::npos);
    EXPECT_NE(sarif.find(perRank), std::string::npos);
    // (the HTML draws rank 19's lanes: 20 ranks are under its 64)
    for (const std::string& text : {m, sarif})
        EXPECT_EQ(text.find("rank 19"), std::string::npos) << "a rank listed on its own";

    // where each rank stopped: the hang's ranks in one row
    size_t stops = m.find("## Where each rank stopped");
    ASSERT_NE(stops, std::string::npos);
    std::string stopRows = m.substr(stops, m.find("\n## ", stops + 1) - stops);
    EXPECT_LT(std::count(stopRows.begin(), stopRows.end(), '\n'), 10) << stopRows;
    EXPECT_NE(stopRows.find("-19 | "), std::string::npos) << stopRows;
}

}  // namespace
}  // namespace meshscope
