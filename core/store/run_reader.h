#pragma once

// Opens a whole run: a run directory (manifest + rank files) or a single rank
// file. Readable ranks are opened; everything that is not (a missing rank, a
// damaged file, a bad manifest) is collected in problems() so a caller can
// show what is readable and say what is not.

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/store/manifest.h"
#include "core/store/rank_reader.h"
#include "core/store/store_error.h"

namespace meshscope {

// Ranks below `worldSize` that are not in `present`: how many, and the
// first `limit` of them. Found from the gaps between the present ranks, so
// the cost follows what is present, never a world size a file declares.
struct MissingRanks {
    std::vector<int> listed;  // ascending
    int64_t count = 0;
};
MissingRanks findMissingRanks(const std::set<int>& present, int worldSize, size_t limit);

// How many missing ranks problems, findings and reports name one by one;
// the rest are one line with their count.
inline constexpr size_t kMissingRanksListed = 64;

// For a process that reads many rank files at once (`check` of 4,096 ranks,
// the GUI): SQLite makes no bulk page-cache allocation per file opened, and
// the soft limit of open files is raised to the hard one.
// Call first thing in main(), before threads start; later it does nothing.
void prepareForManyReaders();

class RunReader {
  public:
    // Throws StoreError only when nothing can be read at all (no such path,
    // no manifest and no rank file).
    static RunReader open(const std::filesystem::path& path);

    const std::filesystem::path& directory() const { return m_dir; }
    // The manifest, when one was found and parsed.
    const std::optional<Manifest>& manifest() const { return m_manifest; }
    // The manifest's run id, else the first readable rank's ("" for none).
    std::string runId() const {
        return m_manifest ? m_manifest->runId : m_ranks.empty() ? "" : m_ranks.front().info().runId;
    }
    // Readable ranks, ascending by rank.
    std::vector<RankReader>& ranks() { return m_ranks; }
    const std::vector<RankReader>& ranks() const { return m_ranks; }
    // What could not be read, one StoreError per file or missing rank.
    const std::vector<StoreError>& problems() const { return m_problems; }
    // Drops a rank found damaged after it opened (RankReader::verify): it
    // becomes a problem, as if it had not opened.
    void dropRank(size_t index, const StoreError& why);
    // World size from the manifest, or the largest seen in a rank file.
    int worldSize() const;
    // How each rank ended, as `meshscope record` wrote it in launch.json
    // ("exited with 1", "killed by SIGKILL from meshscope after the 10 s
    // grace"); empty when the run was not launched by `record`.
    const std::map<int, std::string>& launchEnds() const { return m_launchEnds; }
    // What each rank told `meshscope record` about its recording (launch.json
    // "recording"): that it closed, and its final drop counts, which its
    // file may lack when the disk took nothing more.
    struct LaunchRecording {
        bool closed = false;
        std::map<std::string, uint64_t> drops;
    };
    const std::map<int, LaunchRecording>& launchRecording() const { return m_launchRecording; }

  private:
    std::filesystem::path m_dir;
    std::optional<Manifest> m_manifest;
    std::vector<RankReader> m_ranks;
    std::vector<StoreError> m_problems;
    std::map<int, std::string> m_launchEnds;
    std::map<int, LaunchRecording> m_launchRecording;
};

}  // namespace meshscope
