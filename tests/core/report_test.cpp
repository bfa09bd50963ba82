// Report writers other than HTML: JSON, Markdown, CSV and SARIF, on fixture
// runs whose recorded strings try to break out of each format.

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/report/report.h"
#include "core/report/report_text.h"
#include "core/util/utf8.h"
#include "tests/core/fixture_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

using test::FixtureIncident;
using test::writeRank;

constexpr const char* kEvilOp = "aten::evil</script><img src=x onerror=alert(1)>|`x`";
constexpr const char* kEvilFile = "/src/pkg/mod\"el'.py";
constexpr const char* kEvilEvidence =
    "=HYPERLINK(\"http://x\") *bold* [link](y) \xff\xfe\nline\x1b[2J\x07";

RunAnalysis evilRun(const test::TempDir& dir) {
    FixtureIncident raised{
        kEvilOp,         OriginClass::InputData, kEvilFile,     41,       0,     Action::Observed,
        Outcome::Raised, std::nullopt,           kEvilEvidence, "lab|el", "f<n>"};
    FixtureIncident replicated{"aten::add.Tensor",
                               OriginClass::CreatedInForward,
                               "/src/pkg/b.py",
                               7,
                               0,
                               Action::Replicated,
                               Outcome::Reconciled,
                               1};
    writeRank(dir.path(), 2, 0, 30, {raised, replicated});
    replicated.fingerprint = 2;
    writeRank(dir.path(), 2, 1, 30, {raised, replicated});
    return analyze(RunReader::open(dir.path()));
}

// Every format but HTML (which has its own tests), from the analysis alone.
std::string render(std::string_view format, const RunAnalysis& a,
                   const ReportOptions& options = {}) {
    constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
    std::ostringstream out;
    if (format == "md") writeMarkdownReport(a, out, options);
    if (format == "csv") writeCsvReport(a, out);
    if (format == "json") out << reportToJson(a, options).dump(2, ' ', false, kReplace);
    if (format == "sarif") out << sarifLog(a, options).dump(2, ' ', false, kReplace);
    if (format == "html") ADD_FAILURE() << "HTML has its own tests";
    return out.str();
}

