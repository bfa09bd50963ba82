#include "core/store/rank_reader.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/store/manifest.h"
#include "core/store/op_chunk.h"
#include "core/store/regular_file.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"
#include "core/util/utf8.h"

namespace meshscope {
namespace {

constexpr char kSqliteMagic[] = "SQLite format 3";  // 16 bytes with the NUL

uint32_t bigEndian(const unsigned char* p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i)
        v = (v << 8) | p[i];
    return v;
}

// Checks the 100-byte SQLite header so that empty, truncated and non-SQLite
// files get a precise message before SQLite sees them.
// A FIFO, a device or an unreadable file is refused here, before SQLite
// would block on it or call it "not a database".
void checkHeader(const std::filesystem::path& file) {
    FileHead head = readRegularFileHead(file, 100);
    for (const char* companion : {"-wal", "-shm"})
        refuseIfNotRegular(std::filesystem::path(file) += companion);
    uint64_t size = head.size;
    if (size == 0)
        throw StoreError(file.string(), "empty file (0 bytes), not a meshscope rank file");
    unsigned char header[100] = {};
    size_t got = head.bytes.size();
    std::memcpy(header, head.bytes.data(), got);
    if (got < 16 || std::memcmp(header, kSqliteMagic, 16) != 0)
        throw StoreError(file.string(), "not a meshscope rank file (not an SQLite database)");
    if (got < sizeof header)
        throw StoreError(file.string(), "truncated (" + std::to_string(size) +
                                            " bytes, shorter than an SQLite header)");
    uint32_t pageSize = bigEndian(header + 16, 2);
    if (pageSize == 1) pageSize = 65536;
    uint32_t pageCount = bigEndian(header + 28, 4);
    bool countValid = bigEndian(header + 24, 4) == bigEndian(header + 92, 4);
    uint64_t expected = uint64_t(pageSize) * pageCount;
    if (pageSize < 512 || (pageSize & (pageSize - 1)) != 0)
        throw StoreError(file.string(),
                         "corrupt SQLite header (page size " + std::to_string(pageSize) + ")");
    if (countValid && pageCount > 0 && expected > size)
        throw StoreError(file.string(), "truncated (" + std::to_string(size) + " of " +
                                            std::to_string(expected) + " bytes)");
}

constexpr const char* kChunkColumns =
    "SELECT first_seq, last_seq, count, min_start_ns, max_start_ns, max_end_ns, min_step, "
    "max_step, data FROM op_chunks ";

// A whole decimal integer ("12", "-3"), nothing before or after it.
std::optional<int64_t> parseInteger(const std::string& text) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return v;
}

int64_t saturatingSub(int64_t a, int64_t b) {
    return a < std::numeric_limits<int64_t>::min() + b ? std::numeric_limits<int64_t>::min()
                                                       : a - b;
}

// Enum columns of damaged files may hold anything: clamp to the known range.
OriginClass originFrom(const std::string& text) {
    return text.size() == 1 ? originFromChar(text[0]).value_or(OriginClass::Unknown)
                            : OriginClass::Unknown;
}
Action actionFrom(int64_t v) {
    return Action(std::clamp<int64_t>(v, 0, int64_t(Action::StrictError)));
}
Outcome outcomeFrom(int64_t v) {
    return Outcome(std::clamp<int64_t>(v, 0, int64_t(Outcome::Failed)));
}

IncidentRecord incidentFrom(const sql::Stmt& s) {
    IncidentRecord r;
    r.seq = s.id<IncidentSeq>(0);
    r.timeNs = s.int64(1);
    r.step = s.int64(2);
    r.thread = uint32_t(s.int64(3));
    r.op = s.id<StringId>(4);
    r.operandIndex = int32_t(s.int64(5));
    r.plainTensor = s.id<TensorId>(6);
    r.origin = originFrom(s.text(7));
    r.evidence = s.id<StringId>(8);
    r.policyRule = s.id<StringId>(9);
    r.action = actionFrom(s.int64(10));
    r.outcome = outcomeFrom(s.int64(11));
    r.error = s.id<StringId>(12);
    if (!s.isNull(13)) r.fingerprint = std::bit_cast<uint64_t>(s.int64(13));
    r.promotedPlacements = s.id<StringId>(14);
    r.stack = s.id<StackId>(15);
    // a kind this build does not know reads as the error it was: a DTensor error
    r.kind = incidentKindFromIndex(s.int64(16)).value_or(IncidentKind::DTensorError);
    r.detail = s.id<StringId>(17);
    return r;
}

