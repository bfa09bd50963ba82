#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "app/cli/cli.h"
#include "core/export/trace_json.h"

namespace meshscope::cli {

Command addExport(CLI::App& app) {
    struct Options {
        std::string path;
        std::string format = "chrome-trace";
        std::string out;
        bool partial = false;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand(
        "export",
        "Export a run as Chrome trace event JSON (open it in Perfetto or chrome://tracing)");
    sub->add_option("run", o->path, "Run directory or rank file")->required();
    sub->add_option("--format", o->format, "chrome-trace")
        ->check(CLI::IsMember({"chrome-trace"}))
        ->capture_default_str();
    sub->add_option("-o,--output", o->out, "File to write ('-' for stdout)")->required();
    sub->add_flag("--partial", o->partial, "Export the readable ranks of a damaged run");
    return {sub, [o] {
                auto opened =
                    openVerifiedRun(o->path, o->partial, RankReader::VerifyDepth::Everything);
                if (!opened) return kExitUnreadable;
                std::function<void(int64_t, int64_t)> progress;
                if (progressWanted())
                    progress = [](int64_t done, int64_t total) {
                        if (done % (1 << 20) < (1 << 16))
                            std::cerr << fmt::format("\rmeshscope: exported {}/{} ops\x1b[K", done,
                                                     total);
                    };
                auto finish = [&](const TraceExportStats& s) {
                    if (progressWanted()) std::cerr << "\r\x1b[K";
                    std::cerr << fmt::format(
                        "meshscope: exported {} ops, {} collectives, {} incidents, {} flows{}\n",
                        s.ops, s.collectives, s.incidents, s.flows,
                        s.clamped ? fmt::format(" ({} spans clamped into their parent)", s.clamped)
                                  : "");
                };
                TraceExportStats stats;
                bool written = writeOutput(o->out, [&](std::ostream& out) {
                    stats = writeChromeTrace(*opened, out, progress);
                });
                if (!written) return kExitUsage;
                finish(stats);
                return kExitOk;
            }};
}

}  // namespace meshscope::cli
