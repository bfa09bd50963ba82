#pragma once

// The one home of the rank-file format: its version, its identification and
// its tables. Writers create files from schemaSql(); readers check
// kApplicationId, kSchemaVersion and kRequiredTables before trusting a file.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// ---- tables ----
//
// Each table's columns are declared once, here, in file order. The writer's
// DDL (schemaSql), its INSERT statements (insertSql) and the reader's
// SELECTs (selectSql) are made from these declarations, and code binds and
// reads a column by its name: `kCollectives["bytes"]` is the column's
// position, checked when compiling (a name the table lacks does not build).

struct Column {
    std::string_view name;
    std::string_view type;  // its SQL type and constraints
};

template <size_t N>
struct Table {
    std::string_view name;
    std::array<Column, N> columns;
    std::string_view key;  // a table constraint ("PRIMARY KEY (a, b)"), or empty
    bool withoutRowid = false;
    std::string_view note;  // what the table holds, written into the DDL as a comment

    // The position of `column` in the table's rows and in selectSql's result
    // (0-based, as SQLite's columns are read).
    consteval int operator[](std::string_view column) const {
        for (size_t i = 0; i < N; ++i)
            if (columns[i].name == column) return int(i);
        throw "meshscope::schema: no such column";  // not a constant: does not compile
    }
    // Its parameter in insertSql's statement (1-based, as SQLite binds).
    consteval int param(std::string_view column) const { return (*this)[column] + 1; }
};

template <size_t N>
consteval Table<N> table(std::string_view name, const Column (&columns)[N],
                         std::string_view key = {}, bool withoutRowid = false,
                         std::string_view note = {}) {
    Table<N> t{name, {}, key, withoutRowid, note};
    for (size_t i = 0; i < N; ++i)
        t.columns[i] = columns[i];
    return t;
}

inline constexpr auto kMeta =
    table("meta", {{"key", "TEXT PRIMARY KEY"}, {"value", "TEXT NOT NULL"}}, {}, true);
inline constexpr auto kStrings =
    table("strings", {{"id", "INTEGER PRIMARY KEY"}, {"text", "TEXT NOT NULL"}});
inline constexpr auto kStackFrames = table("stack_frames",
                                           {{"stack_id", "INTEGER NOT NULL"},
                                            {"depth", "INTEGER NOT NULL"},
                                            {"file_id", "INTEGER NOT NULL"},
                                            {"line", "INTEGER NOT NULL"},
                                            {"function_id", "INTEGER NOT NULL"}},
                                           "PRIMARY KEY (stack_id, depth)", true);
inline constexpr auto kMeshes = table("meshes", {{"id", "INTEGER PRIMARY KEY"},
                                                 {"device_type", "TEXT NOT NULL"},
                                                 {"shape", "TEXT NOT NULL"},
                                                 {"dim_names", "TEXT NOT NULL"},
                                                 {"ranks", "TEXT NOT NULL"}});
inline constexpr auto kTensors = table("tensors", {{"id", "INTEGER PRIMARY KEY"},
                                                   {"dtype_id", "INTEGER"},
                                                   {"global_shape_id", "INTEGER"},
                                                   {"local_shape_id", "INTEGER"},
                                                   {"device_id", "INTEGER"},
                                                   {"mesh_id", "INTEGER"},
                                                   {"placements_id", "INTEGER"},
                                                   {"label_id", "INTEGER"},
                                                   {"created_stack_id", "INTEGER"},
                                                   {"numel", "INTEGER NOT NULL"},
                                                   {"is_dtensor", "INTEGER NOT NULL"}});
inline constexpr auto kOpChunks =
    table("op_chunks",
          {{"first_seq", "INTEGER PRIMARY KEY"},
           {"last_seq", "INTEGER NOT NULL"},
           {"count", "INTEGER NOT NULL"},
           {"min_start_ns", "INTEGER NOT NULL"},
           {"max_start_ns", "INTEGER NOT NULL"},
           {"max_end_ns", "INTEGER NOT NULL"},
           {"min_step", "INTEGER NOT NULL"},
           {"max_step", "INTEGER NOT NULL"},
           {"data", "BLOB NOT NULL"}},
          {}, false,
          "Ops in chunks of consecutive seqs (core/store/op_chunk.h): bounds as columns, the ops "
          "varint-encoded in data.");
