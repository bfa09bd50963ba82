#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "app/cli/cli.h"
#include "core/util/terminal_text.h"

namespace meshscope::cli {

std::optional<RunReader> openRun(const std::string& path, bool partial) {
    RunReader run = RunReader::open(path);
    for (const auto& p : run.problems())
        std::cerr << "meshscope: " << terminalSafe(p.what()) << (partial ? " (skipped)" : "")
                  << "\n";
    if ((!partial && !run.problems().empty()) || run.ranks().empty()) {
        if (!partial && !run.problems().empty() && !run.ranks().empty())
            std::cerr << "meshscope: use --partial to read the " << run.ranks().size()
                      << " readable rank(s)\n";
        return std::nullopt;
    }
    return run;
}

bool verifyRanks(RunReader& run, RankReader::VerifyDepth depth, bool partial) {
    bool clean = true;
    for (size_t i = 0; i < run.ranks().size();) {
        try {
            run.ranks()[i].verify(depth);
            ++i;
        } catch (const StoreError& e) {
            std::cerr << "meshscope: " << terminalSafe(e.what()) << (partial ? " (skipped)" : "")
                      << "\n";
            clean = false;
            if (partial)
                run.dropRank(i, e);
            else
                ++i;
        }
    }
    return partial ? !run.ranks().empty() : clean;
}

std::optional<RunReader> openVerifiedRun(const std::string& path, bool partial,
                                         RankReader::VerifyDepth depth) {
    std::optional<RunReader> run = openRun(path, partial);
    if (run && !verifyRanks(*run, depth, partial)) return std::nullopt;
    return run;
}

bool writeOutput(const std::string& path, const std::function<void(std::ostream&)>& write) {
    if (path == "-") {
        write(std::cout);
        return bool(std::cout);
    }
    std::filesystem::path temp = path + ".partial";
    {
        std::ofstream file(temp, std::ios::binary | std::ios::trunc);
        if (!file) {  // named as the user gave it, with why (the temporary is ours)
            std::string why = std::strerror(errno);
            std::cerr << "meshscope: " << path << ": cannot write (" << why << ")\n";
            return false;
        }
        try {
            write(file);
        } catch (...) {
            file.close();
            std::error_code ec;
            std::filesystem::remove(temp, ec);  // no half file left behind
            throw;
        }
        file.flush();
        if (!file) {
            std::cerr << "meshscope: " << path << ": write failed (" << std::strerror(errno)
                      << ")\n";
            std::error_code ec;
            std::filesystem::remove(temp, ec);
            return false;
        }
    }
    std::filesystem::rename(temp, path);
    return true;
}

bool progressWanted() {
    return isatty(STDERR_FILENO) == 1;
}

AnalysisOptions analysisOptions(bool compareOps) {
    AnalysisOptions options;
    options.compareOps = compareOps;
    if (progressWanted()) {
        auto last = std::make_shared<std::chrono::steady_clock::time_point>();
        options.progress = [last](std::string_view stage, int64_t done, int64_t total) {
            auto now = std::chrono::steady_clock::now();
            if (now - *last < std::chrono::milliseconds(200)) return;
            *last = now;
            std::cerr << fmt::format("\rmeshscope: {} {}/{}\x1b[K", stage, done, total)
                      << std::flush;
        };
    }
    return options;
}

RunAnalysis analyzeWithProgress(const RunReader& run, bool compareOps) {
    RunAnalysis analysis = analyze(run, analysisOptions(compareOps));
    if (progressWanted()) std::cerr << "\r\x1b[K" << std::flush;
    return analysis;
}

}  // namespace meshscope::cli
