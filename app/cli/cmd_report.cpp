#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "app/cli/cli.h"
#include "app/cli/strip_prefix.h"
#include "core/report/report.h"

namespace meshscope::cli {

Command addReport(CLI::App& app) {
    struct Options {
        std::string path;
        std::string format = "html";
        std::string out;
        std::string sourceRoot;
        bool partial = false;
        bool noOps = false;
    };
    auto o = std::make_shared<Options>();
    std::vector<std::string> names;
    std::string list;
    for (const ReportFormatInfo& f : reportFormats()) {
        names.emplace_back(f.name);
        list += (list.empty() ? "" : " | ") + std::string(f.name);
    }
    auto* sub = app.add_subcommand("report", "Write a report: " + list);
    sub->add_option("run", o->path, "Run directory or rank file")->required();
    auto* formatOption =
        sub->add_option("--format", o->format,
                        list + " (default: the one -o's extension names, else html)")
            ->check(CLI::IsMember(names))
            ->capture_default_str();
    sub->add_option("-o,--output", o->out, "File to write ('-' for stdout)")->required();
    sub->add_option("--source-root", o->sourceRoot,
                    "Show recorded paths under this directory relative to it, in every format "
                    "(SARIF: its base URI; default for SARIF: the current directory)");
    sub->add_flag("--partial", o->partial, "Report on the readable ranks of a damaged run");
    sub->add_flag("--no-op-compare", o->noOps, "Skip comparing op sequences across ranks");
    return {
        sub, [o, formatOption] {
            // `-o y.md` writes Markdown unless --format says otherwise; a name
            // no format has (r.txt) needs --format.
            const ReportFormatInfo* byFile = reportFormatForFile(o->out);
            if (formatOption->count() == 0 && !byFile && o->out != "-") {
                std::string known;
                for (const ReportFormatInfo& f : reportFormats())
                    known += (known.empty() ? "." : ", .") + std::string(f.name);
                std::cerr << "meshscope: " << o->out << ": no report format has its extension ("
                          << known << "); name one with --format\n";
                return kExitUsage;
            }
            auto opened = openVerifiedRun(o->path, o->partial, RankReader::VerifyDepth::Everything);
            if (!opened) return kExitUnreadable;
            if (outputOntoRun(o->out, *opened)) return kExitUsage;
            const ReportFormatInfo& format =
                formatOption->count() == 0 && byFile ? *byFile : *reportFormatFromString(o->format);
            RunAnalysis analysis = analyzeWithProgress(*opened, !o->noOps, format.showsTime);
            ReportOptions options;
            options.sourceRoot = o->sourceRoot.empty()
                                     ? std::filesystem::current_path().string()
                                     : std::filesystem::absolute(o->sourceRoot).string();
            // SARIF has its own base URI; every other format shows recorded
            // paths under an explicit --source-root relative to it.
            std::string strip;
            if (!o->sourceRoot.empty() && format.name != "sarif") {
                strip = std::filesystem::path(options.sourceRoot).lexically_normal().string();
                if (!strip.ends_with('/')) strip += '/';
            }
            bool written = writeOutput(o->out, [&](std::ostream& out) {
                if (strip.empty()) return writeReport(format, *opened, analysis, out, options);
                StripPrefixStream relative(out, strip);
                writeReport(format, *opened, analysis, relative, options);
                if (!relative.finish()) out.setstate(std::ios::badbit);
            });
            if (!written) return kExitUsage;
            if (o->out != "-")
                std::cerr << "meshscope: wrote " << o->out << " (" << analysis.groups.size()
                          << " incident group(s), " << analysis.findings.size() << " finding(s))\n";
            return kExitOk;
        }};
}

}  // namespace meshscope::cli
