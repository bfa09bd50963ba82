#include "core/store/record_inserter.h"

#include <bit>
#include <nlohmann/json.hpp>
#include <string>

#include "core/store/schema.h"

namespace meshscope {
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
    db.exec(schema::kSchemaSql);
    tx.commit();
}

RecordInserter::RecordInserter(sql::Db& db)
    : m_meta(db, "INSERT OR REPLACE INTO meta VALUES (?1, ?2)"),
      m_string(db, "INSERT OR REPLACE INTO strings VALUES (?1, ?2)"),
      m_frame(db, "INSERT OR REPLACE INTO stack_frames VALUES (?1, ?2, ?3, ?4, ?5)"),
      m_mesh(db, "INSERT OR REPLACE INTO meshes VALUES (?1, ?2, ?3, ?4, ?5)"),
      m_tensor(db,
               "INSERT OR REPLACE INTO tensors VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
               "?11)"),
      m_opChunk(db, "INSERT INTO op_chunks VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
      m_operand(db, "INSERT OR REPLACE INTO incident_operands VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
      m_collective(
          db,
          "INSERT OR REPLACE INTO collectives VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
          "?11, ?12, ?13, ?14, ?15)"),
      m_optimizerStep(db,
                      "INSERT INTO optimizer_steps (step, optimizer_id, start_ns, end_ns, "
                      "param_count) VALUES (?1, ?2, ?3, ?4, ?5)"),
      m_incident(db,
                 "INSERT INTO incidents VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                 "?13, ?14, ?15, ?16, ?17, ?18)"),
      m_deviceTime(db, "INSERT OR REPLACE INTO device_times VALUES (?1, ?2, ?3, ?4)"),
      m_drop(db,
             "INSERT INTO drops VALUES (?1, ?2) ON CONFLICT (reason) DO UPDATE SET "
             "count=excluded.count") {}

void RecordInserter::insert(const Record& record) {
    std::visit([this](const auto& r) { insertRow(r); }, record);
}

void RecordInserter::insertPending(const StringInterner::Pending& pending) {
    for (const auto& s : pending.strings)
        m_string.bindId(1, s.id).bind(2, s.text).run();
    for (const auto& stack : pending.stacks) {
        for (size_t depth = 0; depth < stack.frames.size(); ++depth) {
            const Frame& f = stack.frames[depth];
            m_frame.bindId(1, stack.id).bind(2, int64_t(depth));
            m_frame.bind(3, f.file.value()).bind(4, int64_t(f.line)).bind(5, f.function.value());
            m_frame.run();
        }
    }
}

void RecordInserter::writeMeta(std::string_view key, std::string_view value) {
    m_meta.bind(1, key).bind(2, value).run();
}

void RecordInserter::writeDrops(const std::array<uint64_t, kDropReasonCount>& counts,
                                bool includeZero) {
    for (int i = 0; i < kDropReasonCount; ++i) {
        if (counts[i] == 0 && !includeZero) continue;
        m_drop.bind(1, toString(DropReason(i))).bind(2, int64_t(counts[i])).run();
    }
}

void RecordInserter::insertRow(const MetaRecord& r) {
    writeMeta(r.key, r.value);
}

void RecordInserter::insertRow(const MeshRecord& r) {
    m_mesh.bindId(1, r.id).bind(2, r.deviceType).bind(3, jsonArray(r.shape));
    m_mesh.bind(4, jsonArray(r.dimNames)).bind(5, jsonArray(r.ranks)).run();
}

void RecordInserter::insertRow(const TensorRecord& r) {
    m_tensor.bindId(1, r.id).bindId(2, r.dtype).bindId(3, r.globalShape).bindId(4, r.localShape);
    m_tensor.bindId(5, r.device).bindId(6, r.mesh).bindId(7, r.placements).bindId(8, r.label);
    m_tensor.bindId(9, r.createdAt).bind(10, r.numel).bind(11, int64_t(r.isDTensor)).run();
}

void RecordInserter::insertOpChunk(const OpChunkEncoder& chunk) {
    const OpChunkBounds& b = chunk.bounds();
    m_opChunk.bindId(1, b.firstSeq).bindId(2, b.lastSeq).bind(3, b.count).bind(4, b.minStartNs);
    m_opChunk.bind(5, b.maxStartNs).bind(6, b.maxEndNs).bind(7, b.minStep).bind(8, b.maxStep);
    m_opChunk.bindBlob(9, chunk.bytes()).run();
}

void RecordInserter::insertRow(const CollectiveRecord& r) {
    m_collective.bindId(1, r.seq).bindId(2, r.op).bind(3, r.kind.value()).bindId(4, r.group);
    m_collective.bindId(5, r.srcPlacements).bindId(6, r.dstPlacements).bind(7, r.bytes);
    m_collective.bind(8, r.startNs).bind(9, r.endNs).bind(10, int64_t(r.thread));
    m_collective.bind(11, r.step).bind(12, r.issuedNs).bindId(13, r.stack);
    m_collective.bind(14, int64_t(r.state)).bindId(15, r.error).run();
}

void RecordInserter::insertRow(const OptimizerStepRecord& r) {
    m_optimizerStep.bind(1, r.step).bindId(2, r.optimizer).bind(3, r.startNs).bind(4, r.endNs);
    m_optimizerStep.bind(5, r.paramCount).run();
}

void RecordInserter::insertRow(const DeviceTimeRecord& r) {
    bool collective = std::holds_alternative<CollectiveSeq>(r.subject);
    int64_t seq = std::visit([](auto id) { return id.value(); }, r.subject);
    m_deviceTime.bind(1, int64_t(collective)).bind(2, seq).bind(3, r.durationNs);
    if (r.deviceStartNs)
        m_deviceTime.bind(4, *r.deviceStartNs);
    else
        m_deviceTime.bindNull(4);
    m_deviceTime.run();
}

void RecordInserter::insertRow(const IncidentRecord& r) {
    auto& s = m_incident;
    s.bindId(1, r.seq).bind(2, r.timeNs).bind(3, r.step).bind(4, int64_t(r.thread));
    s.bind(5, r.op.value()).bind(6, int64_t(r.operandIndex)).bindId(7, r.plainTensor);
    s.bind(8, std::string_view(&reinterpret_cast<const char&>(r.origin), 1));
    s.bindId(9, r.evidence).bindId(10, r.policyRule).bind(11, int64_t(r.action));
    s.bind(12, int64_t(r.outcome)).bindId(13, r.error);
    if (r.fingerprint)
        s.bind(14, std::bit_cast<int64_t>(*r.fingerprint));
    else
        s.bindNull(14);
    s.bindId(15, r.promotedPlacements).bindId(16, r.stack).bind(17, int64_t(r.kind));
    s.bindId(18, r.detail).run();
    for (const OperandRecord& o : r.operands) {
        m_operand.bindId(1, r.seq).bind(2, int64_t(o.role)).bind(3, int64_t(o.index));
        m_operand.bind(4, int64_t(o.kind)).bindId(5, o.tensor);
        if (o.kind == OperandKind::Scalar)
            m_operand.bind(6, o.scalar);
        else
            m_operand.bindNull(6);
        m_operand.bindId(7, o.placements).run();
    }
}

}  // namespace meshscope
