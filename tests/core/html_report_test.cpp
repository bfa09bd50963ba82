// The HTML report on a fixture whose recorded strings try every way out of
// their context: element text, attributes, SVG text and the embedded JSON.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/analysis/mesh_picture.h"
#include "core/model/placement.h"
#include "core/report/html_report.h"
#include "core/synth/synthetic_run.h"
#include "core/util/utf8.h"
#include "tests/core/fixture_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

using test::FixtureIncident;
using test::writeRank;

constexpr const char* kEvilOp = "aten::x</script><img src=x onerror=alert(1)>";
constexpr const char* kEvilFile = "/src/\"quoted' file</title>.py";
constexpr const char* kEvilEvidence = "evidence <img src=x onerror=alert(2)> &amp; \xff\xfe bytes";

std::string evilReport(const test::TempDir& dir) {
    FixtureIncident raised{kEvilOp,
                           OriginClass::InputData,
                           kEvilFile,
                           41,
                           0,
                           Action::Observed,
                           Outcome::Raised,
                           std::nullopt,
                           kEvilEvidence,
                           "<svg onload=alert(3)>",
                           "f\"n'<b>"};
    FixtureIncident replicated{"aten::add.Tensor", OriginClass::CreatedInForward, kEvilFile, 7, 0,
                               Action::Replicated, Outcome::Reconciled,           1};
    writeRank(dir.path(), 2, 0, 30, {raised, replicated});
    replicated.fingerprint = 2;
    writeRank(dir.path(), 2, 1, 30, {raised, replicated});
    RunReader run = RunReader::open(dir.path());
    std::ostringstream out;
    writeHtmlReport(run, analyze(run), out);
    return out.str();
}

