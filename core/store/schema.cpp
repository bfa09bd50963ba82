#include "core/store/schema.h"

namespace meshscope::schema {

// Times are monotonic ns since the rank's clock origin (meta: clock_origin_*).
// Interned text columns end in _id and reference strings(id).
const std::string_view kSchemaSql = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE stack_frames (
  stack_id INTEGER NOT NULL, depth INTEGER NOT NULL,
  file_id INTEGER NOT NULL, line INTEGER NOT NULL, function_id INTEGER NOT NULL,
  PRIMARY KEY (stack_id, depth)) WITHOUT ROWID;
CREATE TABLE meshes (
  id INTEGER PRIMARY KEY, device_type TEXT NOT NULL,
  shape TEXT NOT NULL, dim_names TEXT NOT NULL, ranks TEXT NOT NULL);
CREATE TABLE tensors (
  id INTEGER PRIMARY KEY, dtype_id INTEGER, global_shape_id INTEGER, local_shape_id INTEGER,
  device_id INTEGER, mesh_id INTEGER, placements_id INTEGER, label_id INTEGER,
  created_stack_id INTEGER, numel INTEGER NOT NULL, is_dtensor INTEGER NOT NULL);
-- Ops in chunks of consecutive seqs (core/store/op_chunk.h): bounds as
-- columns, the ops varint-encoded in data.
CREATE TABLE op_chunks (
  first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, count INTEGER NOT NULL,
  min_start_ns INTEGER NOT NULL, max_start_ns INTEGER NOT NULL, max_end_ns INTEGER NOT NULL,
  min_step INTEGER NOT NULL, max_step INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX op_chunks_by_start ON op_chunks (min_start_ns);
CREATE INDEX op_chunks_by_step ON op_chunks (min_step);
CREATE TABLE incident_operands (
  incident_seq INTEGER NOT NULL, role INTEGER NOT NULL, idx INTEGER NOT NULL,
  kind INTEGER NOT NULL, tensor_id INTEGER, scalar REAL, placements_id INTEGER,
  PRIMARY KEY (incident_seq, role, idx)) WITHOUT ROWID;
-- One row per collective, written when its life ended; seq is the order
-- the rank issued them in (rows arrive out of seq order; a missing seq is a
-- lost record). start_ns: issued; issued_ns: the issuing call returned;
-- end_ns: completed (state 0), failed (1), or when the rank's recording
-- ended while it was pending (2); unwaited (3): released without a wait.
CREATE TABLE collectives (
  seq INTEGER PRIMARY KEY, op_seq INTEGER, kind_id INTEGER NOT NULL, group_id INTEGER,
  src_placements_id INTEGER, dst_placements_id INTEGER, bytes INTEGER NOT NULL,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, thread INTEGER NOT NULL,
  step INTEGER NOT NULL, issued_ns INTEGER NOT NULL, stack_id INTEGER,
  state INTEGER NOT NULL, error_id INTEGER);
CREATE INDEX collectives_by_start ON collectives (start_ns);
CREATE TABLE optimizer_steps (
  id INTEGER PRIMARY KEY, step INTEGER NOT NULL, optimizer_id INTEGER,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, param_count INTEGER NOT NULL);
CREATE INDEX optimizer_steps_by_step ON optimizer_steps (step);
CREATE TABLE incidents (
  seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, step INTEGER NOT NULL,
  thread INTEGER NOT NULL, op_id INTEGER NOT NULL, operand_index INTEGER NOT NULL,
  plain_tensor_id INTEGER, origin TEXT NOT NULL, evidence_id INTEGER, policy_rule_id INTEGER,
  action INTEGER NOT NULL, outcome INTEGER NOT NULL, error_id INTEGER, fingerprint INTEGER,
  promoted_placements_id INTEGER, stack_id INTEGER, kind INTEGER NOT NULL, detail_id INTEGER);
CREATE INDEX incidents_by_time ON incidents (time_ns);
CREATE INDEX incidents_by_step ON incidents (step);
CREATE TABLE drops (reason TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID;
-- GPU time of ops (subject 0, seq = op seq) and collectives (subject 1,
-- seq = collectives.seq); device_start_ns on the device's own clock, NULL
-- when only the duration is known. Optional (kDeviceTimesTable).
CREATE TABLE device_times (
  subject INTEGER NOT NULL, seq INTEGER NOT NULL, duration_ns INTEGER NOT NULL,
  device_start_ns INTEGER, PRIMARY KEY (subject, seq)) WITHOUT ROWID;
)sql";

}  // namespace meshscope::schema
