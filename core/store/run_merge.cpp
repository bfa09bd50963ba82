#include "core/store/run_merge.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/store/manifest.h"
#include "core/store/regular_file.h"
#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"
#include "core/store/writer_process.h"

namespace meshscope {
namespace {

// The entries of `input`'s launch.json for `ranks`; none when it has no
// readable one (launch.json is advisory).
std::vector<nlohmann::json> launchEntries(const std::filesystem::path& input,
                                          const std::set<int>& ranks, nlohmann::json& stop) {
    std::vector<nlohmann::json> out;
    std::string text;
    try {
        text = readRegularFile(input / "launch.json", size_t(1) << 20);
    } catch (const StoreError&) {
        return out;
    }
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_object() || !doc.contains("ranks") || !doc["ranks"].is_array()) return out;
    if (stop.is_null() && doc.contains("stop_signal")) stop = doc["stop_signal"];
    for (const nlohmann::json& entry : doc["ranks"])
        if (entry.is_object() && entry.value("rank", nlohmann::json()).is_number_unsigned() &&
            ranks.count(int(entry["rank"].get<uint64_t>() & 0x7fffffff)))
            out.push_back(entry);
    return out;
}

}  // namespace

MergeResult mergeRuns(const std::vector<std::filesystem::path>& inputs,
                      const std::filesystem::path& out) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
        throw MergeTargetError(out.string() + ": already exists and is not empty");

    struct Source {
        fs::path file;
        fs::path input;
    };
    std::map<int, Source> sources;
    std::map<std::filesystem::path, std::set<int>> ranksOf;  // input -> the ranks it gives
    std::vector<std::string> live;
    std::optional<Manifest> merged;
    fs::path firstInput;
    std::string runId;
    int worldSize = 0;
    for (const fs::path& input : inputs) {
        RunReader run = RunReader::open(input);
        if (!run.problems().empty()) throw run.problems().front();
        std::string id = run.runId();
        if (runId.empty()) {
            runId = id;
            firstInput = input;
        } else if (id != runId) {
            throw StoreError(input.string(),
                             "belongs to run " + id + ", but " + firstInput.string() + " to run " +
                                 runId +
                                 " (record every node of a job with the same --run-id, or "
                                 "MESHSCOPE_RUN_ID)");
        }
        if (run.manifest()) {
            worldSize = std::max(worldSize, run.manifest()->worldSize);
            if (!merged) merged = run.manifest();
        }
        for (const RankReader& rank : run.ranks()) {
            int r = rank.info().rank;
            worldSize = std::max({worldSize, rank.info().worldSize, r + 1});  // r < INT32_MAX
            auto [it, fresh] = sources.try_emplace(r, Source{rank.path(), input});
            ranksOf[input].insert(r);
            if (!rank.info().endedNs && writerProcessRuns(rank.info()))
                live.push_back("rank " + std::to_string(r) + " of " + input.string() + " (pid " +
                               std::to_string(rank.info().pid) + " on this host)");
            if (!fresh)
                throw StoreError(
                    rank.path().string(),
                    "rank " + std::to_string(r) + " is also in " + it->second.file.string());
        }
    }
    if (sources.empty())
        throw StoreError(inputs.empty() ? "" : inputs.front().string(), "no ranks to merge");

    createRunDirectories(out);
    MergeResult result;
    result.liveRanks = std::move(live);
    for (const auto& [rank, source] : sources) {
        fs::path target = rankFilePath(out, rank);
        fs::copy_file(source.file, target);
        // A rank that was killed may still have committed pages in its WAL.
        fs::path wal = source.file;
        wal += "-wal";
        if (fs::exists(wal, ec)) {
            fs::path targetWal = target;
            targetWal += "-wal";
            fs::copy_file(wal, targetWal);
        }
        result.ranks.push_back(rank);
    }
    Manifest m = merged.value_or(Manifest{});
    m.runId = runId;
    m.worldSize = worldSize;
    m.ranks = result.ranks;
    if (m.schemaVersion == 0) m.schemaVersion = schema::kSchemaVersion;
    if (m.created.empty()) m.created = isoTimestampUtc();
    m.write(out / schema::kManifestName);
    nlohmann::json launch = {{"stop_signal", nullptr}, {"ranks", nlohmann::json::array()}};
    for (const auto& [input, ranks] : ranksOf)
        for (nlohmann::json& entry : launchEntries(input, ranks, launch["stop_signal"]))
            launch["ranks"].push_back(std::move(entry));
    if (!launch["ranks"].empty()) writeFileAtomically(out / "launch.json", launch.dump(1) + "\n");
    result.worldSize = worldSize;
    std::set<int> present;
    for (const auto& [rank, source] : sources)
        present.insert(rank);
    MissingRanks missing = findMissingRanks(present, worldSize, kMissingRanksListed);
    result.missingRanks = std::move(missing.listed);
    result.missingRankCount = missing.count;
    return result;
}

}  // namespace meshscope
