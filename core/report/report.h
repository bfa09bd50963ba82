#pragma once

// The report formats of an analysed run, behind one table that `meshscope
// report` and the GUI's export both read: HTML (html_report.h), Markdown,
// JSON, CSV and SARIF, one file each (<format>_report.cpp). Every recorded
// string is untrusted; each writer escapes for its own format. A new format
// is its writer's file and its row in report.cpp.

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/incident_explanation.h"
#include "core/analysis/run_analysis.h"
#include "core/version.h"

namespace meshscope {

struct ReportOptions {
    std::string generator = kNameAndVersion;
    // SARIF: recorded paths under this directory become relative URIs
    // (against %SRCROOT%), so code-scanning UIs place results in the repo.
    std::string sourceRoot;
    int maxGroupsInDetail = 200;  // HTML and Markdown
};

using ReportWriter = void (*)(const RunReader& run, const RunAnalysis& analysis, std::ostream& out,
                              const ReportOptions& options);

struct ReportFormatInfo {
    std::string_view name;     // --format value and file extension: "md"
    std::string_view title;    // for file dialogs: "Markdown"
    std::string_view aliases;  // other file extensions, space-separated: "markdown"
    ReportWriter write;
    bool showsTime = false;  // it has "where the time goes" (RunAnalysis::time)
};

// In the order the CLI's help and the GUI's file dialog list them.
const std::vector<ReportFormatInfo>& reportFormats();
const ReportFormatInfo* reportFormatFromString(std::string_view name);
// The format a file name asks for by its extension (any case, aliases
// included); null when none does.
const ReportFormatInfo* reportFormatForFile(std::string_view path);

void writeReport(const ReportFormatInfo& format, const RunReader& run, const RunAnalysis& analysis,
                 std::ostream& out, const ReportOptions& options = {});

// The writers, also for tests.
nlohmann::json reportToJson(const RunAnalysis& analysis, const ReportOptions& options = {});
// An incident and what it means: the JSON report's group examples and
// load_run()'s incidents carry the same "explanation" object.
nlohmann::json incidentDetailToJson(const IncidentDetail& detail,
                                    const IncidentExplanation& explanation);
nlohmann::json explanationToJson(const IncidentExplanation& explanation);
// A fix as JSON: summary, code and place (how, file and line; or why not).
nlohmann::json fixToJson(const FixSuggestion& fix);
// Where the time goes: the JSON report's "time" object.
nlohmann::json timeToJson(const TimeBreakdown& time);
nlohmann::json sarifLog(const RunAnalysis& analysis, const ReportOptions& options = {});
void writeMarkdownReport(const RunAnalysis& analysis, std::ostream& out,
                         const ReportOptions& options = {});
void writeCsvReport(const RunAnalysis& analysis, std::ostream& out);

// "meshscope/mixed-tensor/D": the SARIF rule of an origin class.
std::string sarifRuleId(OriginClass origin);

}  // namespace meshscope
