#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <ext/stdio_filebuf.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "app/cli/cli.h"
#include "core/store/manifest.h"
#include "core/store/schema.h"
#include "core/util/parallel.h"
#include "core/util/terminal_text.h"

namespace meshscope::cli {
namespace {

// What the threads that read ranks side by side freed stays in their own
// malloc arenas, which the main thread's allocations never reuse: given
// back to the system between the stages of a command, so that a report
// built after the analysis does not add to it (the JSON report of 1,024
// ranks: 326 MiB at its peak without, 291 MiB with).
void returnFreedMemory() {
    ::malloc_trim(0);
}

}  // namespace

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
    // Ranks are verified side by side, one reader per thread at a time (each
    // has its own connection); what each found is said in rank order after.
    std::vector<RankReader>& ranks = run.ranks();
    std::vector<std::optional<StoreError>> found(ranks.size());
    forEachInParallel(ranks.size(), [&](size_t i) {
        try {
            ranks[i].verify(depth);
            ranks[i].releaseMemory();  // 4,096 ranks: only those in hand hold a cache
        } catch (const StoreError& e) {
            found[i] = e;
        }
    });
    returnFreedMemory();
    bool clean = true;
    size_t dropped = 0;
    for (size_t i = 0; i < found.size(); ++i) {
        if (!found[i]) continue;
        std::cerr << "meshscope: " << terminalSafe(found[i]->what())
                  << (partial ? " (skipped)" : "") << "\n";
        clean = false;
        if (partial) run.dropRank(i - dropped++, *found[i]);
    }
    return partial ? !run.ranks().empty() : clean;
}

std::optional<RunReader> openVerifiedRun(const std::string& path, bool partial,
                                         RankReader::VerifyDepth depth) {
    std::optional<RunReader> run = openRun(path, partial);
    if (run && !verifyRanks(*run, depth, partial)) return std::nullopt;
    return run;
}

namespace {

// The files of `run` on disk: its rank files with their -wal and -shm, its
// manifest, launch.json and the job claim. An output is never written onto
// one of them.
std::vector<std::filesystem::path> runFiles(const RunReader& run) {
    std::vector<std::filesystem::path> files;
    for (const RankReader& rank : run.ranks())
        for (const char* suffix : {"", "-wal", "-shm"})
            files.push_back(std::filesystem::path(rank.path()) += suffix);
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(run.directory(), ec)) {
        std::string name = entry.path().filename().string();
        if (name == schema::kManifestName || name == "launch.json" || name == kJobClaimName ||
            name == ".manifest.lock" ||
            (name.starts_with(schema::kRankFilePrefix) &&
             name.find(schema::kRankFileSuffix) != std::string::npos))
            files.push_back(entry.path());
    }
    return files;
}

// Whether `a` and `b` name one file: the same path once made absolute and
// resolved as far as it exists, or the same inode.
bool sameFile(const std::filesystem::path& a, const std::filesystem::path& b) {
    std::error_code ec;
    if (std::filesystem::weakly_canonical(std::filesystem::absolute(a), ec) ==
        std::filesystem::weakly_canonical(std::filesystem::absolute(b), ec))
        return true;
    return std::filesystem::exists(a, ec) && std::filesystem::exists(b, ec) &&
           std::filesystem::equivalent(a, b, ec);
}

}  // namespace

bool outputOntoRun(const std::string& path, const RunReader& run) {
    if (path == "-") return false;
    for (const std::filesystem::path& file : runFiles(run))
        if (sameFile(path, file)) {
            std::cerr << "meshscope: " << path << ": is a file of the run being read ("
                      << run.directory().string() << "); write the output elsewhere\n";
            return true;
        }
    return false;
}

bool writeOutput(const std::string& path, const std::function<void(std::ostream&)>& write) {
    if (path == "-") {
        write(std::cout);
        return bool(std::cout);
    }
    auto fail = [&](std::string_view what, int error) {
        std::cerr << "meshscope: " << path << ": " << what << " (" << std::strerror(error) << ")\n";
        return false;
    };
    std::filesystem::path target(path);
    std::error_code ec;
    if (target.has_parent_path() && !std::filesystem::is_directory(target.parent_path(), ec)) {
        std::filesystem::create_directories(target.parent_path(), ec);
        if (ec) {
            std::cerr << "meshscope: " << path << ": cannot create its folder "
                      << target.parent_path().string() << " (" << ec.message() << ")\n";
            return false;
        }
    }
    // The temporary is created exclusively and never through a symlink; the
    // rename then replaces whatever `path` names (a symlink itself, not its
    // target), so a failed write leaves no half file and loses no old one.
    std::filesystem::path temp = path + ".partial";
    ::unlink(temp.c_str());  // a leftover of an earlier failed write (a symlink is not followed)
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return fail("cannot write", errno);
    {
        __gnu_cxx::stdio_filebuf<char> buffer(fd, std::ios::out | std::ios::binary);
        std::ostream file(&buffer);
        try {
            write(file);
        } catch (...) {
            buffer.close();
            std::filesystem::remove(temp, ec);  // no half file left behind
            throw;
        }
        file.flush();
        bool closed = buffer.close() != nullptr;
        if (!file || !closed) {
            int error = errno;
            std::filesystem::remove(temp, ec);
            return fail("write failed", error);
        }
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        int error = errno;
        std::filesystem::remove(temp, ec);
        return fail("cannot write", error);
    }
    return true;
}

bool progressWanted() {
    return isatty(STDERR_FILENO) == 1;
}

AnalysisOptions analysisOptions(bool compareOps, bool timeBreakdown) {
    AnalysisOptions options;
    options.compareOps = compareOps;
    options.timeBreakdown = timeBreakdown;
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

RunAnalysis analyzeWithProgress(const RunReader& run, bool compareOps, bool timeBreakdown) {
    RunAnalysis analysis = analyze(run, analysisOptions(compareOps, timeBreakdown));
    if (progressWanted()) std::cerr << "\r\x1b[K" << std::flush;
    returnFreedMemory();
    return analysis;
}

}  // namespace meshscope::cli
