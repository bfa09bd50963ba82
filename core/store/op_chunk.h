#pragma once

// Ops are the high-volume record (up to millions per second and rank), so
// they are stored in chunks: one op_chunks row per run of up to
// kMaxOpsPerChunk consecutive seqs, with the chunk's time and step bounds as
// indexed columns and the ops themselves varint-encoded in a blob. This is
// what lets the writer sustain >1M ops/s where one SQLite row per op tops out
// near 0.3M, and lets readers pull a time window with a few row reads.

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/records.h"

namespace meshscope {

inline constexpr int64_t kMaxOpsPerChunk = 1024;

struct OpChunkBounds {
    OpSeq firstSeq, lastSeq;
    int64_t count = 0;
    int64_t minStartNs = 0, maxStartNs = 0, maxEndNs = 0;
    int64_t minStep = 0, maxStep = 0;
};

// Thrown by decodeOpChunk for bytes that are not a valid chunk.
class ChunkError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class OpChunkEncoder {
  public:
    // False when `op` cannot join this chunk (full, or its seq does not
    // follow); the caller writes the chunk, clears it and adds again.
    bool add(const OpRecord& op) { return add(op, op.operands); }
    // The same with the op's operands kept apart (the writer's queue).
    bool add(const OpRecord& op, std::span<const OperandRecord> operands);
    bool empty() const { return m_bounds.count == 0; }
    const OpChunkBounds& bounds() const { return m_bounds; }
    const std::string& bytes() const { return m_bytes; }
    void clear();

  private:
    OpChunkBounds m_bounds;
    std::string m_bytes;
    int64_t m_prevStart = 0;
    int64_t m_prevStep = 0;
};

// Decodes the ops of a chunk; bounds.firstSeq and bounds.count come from the
// row. Throws ChunkError on malformed bytes (never reads out of bounds).
std::vector<OpRecord> decodeOpChunk(const OpChunkBounds& bounds, std::string_view bytes);
// The same into a reused vector; without `operands` they are checked but not
// kept (scans that need names and times only allocate nothing per op).
void decodeOpChunkInto(const OpChunkBounds& bounds, std::string_view bytes,
                       std::vector<OpRecord>& ops, bool operands);

}  // namespace meshscope
