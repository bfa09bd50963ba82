#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "app/cli/cli.h"
#include "app/cli/gzip_output.h"
#include "core/export/trace_json.h"

namespace meshscope::cli {
namespace {

constexpr int64_t kMaxRank = (int64_t(1) << 20) - 1;

// "A-B", "A-", "-B" or "A" (integers; A may be -1 in "-1-3") -> [A, B].
std::optional<std::pair<int64_t, int64_t>> parseRange(const std::string& text) {
    auto number = [](std::string_view t, int64_t& out) {
        if (t.empty()) return false;
        auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
        return ec == std::errc() && end == t.data() + t.size();
    };
    int64_t a = INT64_MIN, b = INT64_MAX;
    size_t dash = text.find('-', 1);  // a leading '-' is a sign or "-B"
    if (text.starts_with('-') && text.size() > 1 && text.find('-', 1) == std::string::npos) {
        if (!number(std::string_view(text).substr(1), b)) return std::nullopt;  // "-B"
    } else if (dash == std::string::npos) {
        if (!number(text, a)) return std::nullopt;
        b = a;
    } else {
        if (!number(std::string_view(text).substr(0, dash), a)) return std::nullopt;
        std::string_view rest = std::string_view(text).substr(dash + 1);
        if (!rest.empty() && !number(rest, b)) return std::nullopt;
    }
    if (a > b) return std::nullopt;
    return std::pair{a, b};
}

}  // namespace

// Why `window` selects nothing of `run` (an export of it would be an empty
// trace), or "" when it selects something.
static std::string selectsNothing(const RunReader& run, const TraceWindow& window,
                                  const std::string& ranksText, const std::string& stepsText) {
    std::vector<const RankReader*> selected;
    std::string present;
    for (const RankReader& rank : run.ranks()) {
        present += (present.empty() ? "" : ",") + std::to_string(rank.info().rank);
        if (window.hasRank(rank.info().rank)) selected.push_back(&rank);
    }
    if (selected.empty())
        return fmt::format("--ranks {}: no such rank in {} (its ranks: {})", ranksText,
                           run.directory().string(), present);
    if (stepsText.empty()) return {};
    int64_t steps = 0;
    for (const RankReader* rank : selected) {
        if (!rank->opsInStepRange(window.firstStep, window.lastStep, 1).empty() ||
            !rank->incidentsInStepRange(window.firstStep, window.lastStep).empty())
            return {};
        steps = std::max(steps, rank->summary().steps);
    }
    return fmt::format(
        "--steps {}: nothing was recorded in these steps (the run recorded {} "
        "optimizer step(s); records before the first are step -1)",
        stepsText, steps);
}

Command addExport(CLI::App& app) {
    struct Options {
        std::string path;
        std::string format = "chrome-trace";
        std::string out;
        std::string steps, ranks;
        bool partial = false, gzip = false;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand(
        "export",
        "Export a run as Chrome trace event JSON (open it in Perfetto or chrome://tracing), or "
        "as one torch.profiler trace file per rank (HTA, TensorBoard's profiler plugin)");
    sub->add_option("run", o->path, "Run directory or rank file")->required();
    sub->add_option("--format", o->format,
                    "chrome-trace: one file for the run; torch-profiler: a folder of "
                    "HOST_PID.TIME.pt.trace.json files, one per rank")
        ->check(CLI::IsMember({"chrome-trace", "torch-profiler"}))
        ->capture_default_str();
    sub->add_option("-o,--output", o->out,
                    "File to write ('-' for stdout; a name ending in .gz is written "
                    "gzip-compressed); with --format torch-profiler the folder to write into")
        ->required();
    sub->add_flag("--gzip", o->gzip,
                  "torch-profiler: write .pt.trace.json.gz files (what the profiler's use_gzip "
                  "writes)");
    sub->add_option("--steps", o->steps,
                    "Only the optimizer steps A-B (inclusive; A-, -B, or one step A; records "
                    "before the first step are step -1)");
    sub->add_option("--ranks", o->ranks, "Only these ranks: 0,2,4-7");
    sub->add_flag("--partial", o->partial, "Export the readable ranks of a damaged run");
    return {sub, [o] {
                TraceWindow window;
                if (!o->steps.empty()) {
                    auto range = parseRange(o->steps);
                    if (!range) {
                        std::cerr << "meshscope: --steps " << o->steps
                                  << ": not a step range (A-B, A-, -B or A)\n";
                        return kExitUsage;
                    }
                    std::tie(window.firstStep, window.lastStep) = *range;
                }
                for (size_t begin = 0; begin < o->ranks.size();) {
                    size_t end = std::min(o->ranks.find(',', begin), o->ranks.size());
                    auto range = parseRange(o->ranks.substr(begin, end - begin));
                    if (!range || range->first < 0 || range->second > kMaxRank ||
                        range->first > range->second) {
                        std::cerr << "meshscope: --ranks " << o->ranks
                                  << ": not a list of ranks (0,2,4-7)\n";
                        return kExitUsage;
                    }
                    for (int64_t r = range->first; r <= range->second; ++r)
                        window.ranks.insert(int(r));
                    begin = end + 1;
                }
                const bool perRank = o->format == "torch-profiler";
                if ((perRank ? o->gzip : isGzipPath(o->out)) && !gzipAvailable()) {
                    std::cerr << "meshscope: " << o->out
                              << ": this meshscope was built without zlib and cannot write gzip\n";
                    return kExitUsage;
                }
                if (o->gzip && !perRank) {
                    std::cerr << "meshscope: --gzip is for --format torch-profiler; a chrome-trace "
                                 "file is compressed when its name ends in .gz\n";
                    return kExitUsage;
                }
                auto opened =
                    openVerifiedRun(o->path, o->partial, RankReader::VerifyDepth::Everything);
                if (!opened) return kExitUnreadable;
                if (std::string nothing = selectsNothing(*opened, window, o->ranks, o->steps);
                    !nothing.empty()) {
                    std::cerr << "meshscope: " << nothing << "\n";
                    return kExitUsage;
                }
                if (!perRank && outputOntoRun(o->out, *opened)) return kExitUsage;
                // torch-profiler: the files, then their folder (none made for a run that did not
                // open, or for ranks it does not have)
                std::vector<std::pair<const RankReader*, std::string>> files;
                if (perRank) {
                    files = profilerTraceFiles(*opened, o->gzip, window);
                    if (files.empty()) {
                        std::cerr << "meshscope: --ranks " << o->ranks << ": no such rank in "
                                  << o->path << "\n";
                        return kExitUsage;
                    }
                    std::string problem = prepareProfilerTraceFolder(o->out);
                    if (!problem.empty()) {
                        std::cerr << "meshscope: " << problem << "\n";
                        return kExitUsage;
                    }
                }
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
                if (perRank) {
                    for (const auto& [rank, name] : files) {
                        std::string file = (std::filesystem::path(o->out) / name).string();
                        if (outputOntoRun(file, *opened)) return kExitUsage;
                        bool written = writeOutput(file, [&](std::ostream& out) {
                            writeMaybeGzip(out, o->gzip, [&](std::ostream& to) {
                                stats += writeProfilerTrace(*opened, *rank, to, {}, window);
                            });
                        });
                        if (!written) return kExitUsage;
                        std::cout << file << "\n";
                    }
                    finish(stats);
                    return kExitOk;
                }
                bool written = writeOutput(o->out, [&](std::ostream& out) {
                    writeMaybeGzip(out, isGzipPath(o->out), [&](std::ostream& to) {
                        stats = writeChromeTrace(*opened, to, progress, window);
                    });
                });
                if (!written) return kExitUsage;
                finish(stats);
                return kExitOk;
            }};
}

}  // namespace meshscope::cli
