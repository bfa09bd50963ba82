#include "core/store/op_chunk.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace meshscope {
namespace {

void putVarint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out.push_back(char(v | 0x80));
        v >>= 7;
    }
    out.push_back(char(v));
}

void putSigned(std::string& out, int64_t v) {
    putVarint(out, (uint64_t(v) << 1) ^ uint64_t(v >> 63));  // zigzag
}

class Cursor {
  public:
    explicit Cursor(std::string_view bytes)
        : m_p(bytes.data()), m_end(bytes.data() + bytes.size()) {}

    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_p == m_end) throw ChunkError("op chunk ends inside a number");
            uint8_t byte = uint8_t(*m_p++);
            v |= uint64_t(byte & 0x7f) << shift;
            if (!(byte & 0x80)) return v;
        }
        throw ChunkError("op chunk holds an over-long number");
    }
    int64_t signedVarint() {
        uint64_t v = varint();
        return int64_t(v >> 1) ^ -int64_t(v & 1);
    }
    double real() {
        if (m_end - m_p < 8) throw ChunkError("op chunk ends inside a scalar");
        uint64_t bits;
        std::memcpy(&bits, m_p, 8);
        m_p += 8;
        return std::bit_cast<double>(bits);
    }
    size_t remaining() const { return size_t(m_end - m_p); }

  private:
    const char* m_p;
    const char* m_end;
};

template <typename Int>
Int bounded(uint64_t v, uint64_t max, const char* what) {
    if (v > max) throw ChunkError(std::string("op chunk has an invalid ") + what);
    return Int(v);
}

// The chunk's columns (what the indexes find it by) must describe its ops:
// a chunk whose columns were damaged would be skipped by a time or step
// query while a scan reads it.
void checkBounds(const OpChunkBounds& b, const std::vector<OpRecord>& ops) {
    if (ops.empty()) return;
    OpChunkBounds actual;
    actual.minStartNs = actual.maxStartNs = ops.front().startNs;
    actual.maxEndNs = ops.front().endNs;
    actual.minStep = actual.maxStep = ops.front().step;
    for (const OpRecord& op : ops) {
        actual.minStartNs = std::min(actual.minStartNs, op.startNs);
        actual.maxStartNs = std::max(actual.maxStartNs, op.startNs);
        actual.maxEndNs = std::max(actual.maxEndNs, op.endNs);
        actual.minStep = std::min(actual.minStep, op.step);
        actual.maxStep = std::max(actual.maxStep, op.step);
    }
    if (b.minStartNs != actual.minStartNs || b.maxStartNs != actual.maxStartNs ||
        b.maxEndNs != actual.maxEndNs)
        throw ChunkError("op chunk's time bounds do not match its ops");
    if (b.minStep != actual.minStep || b.maxStep != actual.maxStep)
        throw ChunkError("op chunk's step bounds do not match its ops");
}

}  // namespace

bool OpChunkEncoder::add(const OpRecord& op, std::span<const OperandRecord> operands) {
    if (m_bounds.count == kMaxOpsPerChunk) return false;
    if (m_bounds.count == 0) {
        m_bounds.firstSeq = op.seq;
        m_bounds.minStartNs = m_bounds.maxStartNs = op.startNs;
        m_bounds.maxEndNs = op.endNs;
        m_bounds.minStep = m_bounds.maxStep = op.step;
    } else if (op.seq.value() != m_bounds.lastSeq.value() + 1) {
        return false;
    }
    m_bounds.lastSeq = op.seq;
    ++m_bounds.count;
    m_bounds.minStartNs = std::min(m_bounds.minStartNs, op.startNs);
    m_bounds.maxStartNs = std::max(m_bounds.maxStartNs, op.startNs);
    m_bounds.maxEndNs = std::max(m_bounds.maxEndNs, op.endNs);
    m_bounds.minStep = std::min(m_bounds.minStep, op.step);
    m_bounds.maxStep = std::max(m_bounds.maxStep, op.step);

    putSigned(m_bytes, int64_t(uint64_t(op.startNs) - uint64_t(m_prevStart)));
    putSigned(m_bytes, int64_t(uint64_t(op.endNs) - uint64_t(op.startNs)));
    putVarint(m_bytes, op.thread);
    putVarint(m_bytes, uint64_t(op.name.value()));
    putVarint(m_bytes, uint64_t(op.phase));
    putSigned(m_bytes, int64_t(uint64_t(op.step) - uint64_t(m_prevStep)));
    putVarint(m_bytes, uint64_t(op.stack.value()));
    putVarint(m_bytes, op.depth);
    putVarint(m_bytes, uint64_t(op.incident.value()));
    putVarint(m_bytes, operands.size());
    for (const OperandRecord& o : operands) {
        putVarint(m_bytes, o.index);
        putVarint(m_bytes, uint64_t(o.role));
        putVarint(m_bytes, uint64_t(o.kind));
        putVarint(m_bytes, uint64_t(o.tensor.value()));
        putVarint(m_bytes, uint64_t(o.placements.value()));
        if (o.kind == OperandKind::Scalar) {
            uint64_t bits = std::bit_cast<uint64_t>(o.scalar);
            m_bytes.append(reinterpret_cast<const char*>(&bits), 8);
        }
    }
    m_prevStart = op.startNs;
    m_prevStep = op.step;
    return true;
}

