#include "core/store/schema.h"

namespace meshscope::schema {

std::string schemaSql() {
    std::string sql;
    sql += createSql(kMeta) + createSql(kStrings) + createSql(kStackFrames) + createSql(kMeshes);
    sql += createSql(kTensors) + createSql(kOpChunks);
    sql += indexSql("op_chunks_by_start", kOpChunks, kOpChunks["min_start_ns"]);
    sql += indexSql("op_chunks_by_step", kOpChunks, kOpChunks["min_step"]);
    sql += createSql(kIncidentOperands) + createSql(kCollectives);
    sql += indexSql("collectives_by_start", kCollectives, kCollectives["start_ns"]);
    sql += createSql(kOptimizerSteps);
    sql += indexSql("optimizer_steps_by_step", kOptimizerSteps, kOptimizerSteps["step"]);
    sql += createSql(kIncidents);
    sql += indexSql("incidents_by_time", kIncidents, kIncidents["time_ns"]);
    sql += indexSql("incidents_by_step", kIncidents, kIncidents["step"]);
    sql += createSql(kDrops) + createSql(kDeviceTimes) + createSql(kReplicas);
    return sql;
}

}  // namespace meshscope::schema