constexpr const char* kIncidentColumns =
    "SELECT seq, time_ns, step, thread, op_id, operand_index, plain_tensor_id, origin, "
    "evidence_id, policy_rule_id, action, outcome, error_id, fingerprint, "
    "promoted_placements_id, stack_id, kind, detail_id FROM incidents ";

CollectiveRecord collectiveFrom(const sql::Stmt& s) {
    CollectiveRecord c;
    c.seq = s.id<CollectiveSeq>(0);
    c.op = s.id<OpSeq>(1);
    c.kind = s.id<StringId>(2);
    c.group = s.id<StringId>(3);
    c.srcPlacements = s.id<StringId>(4);
    c.dstPlacements = s.id<StringId>(5);
    c.bytes = s.int64(6);
    c.startNs = s.int64(7);
    c.endNs = s.int64(8);
    c.thread = uint32_t(s.int64(9));
    c.step = s.int64(10);
    c.issuedNs = s.int64(11);
    c.stack = s.id<StackId>(12);
    // a state this build does not know reads as completed
    c.state = collectiveStateFromIndex(s.int64(13)).value_or(CollectiveState::Completed);
    c.error = s.id<StringId>(14);
    return c;
}

constexpr const char* kCollectiveColumns =
    "SELECT seq, op_seq, kind_id, group_id, src_placements_id, dst_placements_id, bytes, "
    "start_ns, end_ns, thread, step, issued_ns, stack_id, state, error_id FROM collectives ";

// A JSON array column of the meshes table; damaged or mistyped text gives an
// empty list rather than an exception from deep inside a query.
template <typename T>
std::vector<T> jsonList(const std::string& text) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    std::vector<T> out;
    if (!j.is_array()) return out;
    for (const auto& item : j) {
        if constexpr (std::is_same_v<T, std::string>) {
            if (item.is_string()) out.push_back(item.get<std::string>());
        } else if (item.is_number_integer()) {
            out.push_back(item.get<T>());
        }
    }
    return out;
}

template <typename Row, typename Make>
std::vector<Row> collect(sql::Stmt& s, Make make) {
    std::vector<Row> rows;
    while (s.step())
        rows.push_back(make(s));
    return rows;
}

}  // namespace

RankReader::RankReader(std::filesystem::path path) : m_path(std::move(path)) {}
RankReader::RankReader(RankReader&&) noexcept = default;
RankReader& RankReader::operator=(RankReader&&) noexcept = default;
RankReader::~RankReader() = default;

// Runs a query, turning SQLite failures into StoreErrors that name the file.
template <typename Fn>
auto RankReader::guarded(Fn&& fn) const {
    try {
        return fn();
    } catch (const sql::Error& e) {
        throw StoreError(m_path.string(),
                         (e.isCorruption() ? "corrupt database (" : "read failed (") +
                             std::string(e.what()) + ")");
    }
}

RankReader RankReader::open(const std::filesystem::path& file) {
    checkHeader(file);
    RankReader reader(file);
    reader.guarded([&] {
        reader.m_db = std::make_unique<sql::Db>(file.string(), sql::OpenMode::ReadOnly);
        reader.validate();
        return 0;
    });
    return reader;
}

