#pragma once

// Layout of a run directory: manifest.json plus rank-NNNNN.msdb per rank.

#include <filesystem>
#include <memory>
#include <optional>

#include "core/store/manifest.h"
#include "core/store/rank_writer.h"

namespace meshscope {

std::filesystem::path rankFilePath(const std::filesystem::path& runDir, int rank);
// The rank encoded in a rank file's name, if it is one.
std::optional<int> rankFromFileName(const std::filesystem::path& file);

// Registers `rank` in the run's manifest (creating run directory and manifest
// as needed) and creates its rank file. The rank file carries the manifest's
// run id. Throws StoreError.
std::unique_ptr<RankWriter> createRankWriter(const std::filesystem::path& runDir,
                                             const Manifest& initial, int rank,
                                             WriterOptions options = {});

}  // namespace meshscope
