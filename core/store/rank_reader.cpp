#include "core/store/rank_reader.h"

#include <unistd.h>
#include <bit>
#include <charconv>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/store/manifest.h"
#include "core/store/op_chunk.h"
#include "core/store/rank_file_checks.h"
#include "core/store/regular_file.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"
#include "core/util/utf8.h"

namespace meshscope {

using namespace schema;  // the tables

namespace {

// An op chunk's bounds from a row of selectSql(kOpChunks).
OpChunkBounds chunkBoundsFrom(const sql::Stmt& s) {
    constexpr auto& t = kOpChunks;
    return OpChunkBounds{s.id<OpSeq>(t["first_seq"]), s.id<OpSeq>(t["last_seq"]),
                         s.int64(t["count"]),         s.int64(t["min_start_ns"]),
                         s.int64(t["max_start_ns"]),  s.int64(t["max_end_ns"]),
                         s.int64(t["min_step"]),      s.int64(t["max_step"])};
}

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
    return Action(std::clamp<int64_t>(v, 0, int64_t(Action::End) - 1));
}
Outcome outcomeFrom(int64_t v) {
    return Outcome(std::clamp<int64_t>(v, 0, int64_t(Outcome::End) - 1));
}

IncidentRecord incidentFrom(const sql::Stmt& s) {
    constexpr auto& t = kIncidents;
    IncidentRecord r;
    r.seq = s.id<IncidentSeq>(t["seq"]);
    r.timeNs = s.int64(t["time_ns"]);
    r.step = s.int64(t["step"]);
    r.thread = uint32_t(s.int64(t["thread"]));
    r.op = s.id<StringId>(t["op_id"]);
    r.operandIndex = int32_t(s.int64(t["operand_index"]));
    r.plainTensor = s.id<TensorId>(t["plain_tensor_id"]);
    r.origin = originFrom(s.text(t["origin"]));
    r.evidence = s.id<StringId>(t["evidence_id"]);
    r.policyRule = s.id<StringId>(t["policy_rule_id"]);
    r.action = actionFrom(s.int64(t["action"]));
    r.outcome = outcomeFrom(s.int64(t["outcome"]));
    r.error = s.id<StringId>(t["error_id"]);
    if (!s.isNull(t["fingerprint"]))
        r.fingerprint = std::bit_cast<uint64_t>(s.int64(t["fingerprint"]));
    r.promotedPlacements = s.id<StringId>(t["promoted_placements_id"]);
    r.stack = s.id<StackId>(t["stack_id"]);
    // a kind this build does not know reads as the error it was: a DTensor error
    r.kind = incidentKindFromIndex(s.int64(t["kind"])).value_or(IncidentKind::DTensorError);
    r.detail = s.id<StringId>(t["detail_id"]);
    return r;
}

CollectiveRecord collectiveFrom(const sql::Stmt& s) {
    constexpr auto& t = kCollectives;
    CollectiveRecord c;
    c.seq = s.id<CollectiveSeq>(t["seq"]);
    c.op = s.id<OpSeq>(t["op_seq"]);
    c.kind = s.id<StringId>(t["kind_id"]);
    c.group = s.id<StringId>(t["group_id"]);
    c.srcPlacements = s.id<StringId>(t["src_placements_id"]);
    c.dstPlacements = s.id<StringId>(t["dst_placements_id"]);
    c.bytes = s.int64(t["bytes"]);
    c.startNs = s.int64(t["start_ns"]);
    c.endNs = s.int64(t["end_ns"]);
    c.thread = uint32_t(s.int64(t["thread"]));
    c.step = s.int64(t["step"]);
    c.issuedNs = s.int64(t["issued_ns"]);
    c.stack = s.id<StackId>(t["stack_id"]);
    // a state this build does not know reads as completed
    c.state = collectiveStateFromIndex(s.int64(t["state"])).value_or(CollectiveState::Completed);
    c.error = s.id<StringId>(t["error_id"]);
    return c;
}

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

// A private folder holding a copy of a rank file and its -wal, removed with
// the reader that reads it.
class RankReader::PrivateCopy {
  public:
    explicit PrivateCopy(const std::filesystem::path& file) {
        std::error_code ec;
        std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
        std::string pattern =
            ((ec ? std::filesystem::path("/tmp") : tmp) / "meshscope-read-XXXXXX");
        if (!::mkdtemp(pattern.data()))
            throw StoreError(file.string(), std::string("cannot make a private copy to read its "
                                                        "-wal (") +
                                                std::strerror(errno) + ")");
        m_dir = pattern;
        m_file = m_dir / file.filename();
        for (const char* suffix : {"", "-wal"}) {
            std::filesystem::path from = std::filesystem::path(file) += suffix;
            std::filesystem::copy_file(from, std::filesystem::path(m_file) += suffix, ec);
            if (ec) {
                std::string why = ec.message();
                remove();
                throw StoreError(file.string(), "cannot copy it to " + pattern +
                                                    " to read its -wal (" + why + ")");
            }
        }
    }
    ~PrivateCopy() { remove(); }
    PrivateCopy(const PrivateCopy&) = delete;
    PrivateCopy& operator=(const PrivateCopy&) = delete;
    const std::filesystem::path& file() const { return m_file; }