TEST(Utf8, ReplacesInvalidSequences) {
    EXPECT_EQ(validUtf8("plain"), "plain");
    EXPECT_EQ(validUtf8("caf\xc3\xa9"), "caf\xc3\xa9");
    EXPECT_EQ(validUtf8("a\xff"
                        "b"),
              "a\xEF\xBF\xBD"
              "b");
    EXPECT_EQ(validUtf8("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
    EXPECT_EQ(validUtf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
    EXPECT_EQ(validUtf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
    EXPECT_EQ(validUtf8("\xe2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // truncated at the end
}

TEST(ReportFormat, NamesAndFileExtensionsPickTheFormat) {
    for (const char* name : {"html", "md", "json", "csv", "sarif"})
        EXPECT_EQ(reportFormatFromString(name)->name, name);
    EXPECT_FALSE(reportFormatFromString("pdf"));
    EXPECT_EQ(reportFormatForFile("out/y.md")->name, "md") << "not HTML into a .md file";
    EXPECT_EQ(reportFormatForFile("Y.MARKDOWN")->name, "md");
    EXPECT_EQ(reportFormatForFile("r.htm")->name, "html");
    EXPECT_EQ(reportFormatForFile("r.sarif")->name, "sarif");
    EXPECT_FALSE(reportFormatForFile("r.pdf"));
    EXPECT_FALSE(reportFormatForFile("report"));
}

TEST(JsonReport, HoldsGroupsFindingsAndVerification) {
    test::TempDir dir;
    RunAnalysis a = evilRun(dir);
    nlohmann::json j = nlohmann::json::parse(render("json", a));
    EXPECT_EQ(j["meshscope_report"], 1);
    ASSERT_EQ(j["groups"].size(), 2u);
    // INVALID first: the replicated group differs across ranks.
    EXPECT_EQ(j["groups"][0]["op"], "aten::add.Tensor");
    EXPECT_EQ(j["groups"][0]["verification"]["invalid"], 2);
    EXPECT_EQ(j["groups"][1]["op"], kEvilOp);
    EXPECT_EQ(j["groups"][1]["site"]["file"], kEvilFile);
    EXPECT_EQ(j["groups"][1]["example"]["operands"][0]["label"], "lab|el");
    EXPECT_EQ(j["groups"][1]["evidence"][0], validUtf8(kEvilEvidence));
    EXPECT_EQ(j["promotions"]["invalid"], 1);
    EXPECT_EQ(j["promotions"]["invalid_checks"][0]["fingerprints"]["1"], "0000000000000002");
    std::set<std::string> kinds;
    for (const auto& f : j["findings"])
        kinds.insert(f["kind"].get<std::string>());
    EXPECT_EQ(kinds, (std::set<std::string>{"invalid", "unreconciled"}));
}

TEST(MarkdownReport, EscapesRecordedText) {
    test::TempDir dir;
    std::string md = render("md", evilRun(dir));
    // Outside code spans (where CommonMark shows text literally) no raw HTML.
    std::string prose = std::regex_replace(md, std::regex("(`+) [^\n]*? \\1"), "");
    EXPECT_FALSE(std::regex_search(prose, std::regex("(^|[^\\\\])<(img|/script)"))) << prose;
    EXPECT_NE(md.find("\\<img src=x onerror=alert(1)\\>"), std::string::npos);
    EXPECT_NE(md.find("lab\\|el"), std::string::npos);  // cannot split a table cell
    EXPECT_NE(md.find("\\*bold\\* \\[link\\](y)"), std::string::npos);
    EXPECT_EQ(validUtf8(md), md);
    // The op sits in a code span its backticks cannot close.
    EXPECT_NE(md.find("`` aten::evil</script>"), std::string::npos) << md;
    EXPECT_NE(md.find("```python\nbatch = DTensor.from_local(batch, mesh, [Replicate()])\n```"),
              std::string::npos);
    // One line per table row: the newline in the evidence is folded.
    EXPECT_EQ(md.find("\nline"), std::string::npos);
    // No raw control byte reaches a reader's terminal or viewer.
    EXPECT_EQ(md.find('\x1b'), std::string::npos);
    EXPECT_EQ(md.find('\x07'), std::string::npos);
    EXPECT_NE(md.find("x1b"), std::string::npos) << md;  // shown as an escape
}

TEST(CsvReport, OneQuotedRowPerIncident) {
    test::TempDir dir;
    RunAnalysis a = evilRun(dir);
    std::string csv = render("csv", a);
    std::istringstream in(csv);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line.rfind("rank,seq,step,time_ns", 0), 0u);
    // Embedded newlines are inside quoted fields: count records, not lines.
    size_t records = 0;
    bool quoted = false;
    for (size_t i = 0; i < csv.size(); ++i) {
        if (csv[i] == '"') quoted = !quoted;
        if (!quoted && csv[i] == '\n') ++records;
    }
    EXPECT_FALSE(quoted);
    EXPECT_EQ(records, 1 + a.incidents.size());
    // A cell a spreadsheet would evaluate is defused.
    EXPECT_NE(csv.find("\"'=HYPERLINK(\"\"http://x\"\")"), std::string::npos) << csv;
    EXPECT_NE(csv.find(",INVALID,"), std::string::npos);
    EXPECT_EQ(validUtf8(csv), csv);
    EXPECT_EQ(csv.find('\x1b'), std::string::npos);
    EXPECT_NE(csv.find("line\\x1b[2J\\x07"), std::string::npos) << csv;
}

TEST(SarifReport, ResultsPointAtTheUserLine) {
    test::TempDir dir;
    RunAnalysis a = evilRun(dir);
    ReportOptions options;
    options.sourceRoot = "/src";
    nlohmann::json log = nlohmann::json::parse(render("sarif", a, options));
    EXPECT_EQ(log["version"], "2.1.0");
    const auto& run = log["runs"][0];
    const auto& rules = run["tool"]["driver"]["rules"];
    EXPECT_EQ(run["originalUriBaseIds"]["SRCROOT"]["uri"], "file:///src/");
    std::map<std::string, size_t> ruleIndex;
    for (size_t i = 0; i < rules.size(); ++i)
        ruleIndex[rules[i]["id"].get<std::string>()] = i;
    int mixed = 0, invalid = 0;
    for (const auto& r : run["results"]) {
        std::string id = r["ruleId"];
        ASSERT_TRUE(ruleIndex.count(id)) << id;
        EXPECT_EQ(r["ruleIndex"].get<size_t>(), ruleIndex[id]);
        EXPECT_TRUE(r["message"]["text"].is_string());
        std::string level = r["level"];
        EXPECT_TRUE(level == "error" || level == "warning" || level == "note");
        if (id == "meshscope/mixed-tensor/D") {
            ++mixed;
            const auto& loc = r["locations"][0]["physicalLocation"];
            // percent-encoded as RFC 3986 asks of a URI's path
            EXPECT_EQ(loc["artifactLocation"]["uri"], "pkg/mod%22el'.py");
            EXPECT_EQ(loc["artifactLocation"]["uriBaseId"], "SRCROOT");
            EXPECT_EQ(loc["region"]["startLine"], 41);
            EXPECT_EQ(level, "error");  // raised: unreconciled
        }
        if (id == "meshscope/invalid-replicate") {
            ++invalid;
            EXPECT_EQ(r["locations"][0]["physicalLocation"]["region"]["startLine"], 7);
        }
    }
    EXPECT_EQ(mixed, 1);
    EXPECT_EQ(invalid, 1);
    // Outside the source root: an absolute file URI.
    options.sourceRoot = "/elsewhere";
    nlohmann::json other = nlohmann::json::parse(render("sarif", a, options));
    bool absolute = false;
    for (const auto& r : other["runs"][0]["results"])
        if (r.contains("locations"))
            absolute |= r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                            .get<std::string>()
                            .rfind("file:///src/pkg/", 0) == 0;
    EXPECT_TRUE(absolute);
}

// A group's count per rank: listed up to 8 ranks, grouped by value past
// that, and past 4 different values a range with the ranks of the most.
TEST(ReportText, CountsPerRankGroupByValueInALargeJob) {
    auto label = [](int r) { return fmt::format("rank {}:", r); };
    std::map<int, int64_t> few{{0, 3}, {1, 2}};
    EXPECT_EQ(report_text::perRankCounts(few, label), "rank 0: 3, rank 1: 2");
    std::map<int, int64_t> two;
    for (int r = 0; r < 1024; ++r)
        two[r] = r < 512 ? 3 : 2;
    EXPECT_EQ(report_text::perRankCounts(two, label), "3 on rank(s) 0-511; 2 on rank(s) 512-1023");
    std::map<int, int64_t> many;
    for (int r = 0; r < 1024; ++r)
        many[r] = 1 + r % 8;
    many[716] = 9;
    EXPECT_EQ(report_text::perRankCounts(many, label),
              "1-9 on 1024 rank(s) (0-1023); most: 9 on rank(s) 716");
}

}  // namespace
}  // namespace meshscope
