#pragma once

// Wiring of the `meshscope` command line: each subcommand registers its
// options on the CLI11 app and returns the function that runs it. All logic
// lives in core; these files only parse, open runs and print. The exception
// is `record`'s launcher (app/cli/record/: processes, signals, environment),
// which only that command uses.
//
// Exit codes (README "Exit codes"): 0 success, 1 findings (check, diff),
// 2 usage error, 3 unreadable or incomplete run.

#include <CLI/CLI.hpp>

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "core/analysis/run_analysis.h"
#include "core/store/run_reader.h"

namespace meshscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreadable = 3;

struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

// Opens a run for a command. Unless `partial`, any unreadable part of the run
// (missing rank, damaged file, bad manifest) is an error: one line per
// problem on stderr, and nullopt.
std::optional<RunReader> openRun(const std::string& path, bool partial);

// Reads every rank of `run` to `depth` (RankReader::verify), so a command
// rejects what any other would. A damaged rank is one line on stderr; with
// `partial` it is dropped and the others go on, else the result is false.
bool verifyRanks(RunReader& run, RankReader::VerifyDepth depth, bool partial);

// openRun, then verifyRanks to `depth`.
std::optional<RunReader> openVerifiedRun(const std::string& path, bool partial,
                                         RankReader::VerifyDepth depth);

// True when stderr is a terminal: long commands print progress there.
bool progressWanted();

// Writes a command's output to `path` ("-": stdout) through `write`: into
// PATH.partial first, renamed when complete, so a failed write leaves no
// half file and loses no old one. False (with a one-line error) on failure.
// A missing folder on the way is created; the temporary is created
// exclusively, never through a symlink.
bool writeOutput(const std::string& path, const std::function<void(std::ostream&)>& write);
// True, with one line on stderr, when `path` names a file of `run` (a rank
// file, its -wal or -shm, the manifest, launch.json): writing there would
// destroy what is being read.
bool outputOntoRun(const std::string& path, const RunReader& run);

// Analysis options with a progress line on stderr when it is a terminal.
AnalysisOptions analysisOptions(bool compareOps = true, bool timeBreakdown = true);
// Analyses a run, with progress; the progress line is cleared afterwards.
RunAnalysis analyzeWithProgress(const RunReader& run, bool compareOps = true,
                                bool timeBreakdown = true);

Command addSummary(CLI::App& app);
Command addInfo(CLI::App& app);
Command addSynth(CLI::App& app);
Command addRecord(CLI::App& app);
Command addCheck(CLI::App& app);
Command addReport(CLI::App& app);
Command addDiff(CLI::App& app);
Command addExport(CLI::App& app);
Command addMerge(CLI::App& app);

}  // namespace meshscope::cli