void RankReader::validate() {
    int64_t appId = m_db->pragmaInt("application_id");
    if (appId != schema::kApplicationId) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%08llx", static_cast<unsigned long long>(appId));
        throw StoreError(m_path.string(),
                         std::string("not a meshscope rank file (SQLite database with "
                                     "application_id ") +
                             hex + ")");
    }
    int64_t version = m_db->pragmaInt("user_version");
    std::string reads = "this build reads v" + std::to_string(schema::kSchemaVersion);
    if (version > schema::kSchemaVersion)
        throw StoreError(m_path.string(), "written by a newer meshscope (schema v" +
                                              std::to_string(version) + ", " + reads +
                                              "): upgrade meshscope to read it");
    if (version < schema::kSchemaVersion)
        throw StoreError(m_path.string(), "written by an older meshscope (schema v" +
                                              std::to_string(version) + ", " + reads +
                                              "): read it with that release or record again");
    sql::Stmt tables(*m_db, "SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?1");
    for (std::string_view name : schema::kRequiredTables) {
        tables.bind(1, name);
        bool found = tables.step();
        tables.reset();
        if (!found)
            throw StoreError(m_path.string(),
                             "corrupt rank file: table '" + std::string(name) + "' is missing");
    }
    tables.bind(1, schema::kDeviceTimesTable);
    m_hasDeviceTimes = tables.step();
    refreshInfo();
}

void RankReader::refreshInfo() {
    guarded([&] {
        RankInfo info;
        sql::Stmt s(*m_db, "SELECT key, value FROM meta");
        while (s.step())
            info.meta[s.text(0)] = s.text(1);
        auto number = [&](const char* key, bool required) -> int64_t {
            auto it = info.meta.find(key);
            if (it == info.meta.end()) {
                if (required)
                    throw StoreError(m_path.string(),
                                     std::string("incomplete rank file: no '") + key + "' in meta");
                return 0;
            }
            return std::strtoll(it->second.c_str(), nullptr, 10);
        };
        // The rank's identity is checked, not wrapped: a world size of 1e30
        // or 2**32+2 is refused by name.
        auto identity = [&](const char* key, int64_t lo, int64_t hi) -> int {
            number(key, true);
            const std::string& text = info.meta[key];
            std::optional<int64_t> v = parseInteger(text);
            if (!v || *v < lo || *v > hi)
                throw StoreError(m_path.string(), std::string("meta '") + key + "' is '" +
                                                      validUtf8(text.substr(0, 40)) +
                                                      "', not an integer in " + std::to_string(lo) +
                                                      ".." + std::to_string(hi));
            return int(*v);
        };
        info.rank = identity("rank", 0, kMaxWorldSize - 1);
        info.worldSize = identity("world_size", 1, kMaxWorldSize);
        info.runId = info.meta["run_id"];
        info.hostname = info.meta["hostname"];
        info.pid = number("pid", false);
        info.clockOriginMonotonicNs = number("clock_origin_monotonic_ns", false);
        info.clockOriginWallNs = number("clock_origin_wall_ns", false);
        if (info.meta.count("ended_ns")) info.endedNs = number("ended_ns", false);
        m_info = std::move(info);
        return 0;
    });
}

// Reads the rows above the highest id read so far. Memory follows the rows
// the table holds, whatever their ids: a damaged file's ids may be sparse
// and huge.
void RankReader::loadStrings() const {
    guarded([&] {
        // kept prepared: an id no row holds asks again on every lookup
        if (!m_stringsAfter)
            m_stringsAfter = std::make_unique<sql::Stmt>(
                *m_db, "SELECT id, text FROM strings WHERE id > ?1 ORDER BY id");
        sql::Stmt& s = *m_stringsAfter;
        s.reset();
        s.bind(1, m_stringsReadTo);
        while (s.step()) {
            int64_t id = s.int64(0);
            std::string text = s.text(1);
            if (text.size() > kMaxStringBytes) {
                size_t recorded = text.size();
                text.resize(kMaxStringBytes);
                text += "... (cut: " + std::to_string(recorded) + " bytes recorded)";
            }
            m_strings.insert_or_assign(id, std::move(text));
            m_stringsReadTo = std::max(m_stringsReadTo, id);
        }
        return 0;
    });
}

