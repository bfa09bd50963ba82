#pragma once

// The HTML report: one self-contained file that works offline (no network
// request, no script; a restrictive Content-Security-Policy), with the run
// summary, findings, where each rank stopped (when one did not end
// cleanly), a per-rank timeline as inline SVG, each incident group with its
// fix, stack and a drawing of its operands on the device mesh; failures
// (no sharding strategy, DTensor errors, collective failures and hangs)
// with their kind, error and, for hangs, the Python stacks of all threads.
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

// "Where the time goes" (html_time.cpp): heat maps of ranks by steps, each
// rank's steps, the slowest rank of each step, stragglers, ops by time.
void writeTimeSection(const TimeBreakdown& time, std::ostream& out);

// The SVG drawing of an incident's operands on its device mesh (the layout
// of core/analysis/mesh_picture.h, which the GUI's inspector draws too).
void writeMeshDrawing(const IncidentDetail& incident, std::ostream& out);

}  // namespace meshscope
