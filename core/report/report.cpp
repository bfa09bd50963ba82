#include "core/report/report.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/report/html_report.h"

namespace meshscope {

// Each format's writer, in its own file.
void writeJsonReport(const RunReader&, const RunAnalysis&, std::ostream&, const ReportOptions&);
void writeSarifReport(const RunReader&, const RunAnalysis&, std::ostream&, const ReportOptions&);

namespace {

void html(const RunReader& run, const RunAnalysis& analysis, std::ostream& out,
          const ReportOptions& options) {
    HtmlReportOptions html;
    html.maxGroupsInDetail = options.maxGroupsInDetail;
    html.generator = options.generator;
    writeHtmlReport(run, analysis, out, html);
}

void markdown(const RunReader&, const RunAnalysis& analysis, std::ostream& out,
              const ReportOptions& options) {
    writeMarkdownReport(analysis, out, options);
}

void csv(const RunReader&, const RunAnalysis& analysis, std::ostream& out, const ReportOptions&) {
    writeCsvReport(analysis, out);
}

bool hasWord(std::string_view words, std::string_view word) {
    while (!words.empty()) {
        size_t end = std::min(words.find(' '), words.size());
        if (words.substr(0, end) == word) return true;
        words.remove_prefix(std::min(end + 1, words.size()));
    }
    return false;
}

}  // namespace

const std::vector<ReportFormatInfo>& reportFormats() {
    static const std::vector<ReportFormatInfo> formats{
        {"html", "HTML", "htm", &html, true},
        {"md", "Markdown", "markdown", &markdown, true},
        {"json", "JSON", "", &writeJsonReport, true},
        {"csv", "CSV", "", &csv},
        {"sarif", "SARIF", "", &writeSarifReport},
    };
    return formats;
}

const ReportFormatInfo* reportFormatFromString(std::string_view name) {
    for (const ReportFormatInfo& f : reportFormats())
        if (f.name == name) return &f;
    return nullptr;
}

const ReportFormatInfo* reportFormatForFile(std::string_view path) {
    std::string ext = std::filesystem::path(path).extension().string();
    if (ext.empty()) return nullptr;
    ext.erase(0, 1);
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    for (const ReportFormatInfo& f : reportFormats())
        if (f.name == ext || hasWord(f.aliases, ext)) return &f;
    return nullptr;
}

void writeReport(const ReportFormatInfo& format, const RunReader& run, const RunAnalysis& analysis,
                 std::ostream& out, const ReportOptions& options) {
    format.write(run, analysis, out, options);
}

}  // namespace meshscope
