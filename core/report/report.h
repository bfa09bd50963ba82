#pragma once

// Report writers for an analysed run: HTML (html_report.h), Markdown, JSON,
// CSV and SARIF. Every recorded string is untrusted; each writer escapes for
// its own format. Shared by `meshscope report` and the GUI's export.

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/run_analysis.h"
#include "core/version.h"

namespace meshscope {

enum class ReportFormat : uint8_t { Html, Markdown, Json, Csv, Sarif };
std::optional<ReportFormat> reportFormatFromString(std::string_view text);
std::string_view toString(ReportFormat format);

struct ReportOptions {
    std::string generator = kNameAndVersion;
    // SARIF: recorded paths under this directory become relative URIs
    // (against %SRCROOT%), so code-scanning UIs place results in the repo.
    std::string sourceRoot;
    int maxGroupsInDetail = 200;  // HTML and Markdown
};

void writeReport(ReportFormat format, const RunReader& run, const RunAnalysis& analysis,
                 std::ostream& out, const ReportOptions& options = {});

// The JSON report as a document (also what the golden tests compare).
nlohmann::json reportToJson(const RunAnalysis& analysis, const ReportOptions& options = {});
nlohmann::json incidentDetailToJson(const IncidentDetail& detail);
nlohmann::json sarifLog(const RunAnalysis& analysis, const ReportOptions& options = {});
void writeMarkdownReport(const RunAnalysis& analysis, std::ostream& out,
                         const ReportOptions& options = {});
void writeCsvReport(const RunAnalysis& analysis, std::ostream& out);

// "origin D" rule ids and the like, shared with SARIF consumers' docs.
std::string sarifRuleId(OriginClass origin);

}  // namespace meshscope