inline constexpr auto kIncidentOperands = table("incident_operands",
                                                {{"incident_seq", "INTEGER NOT NULL"},
                                                 {"role", "INTEGER NOT NULL"},
                                                 {"idx", "INTEGER NOT NULL"},
                                                 {"kind", "INTEGER NOT NULL"},
                                                 {"tensor_id", "INTEGER"},
                                                 {"scalar", "REAL"},
                                                 {"placements_id", "INTEGER"}},
                                                "PRIMARY KEY (incident_seq, role, idx)", true);
inline constexpr auto kCollectives = table(
    "collectives",
    {{"seq", "INTEGER PRIMARY KEY"},
     {"op_seq", "INTEGER"},
     {"kind_id", "INTEGER NOT NULL"},
     {"group_id", "INTEGER"},
     {"src_placements_id", "INTEGER"},
     {"dst_placements_id", "INTEGER"},
     {"bytes", "INTEGER NOT NULL"},
     {"start_ns", "INTEGER NOT NULL"},
     {"end_ns", "INTEGER NOT NULL"},
     {"thread", "INTEGER NOT NULL"},
     {"step", "INTEGER NOT NULL"},
     {"issued_ns", "INTEGER NOT NULL"},
     {"stack_id", "INTEGER"},
     {"state", "INTEGER NOT NULL"},
     {"error_id", "INTEGER"}},
    {}, false,
    "One row per collective, written when its life ended; seq is the order the rank issued them "
    "in (rows arrive out of seq order; a missing seq is a lost record). start_ns: issued; "
    "issued_ns: the issuing call returned; end_ns: completed (state 0), failed (1), or when the "
    "rank's recording ended while it was pending (2); unwaited (3): released without a wait.");
inline constexpr auto kOptimizerSteps =
    table("optimizer_steps", {{"id", "INTEGER PRIMARY KEY"},
                              {"step", "INTEGER NOT NULL"},
                              {"optimizer_id", "INTEGER"},
                              {"start_ns", "INTEGER NOT NULL"},
                              {"end_ns", "INTEGER NOT NULL"},
                              {"param_count", "INTEGER NOT NULL"}});
inline constexpr auto kIncidents = table("incidents", {{"seq", "INTEGER PRIMARY KEY"},
                                                       {"time_ns", "INTEGER NOT NULL"},
                                                       {"step", "INTEGER NOT NULL"},
                                                       {"thread", "INTEGER NOT NULL"},
                                                       {"op_id", "INTEGER NOT NULL"},
                                                       {"operand_index", "INTEGER NOT NULL"},
                                                       {"plain_tensor_id", "INTEGER"},
                                                       {"origin", "TEXT NOT NULL"},
                                                       {"evidence_id", "INTEGER"},
                                                       {"policy_rule_id", "INTEGER"},
                                                       {"action", "INTEGER NOT NULL"},
                                                       {"outcome", "INTEGER NOT NULL"},
                                                       {"error_id", "INTEGER"},
                                                       {"fingerprint", "INTEGER"},
                                                       {"promoted_placements_id", "INTEGER"},
                                                       {"stack_id", "INTEGER"},
                                                       {"kind", "INTEGER NOT NULL"},
                                                       {"detail_id", "INTEGER"}});
inline constexpr auto kDrops =
    table("drops", {{"reason", "TEXT PRIMARY KEY"}, {"count", "INTEGER NOT NULL"}}, {}, true);
// A table added to v1 without changing its version: earlier readers ignore
// it, and this build reads a file without it as having no device times.
inline constexpr auto kDeviceTimes =
    table("device_times",
          {{"subject", "INTEGER NOT NULL"},
           {"seq", "INTEGER NOT NULL"},
           {"duration_ns", "INTEGER NOT NULL"},
           {"device_start_ns", "INTEGER"}},
          "PRIMARY KEY (subject, seq)", true,
          "GPU time of ops (subject 0, seq = op seq) and collectives (subject 1, seq = "
          "collectives.seq); device_start_ns on the device's own clock, NULL when only the "
          "duration is known. Optional: a file without it has no device times.");

// Added like device_times: optional, no version change.
inline constexpr auto kReplicas =
    table("replicas",
          {{"step", "INTEGER NOT NULL"},
           {"name_id", "INTEGER NOT NULL"},
           {"role_id", "INTEGER NOT NULL"},
           {"replica_key_id", "INTEGER"},
           {"placements_id", "INTEGER"},
           {"module_id", "INTEGER"},
           {"fingerprint", "INTEGER NOT NULL"},
           {"numel", "INTEGER NOT NULL"}},
          "PRIMARY KEY (step, name_id, role_id)", true,
          "Content fingerprints, at sampled optimizer steps, of parameters, gradients and "
          "optimizer states that ranks with the same name and replica key must hold equal. "
          "Optional: a file without it has no replica checks.");