  private:
    void remove() {
        std::error_code ec;
        std::filesystem::remove_all(m_dir, ec);
    }
    std::filesystem::path m_dir, m_file;
};

namespace {

// A file's size and last change: equal before and after a read, nothing
// wrote it meanwhile.
struct FileStamp {
    std::uintmax_t size = 0;
    std::filesystem::file_time_type changed{};
    static FileStamp of(const std::filesystem::path& file) {
        std::error_code ec;
        return {std::filesystem::file_size(file, ec), std::filesystem::last_write_time(file, ec)};
    }
    bool operator==(const FileStamp&) const = default;
};

}  // namespace

RankReader RankReader::open(const std::filesystem::path& file) {
    checkHeader(file);
    ReadVia via = readVia(file);
    // A file its writer closed, with nothing in a -wal, never changes again:
    // it is read immutable, without the lock, -wal and -shm that SQLite
    // otherwise opens, writes and maps for it (most of the time opening a
    // rank file took). One its writer has not closed, one that changed while
    // it was opened (its writer closing meanwhile) or one that fails to open
    // that way is opened again the shared way.
    if (via == ReadVia::Shared && !hasWalContent(file)) try {
            FileStamp before = FileStamp::of(file);
            RankReader closed = openVia(file, ReadVia::Immutable);
            if (closed.info().endedNs && !hasWalContent(file) && FileStamp::of(file) == before)
                return closed;
        } catch (const StoreError&) {
        }
    return openVia(file, via);
}

RankReader RankReader::openVia(const std::filesystem::path& file, ReadVia via) {
    RankReader reader(file);
    if (via == ReadVia::PrivateCopy) reader.m_copy = std::make_shared<PrivateCopy>(file);
    reader.guarded([&] {
        if (via == ReadVia::PrivateCopy)
            reader.m_db =
                std::make_unique<sql::Db>(reader.m_copy->file().string(), sql::OpenMode::ReadOnly);
        else
            reader.m_db = std::make_unique<sql::Db>(file.string(), via == ReadVia::Immutable
                                                                       ? sql::OpenMode::Immutable
                                                                       : sql::OpenMode::ReadOnly);
        reader.m_db->limitValueBytes(kMaxValueBytes);
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
    checkRankSchema(*m_db, m_path);
    sql::Stmt tables(*m_db, "SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?1");
    for (std::string_view name : schema::kRequiredTables) {
        tables.bind(1, name);
        bool found = tables.step();
        tables.reset();
        if (!found)
            throw StoreError(m_path.string(),
                             "corrupt rank file: table '" + std::string(name) + "' is missing");
    }
    tables.bind(1, kDeviceTimes.name);
    m_hasDeviceTimes = tables.step();
    tables.reset();
    tables.bind(1, kReplicas.name);
    m_hasReplicas = tables.step();
    refreshInfo();
}

void RankReader::refreshInfo() {
    guarded([&] {
        RankInfo info;
        sql::Stmt s(*m_db, selectSql(kMeta));
        while (s.step())
            info.meta[s.text(kMeta["key"])] = s.text(kMeta["value"]);
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
                *m_db, selectSql(kStrings) + "WHERE id > ?1 ORDER BY id");
        sql::Stmt& s = *m_stringsAfter;
        s.reset();
        s.bind(1, m_stringsReadTo);
        while (s.step()) {
            int64_t id = s.int64(kStrings["id"]);
            std::string text = s.text(kStrings["text"]);
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
        constexpr auto& t = kStackFrames;
        sql::Stmt s(*m_db, selectSql(t) + "WHERE stack_id=?1 ORDER BY depth");
        s.bindId(1, id);
        return collect<Frame>(s, [](const sql::Stmt& s) {
            return Frame{s.id<StringId>(t["file_id"]), int32_t(s.int64(t["line"])),
                         s.id<StringId>(t["function_id"])};
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
        std::vector<OpRecord> chunk;
        decodeChunk(chunkBoundsFrom(s), s.blob(kOpChunks["data"]), chunk, true);
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
        sql::Stmt s(*m_db, selectSql(kOpChunks) +
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
        sql::Stmt s(*m_db, selectSql(kOpChunks) +
                               "WHERE min_step >= ?1 AND min_step <= ?2 AND max_step >= ?3 "
                               "ORDER BY first_seq");
        s.bind(1, saturatingSub(s0, reach)).bind(2, s1).bind(3, s0);
        return opsFromChunks(
            s, [&](const OpRecord& op) { return op.step >= s0 && op.step <= s1; }, limit);
    });
}

std::vector<OpRecord> RankReader::opsAfter(OpSeq after, int64_t limit) const {
    return guarded([&] {
        sql::Stmt s(*m_db, selectSql(kOpChunks) +
                               "WHERE first_seq > ?1 AND last_seq > ?2 ORDER BY first_seq");
        s.bind(1, saturatingSub(after.value(), kMaxOpsPerChunk)).bind(2, after.value());
        return opsFromChunks(
            s, [&](const OpRecord& op) { return op.seq > after; }, limit);
    });
}

std::vector<OperandRecord> RankReader::incidentOperands(IncidentSeq seq) const {
    return guarded([&] {
        constexpr auto& t = kIncidentOperands;
        sql::Stmt s(*m_db, selectSql(t) + "WHERE incident_seq=?1 ORDER BY role, idx");
        s.bindId(1, seq);
        return collect<OperandRecord>(s, [](const sql::Stmt& s) {
            OperandRecord o;
            o.index = uint16_t(s.int64(t["idx"]));
            o.role = s.int64(t["role"]) == 1 ? OperandRole::Output : OperandRole::Input;
            o.kind = OperandKind(std::clamp<int64_t>(s.int64(t["kind"]), 0, 2));
            o.tensor = s.id<TensorId>(t["tensor_id"]);
            o.scalar = s.real(t["scalar"]);
            o.placements = s.id<StringId>(t["placements_id"]);
            return o;
        });
    });
}

OpSeq RankReader::scanOps(OpSeq after, int64_t limit,
                          const std::function<void(const OpRecord&)>& visit, bool operands) const {
    return guarded([&] {
        sql::Stmt s(*m_db, selectSql(kOpChunks) +
                               "WHERE first_seq > ?1 AND last_seq > ?2 ORDER BY first_seq");
        s.bind(1, saturatingSub(after.value(), kMaxOpsPerChunk)).bind(2, after.value());
        std::vector<OpRecord> chunk;
        OpSeq last = after;
        for (int64_t visited = 0; visited < limit && s.step();) {
            decodeChunk(chunkBoundsFrom(s), s.blob(kOpChunks["data"]), chunk, operands);
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
        sql::Stmt s(*m_db, selectSql(kIncidents) + "WHERE seq > ?1 ORDER BY seq LIMIT ?2");
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
        sql::Stmt s(*m_db, selectSql(kIncidents) + "WHERE step BETWEEN ?1 AND ?2 ORDER BY seq");
        s.bind(1, s0).bind(2, s1);
        auto rows = collect<IncidentRecord>(s, incidentFrom);
        for (auto& r : rows)
            r.operands = incidentOperands(r.seq);
        return rows;
    });
}

std::vector<CollectiveRecord> RankReader::collectivesInTimeRange(int64_t t0, int64_t t1) const {
    return guarded([&] {
        sql::Stmt s(*m_db, selectSql(kCollectives) +
                               "WHERE start_ns < ?2 AND end_ns > ?1 ORDER BY start_ns");
        s.bind(1, t0).bind(2, t1);
        return collect<CollectiveRecord>(s, collectiveFrom);
    });
}

void RankReader::scanCollectives(const std::function<void(const CollectiveRecord&)>& visit) const {
    guarded([&] {
        sql::Stmt s(*m_db, selectSql(kCollectives) + "ORDER BY start_ns, seq");
        while (s.step())
            visit(collectiveFrom(s));
        return 0;
    });
}

std::vector<CollectiveRecord> RankReader::collectivesAfter(CollectiveSeq after,
                                                           int64_t limit) const {
    return guarded([&] {
        sql::Stmt s(*m_db, selectSql(kCollectives) + "WHERE seq > ?1 ORDER BY seq LIMIT ?2");
        s.bind(1, after.value()).bind(2, limit);
        return collect<CollectiveRecord>(s, collectiveFrom);
    });
}

std::optional<CollectiveRecord> RankReader::lastCollective(
    std::optional<CollectiveState> state) const {
    return guarded([&]() -> std::optional<CollectiveRecord> {
        sql::Stmt s(*m_db, selectSql(kCollectives) + (state ? "WHERE state = ?1 " : "") +
                               "ORDER BY seq DESC LIMIT 1");
        if (state) s.bind(1, int64_t(*state));
        if (!s.step()) return std::nullopt;
        return collectiveFrom(s);
    });
}

std::vector<CollectiveRecord> RankReader::collectivesIn(CollectiveState state,
                                                        int64_t limit) const {
    return guarded([&] {
        sql::Stmt s(*m_db, selectSql(kCollectives) + "WHERE state = ?1 ORDER BY seq LIMIT ?2");
        s.bind(1, int64_t(state)).bind(2, limit);
        return collect<CollectiveRecord>(s, collectiveFrom);
    });
}

std::vector<DeviceTimeRecord> RankReader::deviceTimes() const {
    if (!m_hasDeviceTimes) return {};
    return guarded([&] {
        constexpr auto& t = kDeviceTimes;
        sql::Stmt s(*m_db, selectSql(t) + "ORDER BY subject, seq");
        return collect<DeviceTimeRecord>(s, [](const sql::Stmt& row) {
            DeviceTimeRecord r;
            if (row.int64(t["subject"]) == 1)
                r.subject = row.id<CollectiveSeq>(t["seq"]);
            else
                r.subject = row.id<OpSeq>(t["seq"]);
            r.durationNs = row.int64(t["duration_ns"]);
            if (!row.isNull(t["device_start_ns"]))
                r.deviceStartNs = row.int64(t["device_start_ns"]);
            return r;
        });
    });
}

std::vector<ReplicaRecord> RankReader::replicas() const {
    return replicasFrom(std::numeric_limits<int64_t>::min());
}

std::vector<ReplicaRecord> RankReader::replicasFrom(int64_t step) const {
    if (!m_hasReplicas) return {};
    return guarded([&] {
        constexpr auto& t = kReplicas;
        sql::Stmt s(*m_db, selectSql(t) + "WHERE step >= ?1 ORDER BY step, name_id, role_id");
        s.bind(1, step);
        return collect<ReplicaRecord>(s, [](const sql::Stmt& row) {
            ReplicaRecord r;
            r.step = row.int64(t["step"]);
            r.name = row.id<StringId>(t["name_id"]);
            r.role = row.id<StringId>(t["role_id"]);
            r.replicaKey = row.id<StringId>(t["replica_key_id"]);
            r.placements = row.id<StringId>(t["placements_id"]);
            r.module = row.id<StringId>(t["module_id"]);
            r.fingerprint = uint64_t(row.int64(t["fingerprint"]));
            r.numel = row.int64(t["numel"]);
            return r;
        });
    });
}

std::vector<OptimizerStepRecord> RankReader::optimizerSteps() const {
    return optimizerStepsAfter(std::numeric_limits<int64_t>::min());
}

std::vector<OptimizerStepRecord> RankReader::optimizerStepsAfter(int64_t afterStep) const {
    return guarded([&] {
        constexpr auto& t = kOptimizerSteps;
        sql::Stmt s(*m_db, selectSql(t) + "WHERE step > ?1 ORDER BY step, start_ns");
        s.bind(1, afterStep);
        return collect<OptimizerStepRecord>(s, [](const sql::Stmt& s) {
            return OptimizerStepRecord{s.int64(t["step"]), s.id<StringId>(t["optimizer_id"]),
                                       s.int64(t["start_ns"]), s.int64(t["end_ns"]),
                                       s.int64(t["param_count"])};
        });
    });
}

std::vector<MeshRecord> RankReader::meshes() const {
    return guarded([&] {
        constexpr auto& t = kMeshes;
        sql::Stmt s(*m_db, selectSql(t) + "ORDER BY id");
        return collect<MeshRecord>(s, [](const sql::Stmt& s) {
            return MeshRecord{s.id<MeshId>(t["id"]), s.text(t["device_type"]),
                              jsonList<int64_t>(s.text(t["shape"])),
                              jsonList<std::string>(s.text(t["dim_names"])),
                              jsonList<int64_t>(s.text(t["ranks"]))};
        });
    });
}

std::optional<TensorRecord> RankReader::tensor(TensorId id) const {
    return guarded([&]() -> std::optional<TensorRecord> {
        constexpr auto& c = kTensors;
        sql::Stmt s(*m_db, selectSql(c) + "WHERE id=?1");
        s.bindId(1, id);
        if (!s.step()) return std::nullopt;
        TensorRecord t;
        t.id = s.id<TensorId>(c["id"]);
        t.dtype = s.id<StringId>(c["dtype_id"]);
        t.globalShape = s.id<StringId>(c["global_shape_id"]);
        t.localShape = s.id<StringId>(c["local_shape_id"]);
        t.device = s.id<StringId>(c["device_id"]);
        t.mesh = s.id<MeshId>(c["mesh_id"]);
        t.placements = s.id<StringId>(c["placements_id"]);
        t.label = s.id<StringId>(c["label_id"]);
        t.createdAt = s.id<StackId>(c["created_stack_id"]);
        t.numel = s.int64(c["numel"]);
        t.isDTensor = s.int64(c["is_dtensor"]) != 0;
        return t;
    });
}

void RankReader::releaseMemory() const {
    m_db->releaseMemory();
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