void OpChunkEncoder::clear() {
    m_bounds = {};
    m_bytes.clear();
    m_prevStart = 0;
    m_prevStep = 0;
}

std::vector<OpRecord> decodeOpChunk(const OpChunkBounds& bounds, std::string_view bytes) {
    std::vector<OpRecord> ops;
    decodeOpChunkInto(bounds, bytes, ops, true);
    return ops;
}

void decodeOpChunkInto(const OpChunkBounds& bounds, std::string_view bytes,
                       std::vector<OpRecord>& ops, bool keepOperands) {
    if (bounds.count < 0 || bounds.count > kMaxOpsPerChunk)
        throw ChunkError("op chunk claims " + std::to_string(bounds.count) + " ops");
    if (uint64_t(bounds.lastSeq.value()) - uint64_t(bounds.firstSeq.value()) + 1 !=
        uint64_t(bounds.count))
        throw ChunkError("op chunk claims " + std::to_string(bounds.count) + " ops for seqs " +
                         std::to_string(bounds.firstSeq.value()) + ".." +
                         std::to_string(bounds.lastSeq.value()));
    ops.resize(size_t(bounds.count));
    Cursor in(bytes);
    OperandRecord scratch;
    int64_t start = 0, step = 0;
    constexpr uint64_t kMaxId = uint64_t(1) << 62;
    for (int64_t i = 0; i < bounds.count; ++i) {
        OpRecord& op = ops[size_t(i)];
        op.seq = OpSeq{bounds.firstSeq.value() + i};
        // Unsigned sums: damaged deltas may wrap, but never overflow (UB).
        start = int64_t(uint64_t(start) + uint64_t(in.signedVarint()));
        op.startNs = start;
        op.endNs = int64_t(uint64_t(start) + uint64_t(in.signedVarint()));
        op.thread = bounded<uint32_t>(in.varint(), UINT32_MAX, "thread");
        op.name = StringId{bounded<int64_t>(in.varint(), kMaxId, "name")};
        op.phase = Phase(bounded<uint8_t>(in.varint(), uint64_t(Phase::End) - 1, "phase"));
        step = int64_t(uint64_t(step) + uint64_t(in.signedVarint()));
        op.step = step;
        op.stack = StackId{bounded<int64_t>(in.varint(), kMaxId, "stack")};
        op.depth = bounded<uint16_t>(in.varint(), UINT16_MAX, "depth");
        op.incident = IncidentSeq{bounded<int64_t>(in.varint(), kMaxId, "incident")};
        // Each operand takes at least 5 bytes: a count beyond that is damage.
        size_t operands = bounded<size_t>(in.varint(), in.remaining() / 5, "operand count");
        op.operands.resize(keepOperands ? operands : 0);
        for (size_t k = 0; k < operands; ++k) {
            OperandRecord& o = keepOperands ? op.operands[k] : scratch;
            o.index = bounded<uint16_t>(in.varint(), UINT16_MAX, "operand index");
            o.role = OperandRole(bounded<uint8_t>(in.varint(), 1, "operand role"));
            o.kind = OperandKind(bounded<uint8_t>(in.varint(), 2, "operand kind"));
            o.tensor = TensorId{bounded<int64_t>(in.varint(), kMaxId, "tensor")};
            o.placements = StringId{bounded<int64_t>(in.varint(), kMaxId, "placement")};
            if (o.kind == OperandKind::Scalar) o.scalar = in.real();
        }
    }
    if (in.remaining() != 0)
        throw ChunkError("op chunk holds " + std::to_string(in.remaining()) +
                         " bytes after its last op");
    checkBounds(bounds, ops);
}

}  // namespace meshscope
