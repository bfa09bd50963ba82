#include "core/store/run_reader.h"

#include <sys/resource.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/store/regular_file.h"
#include "core/store/run_directory.h"
#include "core/store/schema.h"
#include "core/util/parallel.h"

#include <optional>

namespace meshscope {
namespace {

// launch.json (`meshscope record`'s note of how each rank ended): rank ->
// its end. Optional and advisory: a file that is not a small regular JSON
// file of that shape is ignored.
nlohmann::json readLaunchFile(const std::filesystem::path& dir) {
    std::string text;
    try {
        text = readRegularFile(dir / "launch.json", size_t(1) << 20);  // never a FIFO's read
    } catch (const StoreError&) {
        return {};
    }
    return nlohmann::json::parse(text, nullptr, false);
}

// A rank number that fits, else nullopt (never wrapped into one).
std::optional<int> launchRank(const nlohmann::json& entry) {
    nlohmann::json rank = entry.value("rank", nlohmann::json());
    if (rank.is_number_unsigned() && rank.get<uint64_t>() < uint64_t(kMaxWorldSize))
        return int(rank.get<uint64_t>());
    return std::nullopt;
}

// launch.json "recording": rank -> what it said of its recording.
std::map<int, RunReader::LaunchRecording> readLaunchRecording(const nlohmann::json& doc) {
    std::map<int, RunReader::LaunchRecording> out;
    if (!doc.is_object() || !doc.contains("recording") || !doc["recording"].is_array()) return out;
    for (const nlohmann::json& r : doc["recording"]) {
        if (!r.is_object()) continue;
        std::optional<int> rank = launchRank(r);
        if (!rank) continue;
        RunReader::LaunchRecording& rec = out[*rank];
        rec.closed = r.value("closed", nlohmann::json()).is_boolean() && r["closed"].get<bool>();
        if (r.contains("drops") && r["drops"].is_object())
            for (const auto& [reason, count] : r["drops"].items())
                if (count.is_number_unsigned() && reason.size() < 64)
                    rec.drops[reason] = count.get<uint64_t>();
    }
    return out;
}

std::map<int, std::string> readLaunchEnds(const nlohmann::json& doc) {
    std::map<int, std::string> ends;
    if (!doc.is_object() || !doc.contains("ranks") || !doc["ranks"].is_array()) return ends;
    for (const nlohmann::json& r : doc["ranks"]) {
        if (!r.is_object() || !r.value("ended", nlohmann::json()).is_string()) continue;
        if (std::optional<int> rank = launchRank(r)) ends[*rank] = r["ended"].get<std::string>();
    }
    return ends;
}

std::vector<std::filesystem::path> rankFilesIn(const std::filesystem::path& dir) {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
        if (rankFromFileName(entry.path())) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace

MissingRanks findMissingRanks(const std::set<int>& present, int worldSize, size_t limit) {
    MissingRanks out;
    int64_t next = 0;              // the lowest rank not yet accounted for
    auto gap = [&](int64_t end) {  // ranks [next, end) are missing
        out.count += end - next;
        for (int64_t r = next; r < end && out.listed.size() < limit; ++r)
            out.listed.push_back(int(r));
    };
    for (auto it = present.lower_bound(0); it != present.end() && *it < worldSize; ++it) {
        gap(*it);
        next = int64_t(*it) + 1;
    }
    if (next < worldSize) gap(worldSize);
    return out;
}

void prepareForManyReaders() {
    sql::preferManyConnections();
    // A reader holds its file open: 4,096 ranks need more than the usual
    // soft limit of 1,024 descriptors. Up to the hard limit, as a process
    // may without privileges.
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
}

RunReader RunReader::open(const std::filesystem::path& path) {
    RunReader run;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw StoreError(path.string(), "no such file or directory");
    bool singleFile = !std::filesystem::is_directory(path, ec);
    run.m_dir = singleFile ? path.parent_path() : path;
    if (run.m_dir.empty()) run.m_dir = ".";

    auto manifestFile = run.m_dir / schema::kManifestName;
    if (std::filesystem::exists(manifestFile, ec)) {
        try {
            run.m_manifest = Manifest::read(manifestFile);
        } catch (const StoreError& e) {
            run.m_problems.push_back(e);
        }
    } else if (!singleFile) {
        run.m_problems.emplace_back(manifestFile.string(),
                                    "missing (not a complete meshscope run)");
    }

    std::vector<std::filesystem::path> files =
        singleFile ? std::vector{path} : rankFilesIn(run.m_dir);
    if (files.empty() && !run.m_manifest)
        throw StoreError(path.string(), "not a meshscope run (no manifest.json and no rank files)");

    // The files are opened side by side (each reader its own connection;
    // opening reads and checks its schema and header), then taken in order.
    std::vector<std::optional<RankReader>> opened(files.size());
    std::vector<std::optional<StoreError>> refused(files.size());
    forEachInParallel(files.size(), [&](size_t i) {
        try {
            opened[i].emplace(RankReader::open(files[i]));
        } catch (const StoreError& e) {
            refused[i] = e;
        }
    });
    std::set<int> present;
    for (size_t i = 0; i < files.size(); ++i) {
        const auto& file = files[i];
        if (refused[i]) {
            run.m_problems.push_back(*refused[i]);
            if (auto rank = rankFromFileName(file)) present.insert(*rank);
            continue;
        }
        RankReader& reader = *opened[i];
        if (run.m_manifest && reader.info().runId != run.m_manifest->runId)
            run.m_problems.emplace_back(
                file.string(), "belongs to another run (run id " + reader.info().runId + ")");
        present.insert(reader.info().rank);
        run.m_ranks.push_back(std::move(reader));
    }
    if (run.m_manifest && !singleFile) {
        std::vector<int> absent;
        for (int rank : std::set<int>(run.m_manifest->ranks.begin(), run.m_manifest->ranks.end()))
            if (!present.count(rank)) absent.push_back(rank);
        for (size_t i = 0; i < absent.size() && i < kMissingRanksListed; ++i)
            run.m_problems.emplace_back(
                rankFilePath(run.m_dir, absent[i]).string(),
                "missing (rank " + std::to_string(absent[i]) + " is listed in the manifest)");
        if (absent.size() > kMissingRanksListed)
            run.m_problems.emplace_back(manifestFile.string(),
                                        std::to_string(absent.size() - kMissingRanksListed) +
                                            " more listed rank(s) have no file (ranks " +
                                            std::to_string(absent[kMissingRanksListed]) + ".." +
                                            std::to_string(absent.back()) + ")");
    }
    std::sort(run.m_ranks.begin(), run.m_ranks.end(), [](const RankReader& a, const RankReader& b) {
        return a.info().rank < b.info().rank;
    });
    if (!singleFile) {
        nlohmann::json launch = readLaunchFile(run.m_dir);
        run.m_launchEnds = readLaunchEnds(launch);
        run.m_launchRecording = readLaunchRecording(launch);
    }
    return run;
}

void RunReader::dropRank(size_t index, const StoreError& why) {
    m_problems.push_back(why);
    m_ranks.erase(m_ranks.begin() + std::ptrdiff_t(index));
}

int RunReader::worldSize() const {
    int size = m_manifest ? m_manifest->worldSize : 0;
    for (const auto& r : m_ranks)
        size = std::max(size, r.info().worldSize);
    return size;
}

}  // namespace meshscope
