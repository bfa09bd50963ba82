#pragma once

// manifest.json of a run directory: what the run is, independent of any rank
// file. Ranks register themselves (under a file lock, since all ranks of a
// node share the directory); readers compare it with the rank files present.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
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
    // Who records into the folder: the launcher's run id, or what the ranks
    // of one job share (see registerRank). Empty: not checked.
    std::string job;

    // Throws StoreError naming the file for a missing, unparsable or
    // incomplete manifest.
    static Manifest read(const std::filesystem::path& file);
    // Atomic replace (write to a temporary file, then rename).
    void write(const std::filesystem::path& file) const;
};

// Adds `rank` to the manifest of `runDir`, creating the manifest from
// `initial` if none exists. Safe against concurrent ranks (flock). With
// `initial.job` set, the folder is claimed for that job first
// (claimRunDirectory); one claimed by another job throws RunTaken.
Manifest registerRank(const std::filesystem::path& runDir, const Manifest& initial, int rank);

// The file that says which job records into a run folder.
inline constexpr std::string_view kJobClaimName = ".meshscope-job";
// Claims `runDir` for `job`: true when it was free (the claim is made,
// created exclusively, never through a symlink) or already this job's;
// false when another job holds it (`holder` then says which). A claim that
// cannot be written (a full disk) counts as made: the rank file's own
// creation says what is wrong. Throws StoreError for a claim file that is
// not a regular file.
bool claimRunDirectory(const std::filesystem::path& runDir, const std::string& job,
                       std::string* holder = nullptr);

// Creates `dir` and its missing parents with mode 0750 (less the umask):
// run folders are the owner's and the group's. Throws StoreError.
void createRunDirectories(const std::filesystem::path& dir);

std::string newRunId();
std::string isoTimestampUtc();

}  // namespace meshscope