std::string RankReader::string(StringId id) const {
    if (!id.valid()) return {};
    auto it = m_strings.find(id.value());
    if (it == m_strings.end() && id.value() > m_stringsReadTo) {
        loadStrings();  // written since the last read (a live run)
        it = m_strings.find(id.value());
    }
    if (it == m_strings.end()) return "<missing string #" + std::to_string(id.value()) + ">";
    return it->second;
}

std::vector<Frame> RankReader::stack(StackId id) const {
    return guarded([&] {
        sql::Stmt s(*m_db,
                    "SELECT file_id, line, function_id FROM stack_frames WHERE stack_id=?1 "
                    "ORDER BY depth");
        s.bindId(1, id);
        return collect<Frame>(s, [](const sql::Stmt& s) {
            return Frame{s.id<StringId>(0), int32_t(s.int64(1)), s.id<StringId>(2)};
        });
    });
}

int64_t RankReader::metaNumber(std::string_view key) const {
    sql::Stmt s(*m_db, "SELECT value FROM meta WHERE key=?1");
    s.bind(1, key);
    return s.step() ? std::max<int64_t>(0, std::strtoll(s.text(0).c_str(), nullptr, 10)) : 0;
}

void RankReader::decodeChunk(const OpChunkBounds& bounds, std::string_view bytes,
                             std::vector<OpRecord>& out, bool operands) const {
    try {
        decodeOpChunkInto(bounds, bytes, out, operands);
    } catch (const ChunkError& e) {
        throw StoreError(m_path.string(), "corrupt op chunk at seq " +
                                              std::to_string(bounds.firstSeq.value()) + " (" +
                                              e.what() + ")");
    }
}

// Decodes the ops of every chunk the statement yields, keeping those `keep`
// accepts, until `limit` ops are kept.
template <typename Keep>
std::vector<OpRecord> RankReader::opsFromChunks(sql::Stmt& s, Keep keep, int64_t limit) const {
    std::vector<OpRecord> ops;
    while (int64_t(ops.size()) < limit && s.step()) {
        OpChunkBounds b{s.id<OpSeq>(0), s.id<OpSeq>(1), s.int64(2), s.int64(3),
                        s.int64(4),     s.int64(5),     s.int64(6), s.int64(7)};
        std::vector<OpRecord> chunk;
        decodeChunk(b, s.blob(8), chunk, true);
        for (OpRecord& op : chunk) {
            if (int64_t(ops.size()) == limit) break;
            if (keep(op)) ops.push_back(std::move(op));
        }
    }
    return ops;
}

std::vector<OpRecord> RankReader::opsInTimeRange(int64_t t0, int64_t t1, int64_t limit) const {
    return guarded([&] {
        // A chunk overlapping [t0, t1) starts no earlier than t0 minus the
        // largest chunk extent ever written, so the min_start_ns index serves.
        int64_t reach = metaNumber(schema::kMetaChunkTimeReach);
        sql::Stmt s(*m_db, std::string(kChunkColumns) +
                               "WHERE min_start_ns >= ?1 AND min_start_ns < ?2 AND max_end_ns > ?3 "
                               "ORDER BY first_seq");
        s.bind(1, saturatingSub(t0, reach)).bind(2, t1).bind(3, t0);
        auto ops = opsFromChunks(
            s, [&](const OpRecord& op) { return op.startNs < t1 && op.endNs > t0; }, kNoLimit);
        std::stable_sort(ops.begin(), ops.end(), [](const OpRecord& a, const OpRecord& b) {
            return a.startNs < b.startNs;
        });
        if (int64_t(ops.size()) > limit) ops.resize(size_t(limit));
        return ops;
    });
}

