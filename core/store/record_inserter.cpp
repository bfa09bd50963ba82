#include "core/store/record_inserter.h"

#include <bit>
#include <nlohmann/json.hpp>
#include <string>

#include "core/store/schema.h"

namespace meshscope {

using namespace schema;  // the tables

namespace {

template <typename T>
std::string jsonArray(const std::vector<T>& values) {
    return nlohmann::json(values).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void RecordInserter::createSchema(sql::Db& db) {
    db.exec("PRAGMA page_size=8192");
    db.exec("PRAGMA journal_mode=WAL");
    db.exec("PRAGMA application_id=" + std::to_string(schema::kApplicationId));
    db.exec("PRAGMA user_version=" + std::to_string(schema::kSchemaVersion));
    sql::Transaction tx(db);
    db.exec(schema::schemaSql());
    tx.commit();
}

RecordInserter::RecordInserter(sql::Db& db)
    : m_meta(db, schema::insertSql(kMeta, true)),
      m_string(db, schema::insertSql(kStrings, true)),
      m_frame(db, schema::insertSql(kStackFrames, true)),
      m_mesh(db, schema::insertSql(kMeshes, true)),
      m_tensor(db, schema::insertSql(kTensors, true)),
      m_opChunk(db, schema::insertSql(kOpChunks)),
      m_operand(db, schema::insertSql(kIncidentOperands, true)),
      m_collective(db, schema::insertSql(kCollectives, true)),
      m_optimizerStep(db, schema::insertSql(kOptimizerSteps)),
      m_incident(db, schema::insertSql(kIncidents)),
      m_deviceTime(db, schema::insertSql(kDeviceTimes, true)),
      m_replica(db, schema::insertSql(kReplicas, true)),
      m_drop(db, schema::insertSql(kDrops) + " ON CONFLICT (reason) DO UPDATE SET " +
                     "count=excluded.count") {}

void RecordInserter::insert(const Record& record) {
    std::visit([this](const auto& r) { insertRow(r); }, record);
}

void RecordInserter::insertPending(const StringInterner::Pending& pending) {
    for (const auto& s : pending.strings)
        m_string.bindId(kStrings.param("id"), s.id).bind(kStrings.param("text"), s.text).run();
    for (const auto& stack : pending.stacks) {
        for (size_t depth = 0; depth < stack.frames.size(); ++depth) {
            const Frame& f = stack.frames[depth];
            m_frame.bindId(kStackFrames.param("stack_id"), stack.id)
                .bind(kStackFrames.param("depth"), int64_t(depth))
                .bind(kStackFrames.param("file_id"), f.file.value())
                .bind(kStackFrames.param("line"), int64_t(f.line))
                .bind(kStackFrames.param("function_id"), f.function.value())
                .run();
        }
    }
}

void RecordInserter::writeMeta(std::string_view key, std::string_view value) {
    m_meta.bind(kMeta.param("key"), key).bind(kMeta.param("value"), value).run();
}

void RecordInserter::writeDrops(const std::array<uint64_t, kDropReasonCount>& counts,
                                bool includeZero) {
    for (int i = 0; i < kDropReasonCount; ++i) {
        if (counts[i] == 0 && !includeZero) continue;
        m_drop.bind(kDrops.param("reason"), toString(DropReason(i)))
            .bind(kDrops.param("count"), int64_t(counts[i]))
            .run();
    }
}

void RecordInserter::insertRow(const MetaRecord& r) {
    writeMeta(r.key, r.value);
}

void RecordInserter::insertRow(const MeshRecord& r) {
    constexpr auto& t = kMeshes;
    m_mesh.bindId(t.param("id"), r.id).bind(t.param("device_type"), r.deviceType);
    m_mesh.bind(t.param("shape"), jsonArray(r.shape));
    m_mesh.bind(t.param("dim_names"), jsonArray(r.dimNames));
    m_mesh.bind(t.param("ranks"), jsonArray(r.ranks)).run();
}

void RecordInserter::insertRow(const TensorRecord& r) {
    constexpr auto& t = kTensors;
    m_tensor.bindId(t.param("id"), r.id).bindId(t.param("dtype_id"), r.dtype);
    m_tensor.bindId(t.param("global_shape_id"), r.globalShape);
    m_tensor.bindId(t.param("local_shape_id"), r.localShape);
    m_tensor.bindId(t.param("device_id"), r.device).bindId(t.param("mesh_id"), r.mesh);
    m_tensor.bindId(t.param("placements_id"), r.placements).bindId(t.param("label_id"), r.label);
    m_tensor.bindId(t.param("created_stack_id"), r.createdAt).bind(t.param("numel"), r.numel);
    m_tensor.bind(t.param("is_dtensor"), int64_t(r.isDTensor)).run();
}

void RecordInserter::insertOpChunk(const OpChunkEncoder& chunk) {
    const OpChunkBounds& b = chunk.bounds();
    constexpr auto& t = kOpChunks;
    m_opChunk.bindId(t.param("first_seq"), b.firstSeq).bindId(t.param("last_seq"), b.lastSeq);
    m_opChunk.bind(t.param("count"), b.count).bind(t.param("min_start_ns"), b.minStartNs);
    m_opChunk.bind(t.param("max_start_ns"), b.maxStartNs).bind(t.param("max_end_ns"), b.maxEndNs);
    m_opChunk.bind(t.param("min_step"), b.minStep).bind(t.param("max_step"), b.maxStep);
    m_opChunk.bindBlob(t.param("data"), chunk.bytes()).run();
}

void RecordInserter::insertRow(const CollectiveRecord& r) {
    constexpr auto& t = kCollectives;
    auto& s = m_collective;
    s.bindId(t.param("seq"), r.seq).bindId(t.param("op_seq"), r.op);
    s.bind(t.param("kind_id"), r.kind.value()).bindId(t.param("group_id"), r.group);
    s.bindId(t.param("src_placements_id"), r.srcPlacements);
    s.bindId(t.param("dst_placements_id"), r.dstPlacements).bind(t.param("bytes"), r.bytes);
    s.bind(t.param("start_ns"), r.startNs).bind(t.param("end_ns"), r.endNs);
    s.bind(t.param("thread"), int64_t(r.thread)).bind(t.param("step"), r.step);
    s.bind(t.param("issued_ns"), r.issuedNs).bindId(t.param("stack_id"), r.stack);
    s.bind(t.param("state"), int64_t(r.state)).bindId(t.param("error_id"), r.error).run();
}

void RecordInserter::insertRow(const OptimizerStepRecord& r) {
    constexpr auto& t = kOptimizerSteps;
    m_optimizerStep.bindNull(t.param("id")).bind(t.param("step"), r.step);
    m_optimizerStep.bindId(t.param("optimizer_id"), r.optimizer);
    m_optimizerStep.bind(t.param("start_ns"), r.startNs).bind(t.param("end_ns"), r.endNs);
    m_optimizerStep.bind(t.param("param_count"), r.paramCount).run();
}

void RecordInserter::insertRow(const DeviceTimeRecord& r) {
    bool collective = std::holds_alternative<CollectiveSeq>(r.subject);
    int64_t seq = std::visit([](auto id) { return id.value(); }, r.subject);
    constexpr auto& t = kDeviceTimes;
    m_deviceTime.bind(t.param("subject"), int64_t(collective)).bind(t.param("seq"), seq);
    m_deviceTime.bind(t.param("duration_ns"), r.durationNs);
    if (r.deviceStartNs)
        m_deviceTime.bind(t.param("device_start_ns"), *r.deviceStartNs);
    else
        m_deviceTime.bindNull(t.param("device_start_ns"));
    m_deviceTime.run();
}

void RecordInserter::insertRow(const ReplicaRecord& r) {
    constexpr auto& t = kReplicas;
    m_replica.bind(t.param("step"), r.step).bindId(t.param("name_id"), r.name);
    m_replica.bindId(t.param("role_id"), r.role).bindId(t.param("replica_key_id"), r.replicaKey);
    m_replica.bindId(t.param("placements_id"), r.placements).bindId(t.param("module_id"), r.module);
    m_replica.bind(t.param("fingerprint"), int64_t(r.fingerprint)).bind(t.param("numel"), r.numel);
    m_replica.run();
}

void RecordInserter::insertRow(const IncidentRecord& r) {
    constexpr auto& t = kIncidents;
    auto& s = m_incident;
    s.bindId(t.param("seq"), r.seq).bind(t.param("time_ns"), r.timeNs);
    s.bind(t.param("step"), r.step).bind(t.param("thread"), int64_t(r.thread));
    s.bind(t.param("op_id"), r.op.value()).bind(t.param("operand_index"), int64_t(r.operandIndex));
    s.bindId(t.param("plain_tensor_id"), r.plainTensor);
    s.bind(t.param("origin"), std::string_view(&reinterpret_cast<const char&>(r.origin), 1));
    s.bindId(t.param("evidence_id"), r.evidence).bindId(t.param("policy_rule_id"), r.policyRule);
    s.bind(t.param("action"), int64_t(r.action)).bind(t.param("outcome"), int64_t(r.outcome));
    s.bindId(t.param("error_id"), r.error);
    if (r.fingerprint)
        s.bind(t.param("fingerprint"), std::bit_cast<int64_t>(*r.fingerprint));
    else
        s.bindNull(t.param("fingerprint"));
    s.bindId(t.param("promoted_placements_id"), r.promotedPlacements);
    s.bindId(t.param("stack_id"), r.stack).bind(t.param("kind"), int64_t(r.kind));
    s.bindId(t.param("detail_id"), r.detail).run();
    constexpr auto& o = kIncidentOperands;
    for (const OperandRecord& op : r.operands) {
        m_operand.bindId(o.param("incident_seq"), r.seq).bind(o.param("role"), int64_t(op.role));
        m_operand.bind(o.param("idx"), int64_t(op.index)).bind(o.param("kind"), int64_t(op.kind));
        m_operand.bindId(o.param("tensor_id"), op.tensor);
        if (op.kind == OperandKind::Scalar)
            m_operand.bind(o.param("scalar"), op.scalar);
        else
            m_operand.bindNull(o.param("scalar"));
        m_operand.bindId(o.param("placements_id"), op.placements).run();
    }
}

}  // namespace meshscope
