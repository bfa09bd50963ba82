#pragma once

// manifest.json of a run directory: what the run is, independent of any rank
// file. Ranks register themselves (under a file lock, since all ranks of a
// node share the directory); readers compare it with the rank files present.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace meshscope {

// The largest world size a run may declare (manifest or rank meta); readers
// size nothing by it: what they allocate follows the rank files present.
inline constexpr int64_t kMaxWorldSize = INT32_MAX;

struct Manifest {
    std::string runId;
    std::string created;  // ISO 8601 UTC
    int worldSize = 0;
    std::vector<int> ranks;  // ranks that registered a file, ascending
    int schemaVersion = 0;
    std::vector<std::string> command;
    std::string torchVersion;

    // Throws StoreError naming the file for a missing, unparsable or
    // incomplete manifest.
    static Manifest read(const std::filesystem::path& file);
    // Atomic replace (write to a temporary file, then rename).
    void write(const std::filesystem::path& file) const;
};

// Adds `rank` to the manifest of `runDir`, creating the manifest from
// `initial` if none exists. Safe against concurrent ranks (flock).
Manifest registerRank(const std::filesystem::path& runDir, const Manifest& initial, int rank);

std::string newRunId();
std::string isoTimestampUtc();

}  // namespace meshscope
