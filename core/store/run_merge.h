#pragma once

// Combines run directories recorded on several nodes (each holds the ranks
// of its node and a manifest with the shared run id) into one run.

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace meshscope {

struct MergeResult {
    int worldSize = 0;
    std::vector<int> ranks;         // ranks in the merged run
    std::vector<int> missingRanks;  // below world size, in no input (the first ones)
    int64_t missingRankCount = 0;   // all of them
    // "rank 3 of node1/run (pid 4242 on this host)": ranks whose writer had
    // not closed its file and still runs; the copy holds what it committed.
    std::vector<std::string> liveRanks;
};

// Throws StoreError naming the file for an unreadable input, inputs of
// different runs, or a rank present in two inputs; MergeTargetError when
// `out` exists and is not empty. Copies (never moves) the rank files, and
// each input's launch.json entries of the ranks it gave.
MergeResult mergeRuns(const std::vector<std::filesystem::path>& inputs,
                      const std::filesystem::path& out);

class MergeTargetError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace meshscope