std::vector<OpRecord> RankReader::opsInStepRange(int64_t s0, int64_t s1, int64_t limit) const {
    return guarded([&] {
        int64_t reach = metaNumber(schema::kMetaChunkStepReach);
        sql::Stmt s(*m_db, std::string(kChunkColumns) +
                               "WHERE min_step >= ?1 AND min_step <= ?2 AND max_step >= ?3 "
                               "ORDER BY first_seq");
        s.bind(1, saturatingSub(s0, reach)).bind(2, s1).bind(3, s0);
        return opsFromChunks(
            s, [&](const OpRecord& op) { return op.step >= s0 && op.step <= s1; }, limit);
    });
}

std::vector<OpRecord> RankReader::opsAfter(OpSeq after, int64_t limit) const {
    return guarded([&] {
        sql::Stmt s(*m_db, std::string(kChunkColumns) +
                               "WHERE first_seq > ?1 AND last_seq > ?2 ORDER BY first_seq");
        s.bind(1, saturatingSub(after.value(), kMaxOpsPerChunk)).bind(2, after.value());
        return opsFromChunks(
            s, [&](const OpRecord& op) { return op.seq > after; }, limit);
    });
}

std::vector<OperandRecord> RankReader::incidentOperands(IncidentSeq seq) const {
    return guarded([&] {
        sql::Stmt s(*m_db,
                    "SELECT idx, role, kind, tensor_id, scalar, placements_id FROM "
                    "incident_operands WHERE incident_seq=?1 ORDER BY role, idx");
        s.bindId(1, seq);
        return collect<OperandRecord>(s, [](const sql::Stmt& s) {
            OperandRecord o;
            o.index = uint16_t(s.int64(0));
            o.role = s.int64(1) == 1 ? OperandRole::Output : OperandRole::Input;
            o.kind = OperandKind(std::clamp<int64_t>(s.int64(2), 0, 2));
            o.tensor = s.id<TensorId>(3);
            o.scalar = s.real(4);
            o.placements = s.id<StringId>(5);
            return o;
        });
    });
}

OpSeq RankReader::scanOps(OpSeq after, int64_t limit,
                          const std::function<void(const OpRecord&)>& visit, bool operands) const {
    return guarded([&] {
        sql::Stmt s(*m_db, std::string(kChunkColumns) +
                               "WHERE first_seq > ?1 AND last_seq > ?2 ORDER BY first_seq");
        s.bind(1, saturatingSub(after.value(), kMaxOpsPerChunk)).bind(2, after.value());
        std::vector<OpRecord> chunk;
        OpSeq last = after;
        for (int64_t visited = 0; visited < limit && s.step();) {
            OpChunkBounds b{s.id<OpSeq>(0), s.id<OpSeq>(1), s.int64(2), s.int64(3),
                            s.int64(4),     s.int64(5),     s.int64(6), s.int64(7)};
            decodeChunk(b, s.blob(8), chunk, operands);
            for (const OpRecord& op : chunk) {
                if (op.seq <= after) continue;
                if (visited == limit) break;
                visit(op);
                last = op.seq;
                ++visited;
            }
        }
        return last;
    });
}

std::vector<IncidentRecord> RankReader::incidentsAfter(IncidentSeq after, int64_t limit,
                                                       bool operands) const {
    return guarded([&] {
        sql::Stmt s(*m_db, std::string(kIncidentColumns) + "WHERE seq > ?1 ORDER BY seq LIMIT ?2");
        s.bind(1, after.value()).bind(2, limit);
        auto rows = collect<IncidentRecord>(s, incidentFrom);
        if (operands)
            for (auto& r : rows)
                r.operands = incidentOperands(r.seq);
        return rows;
    });
}

std::vector<IncidentRecord> RankReader::incidentsInStepRange(int64_t s0, int64_t s1) const {
    return guarded([&] {
        sql::Stmt s(*m_db,
                    std::string(kIncidentColumns) + "WHERE step BETWEEN ?1 AND ?2 ORDER BY seq");
        s.bind(1, s0).bind(2, s1);
        auto rows = collect<IncidentRecord>(s, incidentFrom);
        for (auto& r : rows)
            r.operands = incidentOperands(r.seq);
        return rows;
    });
}

