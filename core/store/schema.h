#pragma once

// The one home of the rank-file format: its version, its identification and
// its tables. Writers create files from kSchemaSql; readers check
// kApplicationId, kSchemaVersion and kRequiredTables before trusting a file.

#include <array>
#include <cstdint>
#include <string_view>

namespace meshscope::schema {

// PRAGMA application_id of every rank file: 'MSCP'.
inline constexpr int32_t kApplicationId = 0x4D534350;

// PRAGMA user_version. Bump on any incompatible change; readers refuse other
// versions with a message naming both numbers.
// v2: incidents.kind and detail_id (incidents other than mixed tensors).
// v3: collectives recorded once their life ended, in issue order: issued_ns,
//     stack_id, state, error_id.
inline constexpr int32_t kSchemaVersion = 3;

// Name of the per-rank database inside a run directory.
inline constexpr std::string_view kRankFilePrefix = "rank-";
inline constexpr std::string_view kRankFileSuffix = ".msdb";
inline constexpr std::string_view kManifestName = "manifest.json";

// DDL of a fresh rank file (tables and indexes; pragmas are set by the writer).
extern const std::string_view kSchemaSql;

inline constexpr std::array<std::string_view, 11> kRequiredTables = {
    "meta",      "strings",           "stack_frames", "meshes",
    "tensors",   "op_chunks",         "collectives",  "optimizer_steps",
    "incidents", "incident_operands", "drops",
};

// A table added to v1 without changing its version: earlier readers ignore
// it, and this build reads a file without it as having no device times.
inline constexpr std::string_view kDeviceTimesTable = "device_times";

// Meta keys the writer maintains so readers can bound index range scans: the
// largest (max_end_ns - min_start_ns) and (max_step - min_step) of any op chunk.
inline constexpr std::string_view kMetaChunkTimeReach = "max_chunk_time_reach_ns";
inline constexpr std::string_view kMetaChunkStepReach = "max_chunk_step_reach";
// The rank-local ns of the first record lost (a full queue, a write error):
// from there on its sequences may have gaps, and are not compared.
inline constexpr std::string_view kMetaFirstLossNs = "drops.first_loss_ns";

}  // namespace meshscope::schema
