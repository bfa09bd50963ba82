#pragma once

// Layout of a run directory: manifest.json plus rank-NNNNN.msdb per rank;
// and the name a run directory gets when none is given.

#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

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

// Default run directories: <working dir>/meshscope-runs/<name>, named by
// `meshscope record`, attach() and the pytest plugin alike (the Python package
// calls these through meshscope._capture).
inline constexpr std::string_view kRunsFolder = "meshscope-runs";

// The name of a run started at local time `when`: "[PREFIX-]YYYYmmdd-HHMMSS",
// or "[PREFIX-]YYYYmmdd-JOB" given a job (see defaultRunJob()).
std::string defaultRunName(std::time_t when, std::string_view prefix = {},
                           std::optional<std::string_view> job = std::nullopt);
// <workingDir>/meshscope-runs/<name>.
std::filesystem::path defaultRunDirectory(const std::filesystem::path& workingDir,
                                          std::string_view name);
// What the ranks of one job name their run by when they have no process group
// to agree on a time with: TORCHELASTIC_RUN_ID, unless unset or "none", else
// "port" + MASTER_PORT ("port0" when unset). Arguments: those variables.
std::string defaultRunJob(std::optional<std::string_view> elasticRunId,
                          std::optional<std::string_view> masterPort);

}  // namespace meshscope
