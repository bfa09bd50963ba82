#pragma once

// The HTML report: one self-contained file that works offline (no network
// request, no script; a restrictive Content-Security-Policy), with the run
// summary, findings, a per-rank timeline as inline SVG, each incident group
// with its fix, stack and a drawing of its operands on the device mesh.
// Every recorded string is untrusted and escaped for where it lands.

#include <iosfwd>
#include <string>
#include <string_view>

#include "core/analysis/run_analysis.h"
#include "core/version.h"

namespace meshscope {

struct HtmlReportOptions {
    std::string generator = kNameAndVersion;
    int maxGroupsInDetail = 200;
    int timelineWidth = 1200;  // px; marks are bucketed per pixel column
};

void writeHtmlReport(const RunReader& run, const RunAnalysis& analysis, std::ostream& out,
                     const HtmlReportOptions& options = {});

// Escapers, exposed for tests. Both replace invalid UTF-8 with U+FFFD.
std::string htmlEscape(std::string_view text);       // element text and quoted attributes
std::string jsonForScript(const std::string& json);  // <, >, & as \u escapes

// `text` in at most `maxLines` lines of at most `width` characters (UTF-8
// code points), broken at spaces where it can be; the last line ends in an
// ellipsis when text is left over. For labels inside SVG boxes.
std::vector<std::string> wrapLabel(std::string_view text, size_t width, size_t maxLines);

// What one rank holds of a tensor with `shape` ("[8, 16]") and `placements`
// ("[Shard(0), Replicate()]") at `coordinate` of a mesh of `meshShape`:
// "rows 0-3 of [8, 16]", "all of [16]", "partial sum of [4, 4]".
std::string describeLocalPiece(std::string_view shape, std::string_view placements,
                               const std::vector<int64_t>& meshShape,
                               const std::vector<int64_t>& coordinate);

}  // namespace meshscope