std::vector<CollectiveRecord> RankReader::collectivesInTimeRange(int64_t t0, int64_t t1) const {
    return guarded([&] {
        sql::Stmt s(*m_db, std::string(kCollectiveColumns) +
                               "WHERE start_ns < ?2 AND end_ns > ?1 ORDER BY start_ns");
        s.bind(1, t0).bind(2, t1);
        return collect<CollectiveRecord>(s, collectiveFrom);
    });
}

std::vector<CollectiveRecord> RankReader::collectivesAfter(CollectiveSeq after,
                                                           int64_t limit) const {
    return guarded([&] {
        sql::Stmt s(*m_db,
                    std::string(kCollectiveColumns) + "WHERE seq > ?1 ORDER BY seq LIMIT ?2");
        s.bind(1, after.value()).bind(2, limit);
        return collect<CollectiveRecord>(s, collectiveFrom);
    });
}

std::optional<CollectiveRecord> RankReader::lastCollective(
    std::optional<CollectiveState> state) const {
    return guarded([&]() -> std::optional<CollectiveRecord> {
        sql::Stmt s(*m_db, std::string(kCollectiveColumns) + (state ? "WHERE state = ?1 " : "") +
                               "ORDER BY seq DESC LIMIT 1");
        if (state) s.bind(1, int64_t(*state));
        if (!s.step()) return std::nullopt;
        return collectiveFrom(s);
    });
}

std::vector<CollectiveRecord> RankReader::collectivesIn(CollectiveState state,
                                                        int64_t limit) const {
    return guarded([&] {
        sql::Stmt s(*m_db,
                    std::string(kCollectiveColumns) + "WHERE state = ?1 ORDER BY seq LIMIT ?2");
        s.bind(1, int64_t(state)).bind(2, limit);
        return collect<CollectiveRecord>(s, collectiveFrom);
    });
}

std::vector<DeviceTimeRecord> RankReader::deviceTimes() const {
    if (!m_hasDeviceTimes) return {};
    return guarded([&] {
        sql::Stmt s(*m_db,
                    "SELECT subject, seq, duration_ns, device_start_ns FROM device_times "
                    "ORDER BY subject, seq");
        return collect<DeviceTimeRecord>(s, [](const sql::Stmt& row) {
            DeviceTimeRecord r;
            if (row.int64(0) == 1)
                r.subject = row.id<CollectiveSeq>(1);
            else
                r.subject = row.id<OpSeq>(1);
            r.durationNs = row.int64(2);
            if (!row.isNull(3)) r.deviceStartNs = row.int64(3);
            return r;
        });
    });
}

std::vector<OptimizerStepRecord> RankReader::optimizerSteps() const {
    return optimizerStepsAfter(std::numeric_limits<int64_t>::min());
}

std::vector<OptimizerStepRecord> RankReader::optimizerStepsAfter(int64_t afterStep) const {
    return guarded([&] {
        sql::Stmt s(*m_db,
                    "SELECT step, optimizer_id, start_ns, end_ns, param_count FROM "
                    "optimizer_steps WHERE step > ?1 ORDER BY step, start_ns");
        s.bind(1, afterStep);
        return collect<OptimizerStepRecord>(s, [](const sql::Stmt& s) {
            return OptimizerStepRecord{s.int64(0), s.id<StringId>(1), s.int64(2), s.int64(3),
                                       s.int64(4)};
        });
    });
}

std::vector<MeshRecord> RankReader::meshes() const {
    return guarded([&] {
        sql::Stmt s(*m_db,
                    "SELECT id, device_type, shape, dim_names, ranks FROM meshes ORDER BY id");
        return collect<MeshRecord>(s, [](const sql::Stmt& s) {
            return MeshRecord{s.id<MeshId>(0), s.text(1), jsonList<int64_t>(s.text(2)),
                              jsonList<std::string>(s.text(3)), jsonList<int64_t>(s.text(4))};
        });
    });
}

