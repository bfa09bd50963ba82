#pragma once

// Writer-thread side of a rank file: owns the prepared INSERT statements and
// turns records into rows. Only RankWriter uses it.

#include <array>
#include <cstdint>
#include <string_view>

#include "core/store/op_chunk.h"
#include "core/store/records.h"
#include "core/store/sqlite.h"
#include "core/store/string_interner.h"

namespace meshscope {

class RecordInserter {
  public:
    // Creates the schema in a new, empty database and prepares statements.
    static void createSchema(sql::Db& db);
    explicit RecordInserter(sql::Db& db);

    // Every record but OpRecord, which goes through insertOpChunk.
    void insert(const Record& record);
    void insertOpChunk(const OpChunkEncoder& chunk);
    void insertPending(const StringInterner::Pending& pending);
    void writeMeta(std::string_view key, std::string_view value);
    // Zero counts are skipped unless includeZero (used once, to create every row
    // so later updates happen in place).
    void writeDrops(const std::array<uint64_t, kDropReasonCount>& counts, bool includeZero = false);

  private:
    void insertRow(const MetaRecord& r);
    void insertRow(const MeshRecord& r);
    void insertRow(const TensorRecord& r);
    void insertRow(const OpRecord&) {}  // ops are chunked by the caller
    void insertRow(const CollectiveRecord& r);
    void insertRow(const OptimizerStepRecord& r);
    void insertRow(const IncidentRecord& r);
    void insertRow(const DeviceTimeRecord& r);
    void insertRow(const ReplicaRecord& r);
    sql::Stmt m_meta, m_string, m_frame, m_mesh, m_tensor, m_opChunk, m_operand, m_collective,
        m_optimizerStep, m_incident, m_deviceTime, m_replica, m_drop;
};

}  // namespace meshscope