TEST(HtmlEscape, EscapesEverySpecialCharacter) {
    EXPECT_EQ(htmlEscape("<a href=\"x\">'&'</a>"),
              "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    EXPECT_EQ(htmlEscape("\xff"), "\xEF\xBF\xBD");
    EXPECT_EQ(jsonForScript(R"({"a":"</script>&"})"), R"({"a":"\u003c/script\u003e\u0026"})");
}

TEST(HtmlReport, RecordedStringsCannotEscapeTheirContext) {
    test::TempDir dir;
    std::string html = evilReport(dir);
    EXPECT_EQ(validUtf8(html), html);
    // The CSP comes first in head, before anything the data could influence.
    size_t head = html.find("<head>");
    EXPECT_EQ(html.find("<meta http-equiv='Content-Security-Policy' content=\"default-src 'none';"),
              head + 7);
    EXPECT_EQ(html.find("<img"), std::string::npos);
    EXPECT_EQ(html.find("<svg onload"), std::string::npos);
    EXPECT_EQ(html.find("n'<b>"), std::string::npos);
    EXPECT_NE(html.find("f&quot;n&#39;&lt;b&gt;"), std::string::npos);
    EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
    EXPECT_NE(html.find("&quot;quoted&#39; file&lt;/title&gt;.py:41"), std::string::npos);
    EXPECT_NE(html.find("&amp;amp;"), std::string::npos);
    // </script> only closes our one data block.
    size_t closes = 0;
    for (size_t at = html.find("</script>"); at != std::string::npos;
         at = html.find("</script>", at + 1))
        ++closes;
    EXPECT_EQ(closes, 1u);
    // No network: nothing loads from anywhere (the SVG namespace is not a request).
    EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*['"]?\s*(https?:|//))")));
    EXPECT_EQ(html.find("<link"), std::string::npos);
    EXPECT_EQ(html.find("<script src"), std::string::npos);
    // The JSON block parses and carries the strings intact (invalid bytes replaced).
    std::string open = "<script type='application/json' id='meshscope-data'>";
    size_t from = html.find(open) + open.size();
    nlohmann::json data =
        nlohmann::json::parse(html.substr(from, html.find("</script>", from) - from));
    bool found = false;
    for (const auto& g : data["groups"])
        found |= g["op"] == kEvilOp && g["file"] == kEvilFile;
    EXPECT_TRUE(found);
}

TEST(HtmlReport, ShowsGroupsTimelineAndMesh) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.ranks = 4;
    spec.steps = 6;
    writeSyntheticRun(dir.path(), spec);
    RunReader run = RunReader::open(dir.path());
    RunAnalysis a = analyze(run);
    std::ostringstream out;
    writeHtmlReport(run, a, out);
    std::string html = out.str();
    for (const IncidentGroup& g : a.groups)
        EXPECT_NE(html.find(htmlEscape(formatLocation(g.site))), std::string::npos);
    EXPECT_NE(html.find("aria-label='per-rank timeline'"), std::string::npos);
    for (int r = 0; r < 4; ++r)
        EXPECT_NE(html.find(">rank " + std::to_string(r) + "</text>"), std::string::npos);
    size_t meshes = 0;
    for (size_t at = html.find("operands on the device mesh"); at != std::string::npos;
         at = html.find("operands on the device mesh", at + 1))
        ++meshes;
    EXPECT_EQ(meshes, a.groups.size());
    EXPECT_NE(html.find(htmlEscape(a.groups[0].fix.code)), std::string::npos);
}

TEST(HtmlReport, LabelsWrapAtSpacesAndEndInAnEllipsis) {
    using V = std::vector<std::string>;
    EXPECT_EQ(wrapLabel("created by DataLoader batch #12 [0]", 25, 2),
              (V{"created by DataLoader", "batch #12 [0]"}));
    EXPECT_EQ(wrapLabel("optimizer KerasStyleAdam state 'm' of layer dense_3", 25, 2),
              (V{"optimizer KerasStyleAdam", "state 'm' of layer\u2026"}));
    EXPECT_EQ(wrapLabel("short", 25, 2), (V{"short"}));
    EXPECT_EQ(wrapLabel("", 25, 2), V{});
    // One word longer than a line is cut, never inside a UTF-8 sequence.
    V cut = wrapLabel(std::string(30, 'x') + "\u00e9\u00e9\u00e9", 31, 1);
    ASSERT_EQ(cut.size(), 1u);
    EXPECT_EQ(cut[0], std::string(30, 'x') + "\u2026");
    for (const std::string& line : wrapLabel("\u00e9t\u00e9 \u00e9t\u00e9 \u00e9t\u00e9", 4, 2))
        EXPECT_EQ(validUtf8(line), line);
}

TEST(HtmlReport, LocalPieceOfEachPlacement) {
    EXPECT_EQ(describeLocalPiece("[8, 16]", "[Shard(0)]", {2}, {1}), "rows 4-7 of [8, 16]");
    EXPECT_EQ(describeLocalPiece("[8, 16]", "[Shard(1)]", {4}, {0}), "cols 0-3 of [8, 16]");
    EXPECT_EQ(describeLocalPiece("[16]", "[Replicate()]", {2}, {1}), "all of [16]");
    EXPECT_EQ(describeLocalPiece("[4, 4]", "[Partial(sum)]", {2}, {0}),
              "partial sum, all of [4, 4]");
    // 2-D mesh: rows by the first mesh dim, columns by the second.
    EXPECT_EQ(describeLocalPiece("[8, 8]", "[Shard(0), Shard(1)]", {2, 2}, {1, 0}),
              "rows 4-7, cols 0-3 of [8, 8]");
    // torch.chunk: 5 rows over 2 ranks are 3 + 2.
    EXPECT_EQ(describeLocalPiece("[5]", "[Shard(0)]", {2}, {1}), "rows 3-4 of [5]");
    EXPECT_EQ(describeLocalPiece("[4]", "weird", {2}, {0}), "weird");
}

// One layout for the report's mesh drawing and the GUI's inspector
// (core/analysis/mesh_picture.h): columns along the last mesh dim, rows
// along the others, the selection's rank marked, a cap on cells drawn.
TEST(MeshGrid, ColumnsAlongTheLastDimRowsAlongTheOthers) {
    IncidentDetail d;
    d.rank = 5;
    d.mesh = MeshRecord{MeshId{1}, "cuda", {2, 4}, {"dp", "tp"}, {0, 1, 2, 3, 4, 5, 6, 7}};
    OperandDetail w;
    w.index = 0;
    w.shape = "[8, 16]";
    w.placements = "[Replicate(), Shard(1)]";
    OperandDetail x;
    x.index = 1;
    x.plain = true;
    x.shape = "[4, 16]";
    d.operands = {w, x};
    d.promotedPlacements = "[Shard(0), Replicate()]";
    d.outcome = Outcome::Reconciled;
    MeshGrid g = meshGrid(MeshPicture::ofIncident(d), 64);
    EXPECT_EQ(g.columns, 4u);
    ASSERT_EQ(g.cells.size(), 8u);
    EXPECT_EQ(g.rowLabels, (std::vector<std::string>{"dp 0", "dp 1"}));
    EXPECT_EQ(g.columnLabels.back(), "tp 3");
    EXPECT_EQ(g.title, "device mesh (dp=2, tp=4) on cuda");
    const MeshCell& here = g.cells[5];  // dp 1, tp 1
    EXPECT_TRUE(here.here);
    // the plain [4, 16] promoted with from_local(Shard(0)) on dp=2 is one
    // rank's rows of an [8, 16] DTensor
    EXPECT_EQ(here.lines, (std::vector<std::string>{"rank 5", "op0 cols 4-7 of [8, 16]",
                                                    "op1 rows 4-7 of [8, 16]"}));
    EXPECT_TRUE(here.promotedLine);
    // capped: the first cells, and the title says how many of how many
    MeshGrid capped = meshGrid(MeshPicture::ofIncident(d), 3);
    EXPECT_EQ(capped.cells.size(), 3u);
    EXPECT_EQ(capped.title, "device mesh (dp=2, tp=4) on cuda, first 3 of 8 ranks drawn");
    // damaged strings show the placements instead of a piece
    d.operands[0].shape = "[" + std::string(300, '9') + "]";
    EXPECT_EQ(meshGrid(MeshPicture::ofIncident(d), 64).cells[0].lines[1],
              "op0 [Replicate(), Shard(1)]");
    // the report draws exactly these cells
    d.operands[0].shape = "[8, 16]";
    std::ostringstream svg;
    writeMeshDrawing(d, svg);
    for (const MeshCell& cell : g.cells)
        for (size_t i = 1; i < cell.lines.size(); ++i) {
            std::string piece = cell.lines[i].substr(cell.lines[i].find(' ') + 1);
            EXPECT_NE(svg.str().find("</tspan> " + htmlEscape(piece) + "</text>"),
                      std::string::npos)
                << piece;
        }
    EXPECT_NE(svg.str().find(">rank 5 (this incident)</text>"), std::string::npos);
    EXPECT_NE(svg.str().find(htmlEscape(g.title)), std::string::npos);
}

}  // namespace
}  // namespace meshscope

TEST(DescribeLocalPiece, DamagedTextNeitherThrowsNorOverflows) {
    using meshscope::describeLocalPiece;
    EXPECT_EQ(describeLocalPiece("[8, 16]", "[Shard(dim=0)]", {2}, {1}), "rows 4-7 of [8, 16]");
    EXPECT_EQ(describeLocalPiece("[8, 16]", "[Replicate(), Shard(1)]", {2, 4}, {1, 3}),
              "cols 12-15 of [8, 16]");
    EXPECT_NO_THROW(describeLocalPiece("[99999999999999999999999, 4]", "[Shard(0)]", {2}, {1}));
    EXPECT_NO_THROW(describeLocalPiece("[9223372036854775807]", "[Shard(0)]", {3}, {2}));
    EXPECT_NO_THROW(describeLocalPiece("[8]", "[Shard(99999999999999999999)]", {2}, {7}));
    std::string huge(1 << 20, '7');
    EXPECT_NO_THROW(describeLocalPiece("[" + huge + "]", "[Shard(" + huge + ")]", {2}, {0}));
    EXPECT_EQ(describeLocalPiece("[8]", "[Shard(0)]", {2}, {5}), "rows 4-7 of [8]");  // clamped
}
