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

// The rest of the report's writers share these.

// "#c62828": an incident state's colour (vocabulary.h).
std::string stateColour(IncidentState state);

// A rank the timeline draws; `reader` is its index in run.ranks() and
// analysis.summary.ranks.
struct TimelineLane {
    int rank = 0;
    size_t reader = 0;
};
// Every rank, or for a job of more than 64 the ranks that need a look, in
// rank order (html_timeline.cpp): those with a failure, then those at least
// 10 % off the median rank's time outside collectives, then those with a
// raised incident, then the first ranks. The ranks table lists them too.
std::vector<TimelineLane> timelineLanes(const RunReader& run, const RunAnalysis& analysis);
// The per-rank timeline of `lanes` as inline SVG, `width` px of time.
void writeTimeline(const RunReader& run, const RunAnalysis& analysis,
                   const std::vector<TimelineLane>& lanes, std::ostream& out, int width);

// "Where the time goes" (html_time.cpp): heat maps of ranks by steps, each
// rank's steps, the slowest rank of each step, stragglers, ops by time.
void writeTimeSection(const TimeBreakdown& time, std::ostream& out);

// The SVG drawing of an incident's operands on its device mesh (the layout
// of core/analysis/mesh_picture.h, which the GUI's inspector draws too).
void writeMeshDrawing(const IncidentDetail& incident, std::ostream& out);

}  // namespace meshscope