// The tables a reader requires (every table but device_times and replicas).
inline constexpr std::array<std::string_view, 11> kRequiredTables = {
    kMeta.name,      kStrings.name,          kStackFrames.name, kMeshes.name,
    kTensors.name,   kOpChunks.name,         kCollectives.name, kOptimizerSteps.name,
    kIncidents.name, kIncidentOperands.name, kDrops.name,
};

// What a rank file may hold, for the reader's schema check: each table with
// its columns in file order (a file written before an optional table existed
// lacks it), and the indexes schemaSql creates.
struct TableShape {
    std::string_view name;
    std::vector<std::string_view> columns;
    bool required = true;
};
std::vector<TableShape> tableShapes();
inline constexpr std::array<std::string_view, 6> kIndexNames = {
    "op_chunks_by_start",      "op_chunks_by_step", "collectives_by_start",
    "optimizer_steps_by_step", "incidents_by_time", "incidents_by_step",
};

// DDL of a fresh rank file: every table above and the indexes; pragmas are
// set by the writer. Times are monotonic ns since the rank's clock origin
// (meta: clock_origin_*); interned text columns end in _id and reference
// strings(id).
std::string schemaSql();

// "CREATE TABLE name (columns..., key) [WITHOUT ROWID];" with the note as a comment.
template <size_t N>
std::string createSql(const Table<N>& t);
// "INSERT [OR REPLACE] INTO name (every column) VALUES (?1, ...)": bind each
// column at Table::param(name).
template <size_t N>
std::string insertSql(const Table<N>& t, bool orReplace = false);
// "SELECT every column FROM name " (then WHERE/ORDER BY): read each column
// at Table::operator[](name).
template <size_t N>
std::string selectSql(const Table<N>& t);
// "CREATE INDEX name ON table (column);" for the column at `position`.
template <size_t N>
std::string indexSql(std::string_view name, const Table<N>& t, int position) {
    return "CREATE INDEX " + std::string(name) + " ON " + std::string(t.name) + " (" +
           std::string(t.columns[size_t(position)].name) + ");\n";
}

template <size_t N>
std::string createSql(const Table<N>& t) {
    std::string sql;
    if (!t.note.empty()) sql += "-- " + std::string(t.note) + "\n";
    sql += "CREATE TABLE " + std::string(t.name) + " (";
    for (size_t i = 0; i < N; ++i)
        sql +=
            (i ? ", " : "") + std::string(t.columns[i].name) + " " + std::string(t.columns[i].type);
    if (!t.key.empty()) sql += ", " + std::string(t.key);
    sql += t.withoutRowid ? ") WITHOUT ROWID;\n" : ");\n";
    return sql;
}

template <size_t N>
std::string insertSql(const Table<N>& t, bool orReplace) {
    std::string names, params;
    for (size_t i = 0; i < N; ++i) {
        names += (i ? ", " : "") + std::string(t.columns[i].name);
        params += (i ? ", ?" : "?") + std::to_string(i + 1);
    }
    return std::string(orReplace ? "INSERT OR REPLACE INTO " : "INSERT INTO ") +
           std::string(t.name) + " (" + names + ") VALUES (" + params + ")";
}

template <size_t N>
std::string selectSql(const Table<N>& t) {
    std::string sql = "SELECT ";
    for (size_t i = 0; i < N; ++i)
        sql += (i ? ", " : "") + std::string(t.columns[i].name);
    return sql + " FROM " + std::string(t.name) + " ";
}

// Meta keys the writer maintains so readers can bound index range scans: the
// largest (max_end_ns - min_start_ns) and (max_step - min_step) of any op chunk.
inline constexpr std::string_view kMetaChunkTimeReach = "max_chunk_time_reach_ns";
inline constexpr std::string_view kMetaChunkStepReach = "max_chunk_step_reach";
// The rank-local ns of the first record lost (a full queue, a write error):
// from there on its sequences may have gaps, and are not compared.
inline constexpr std::string_view kMetaFirstLossNs = "drops.first_loss_ns";

}  // namespace meshscope::schema
