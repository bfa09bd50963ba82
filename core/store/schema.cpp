#include "core/store/schema.h"

namespace meshscope::schema {

std::string schemaSql() {
    std::string sql;
    sql += createSql(kMeta) + createSql(kStrings) + createSql(kStackFrames) + createSql(kMeshes);
    sql += createSql(kTensors) + createSql(kOpChunks);
    sql += indexSql(kIndexNames[0], kOpChunks, kOpChunks["min_start_ns"]);
    sql += indexSql(kIndexNames[1], kOpChunks, kOpChunks["min_step"]);
    sql += createSql(kIncidentOperands) + createSql(kCollectives);
    sql += indexSql(kIndexNames[2], kCollectives, kCollectives["start_ns"]);
    sql += createSql(kOptimizerSteps);
    sql += indexSql(kIndexNames[3], kOptimizerSteps, kOptimizerSteps["step"]);
    sql += createSql(kIncidents);
    sql += indexSql(kIndexNames[4], kIncidents, kIncidents["time_ns"]);
    sql += indexSql(kIndexNames[5], kIncidents, kIncidents["step"]);
    sql += createSql(kDrops) + createSql(kDeviceTimes) + createSql(kReplicas);
    return sql;
}

namespace {

template <size_t N>
TableShape shapeOf(const Table<N>& t, bool required = true) {
    TableShape shape{t.name, {}, required};
    for (const Column& c : t.columns)
        shape.columns.push_back(c.name);
    return shape;
}

}  // namespace

std::vector<TableShape> tableShapes() {
    return {shapeOf(kMeta),
            shapeOf(kStrings),
            shapeOf(kStackFrames),
            shapeOf(kMeshes),
            shapeOf(kTensors),
            shapeOf(kOpChunks),
            shapeOf(kIncidentOperands),
            shapeOf(kCollectives),
            shapeOf(kOptimizerSteps),
            shapeOf(kIncidents),
            shapeOf(kDrops),
            shapeOf(kDeviceTimes, false),
            shapeOf(kReplicas, false)};
}

}  // namespace meshscope::schema
