#pragma once

// Combines run directories recorded on several nodes (each holds the ranks
// of its node and a manifest with the shared run id) into one run.

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace meshscope {

struct MergeResult {
    int worldSize = 0;
    std::vector<int> ranks;         // ranks in the merged run
    std::vector<int> missingRanks;  // below world size, in no input (the first ones)
    int64_t missingRankCount = 0;   // all of them
};

// Throws StoreError naming the file for an unreadable input, inputs of
// different runs, or a rank present in two inputs; MergeTargetError when
// `out` exists and is not empty. Copies (never moves) the rank files.
MergeResult mergeRuns(const std::vector<std::filesystem::path>& inputs,
                      const std::filesystem::path& out);

class MergeTargetError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace meshscope