std::optional<TensorRecord> RankReader::tensor(TensorId id) const {
    return guarded([&]() -> std::optional<TensorRecord> {
        sql::Stmt s(*m_db,
                    "SELECT id, dtype_id, global_shape_id, local_shape_id, device_id, mesh_id, "
                    "placements_id, label_id, created_stack_id, numel, is_dtensor FROM tensors "
                    "WHERE id=?1");
        s.bindId(1, id);
        if (!s.step()) return std::nullopt;
        TensorRecord t;
        t.id = s.id<TensorId>(0);
        t.dtype = s.id<StringId>(1);
        t.globalShape = s.id<StringId>(2);
        t.localShape = s.id<StringId>(3);
        t.device = s.id<StringId>(4);
        t.mesh = s.id<MeshId>(5);
        t.placements = s.id<StringId>(6);
        t.label = s.id<StringId>(7);
        t.createdAt = s.id<StackId>(8);
        t.numel = s.int64(9);
        t.isDTensor = s.int64(10) != 0;
        return t;
    });
}

void RankReader::verify(VerifyDepth depth) const {
    scanOps(
        OpSeq{}, kNoLimit, [](const OpRecord&) {}, true);
    if (depth == VerifyDepth::Ops) return;
    guarded([&] {
        sql::Stmt check(*m_db, "PRAGMA quick_check(1)");
        if (check.step() && check.text(0) != "ok")
            throw StoreError(m_path.string(),
                             "corrupt database (" + validUtf8(check.text(0).substr(0, 200)) + ")");
        // Tables read by id elsewhere, whole.
        for (const char* table : {"SELECT id, text FROM strings", "SELECT * FROM stack_frames",
                                  "SELECT * FROM tensors", "SELECT * FROM incident_operands"}) {
            sql::Stmt all(*m_db, table);
            while (all.step()) {
            }
        }
        return 0;
    });
    summary();
    meshes();
    optimizerSteps();
    collectivesInTimeRange(std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max());
    lastCollective();
    deviceTimes();
    for (IncidentSeq after;;) {
        std::vector<IncidentRecord> page = incidentsAfter(after, 20000, false);
        if (page.empty()) break;
        after = page.back().seq;
    }
}

RankSummary RankReader::summary() const {
    return guarded([&] {
        RankSummary r;
        sql::Stmt ops(*m_db,
                      "SELECT coalesce(sum(count), 0), min(min_start_ns), max(max_end_ns) "
                      "FROM op_chunks");
        if (ops.step()) {
            r.ops = ops.int64(0);
            r.firstNs = ops.int64(1);
            r.lastNs = ops.int64(2);
        }
        sql::Stmt steps(*m_db, "SELECT count(DISTINCT step) FROM optimizer_steps");
        if (steps.step()) r.steps = steps.int64(0);
        sql::Stmt coll(*m_db, "SELECT count(*), coalesce(sum(bytes), 0) FROM collectives");
        if (coll.step()) r.collectives = coll.int64(0), r.collectiveBytes = coll.int64(1);
        sql::Stmt inc(*m_db,
                      "SELECT origin, action, outcome, kind, count(*) FROM incidents "
                      "GROUP BY origin, action, outcome, kind");
        while (inc.step()) {
            int64_t n = inc.int64(4);
            IncidentKind kind =
                incidentKindFromIndex(inc.int64(3)).value_or(IncidentKind::DTensorError);
            r.incidents += n;
            r.incidentsByKind[kind] += n;
            if (kind != IncidentKind::MixedTensor) continue;
            r.incidentsByOrigin[originFrom(inc.text(0))] += n;
            r.incidentsByAction[actionFrom(inc.int64(1))] += n;
            r.incidentsByOutcome[outcomeFrom(inc.int64(2))] += n;
        }
        sql::Stmt drops(*m_db, "SELECT reason, count FROM drops WHERE count > 0 ORDER BY reason");
        while (drops.step())
            r.drops[drops.text(0)] = uint64_t(drops.int64(1));
        return r;
    });
}

}  // namespace meshscope
