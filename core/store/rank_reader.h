#pragma once

// Read side of one rank file. Opens defensively (read-only, trusted_schema
// off, defensive mode, cell size checks) and checks identity and schema
// version before any query, so a damaged, foreign or mismatched file is a
// one-line StoreError naming the file, never a crash. A file still being
// written is readable (WAL); call the *After() queries again for new rows.
// Nothing is ever written beside the file: a folder this process may not
// write, or a run copied without its -shm, is read immutably, or from a
// private copy when committed rows are still in its -wal.
// Not thread-safe: one reader per thread.

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/store/op_chunk.h"
#include "core/store/records.h"
#include "core/store/sqlite.h"

namespace meshscope {

enum class ReadVia;  // rank_file_checks.h

struct RankInfo {
    int rank = 0;
    int worldSize = 0;
    std::string runId;
    std::string hostname;
    int64_t pid = 0;
    int64_t clockOriginMonotonicNs = 0;
    int64_t clockOriginWallNs = 0;            // wall-clock ns since the Unix epoch at clock origin
    std::optional<int64_t> endedNs;           // set when the writer closed cleanly
    std::map<std::string, std::string> meta;  // everything in the meta table
};

struct RankSummary {
    int64_t ops = 0;
    int64_t firstNs = 0, lastNs = 0;
    int64_t steps = 0;  // optimizer steps recorded
    int64_t collectives = 0;
    int64_t collectiveBytes = 0;
    int64_t incidents = 0;
    std::map<IncidentKind, int64_t> incidentsByKind;
    // mixed-tensor incidents only:
    std::map<OriginClass, int64_t> incidentsByOrigin;
    std::map<Action, int64_t> incidentsByAction;
    std::map<Outcome, int64_t> incidentsByOutcome;
    std::map<std::string, uint64_t> drops;  // reason -> count
};

inline constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

class RankReader {
  public:
    // Throws StoreError for a missing, empty, truncated, corrupt, foreign,
    // newer-schema or older-schema file.
    static RankReader open(const std::filesystem::path& file);
    RankReader(RankReader&&) noexcept;
    RankReader& operator=(RankReader&&) noexcept;
    ~RankReader();

    const std::filesystem::path& path() const { return m_path; }
    const RankInfo& info() const { return m_info; }
    // Re-reads meta (e.g. to see that a live writer has closed).
    void refreshInfo();

    // An interned string; one longer than kMaxStringBytes is cut there and
    // says so: every report repeats recorded text, and a damaged file's
    // megabyte-long names would make them gigabytes.
    std::string string(StringId id) const;
    static constexpr size_t kMaxStringBytes = size_t(256) << 10;
    // The largest value (string, op chunk) a query reads; a larger one is a
    // read error naming the file, not gigabytes of memory.
    static constexpr int kMaxValueBytes = 256 << 20;
    std::vector<Frame> stack(StackId id) const;

    // Op queries return ops with their operands.
    // Ops overlapping [t0, t1), ordered by start time.
    std::vector<OpRecord> opsInTimeRange(int64_t t0, int64_t t1, int64_t limit = kNoLimit) const;
    // Ops whose step is in [s0, s1], ordered by seq.
    std::vector<OpRecord> opsInStepRange(int64_t s0, int64_t s1, int64_t limit = kNoLimit) const;
    // Ops with seq > after, ordered by seq: polling a live run.
    std::vector<OpRecord> opsAfter(OpSeq after, int64_t limit = kNoLimit) const;

    // Visits up to `limit` ops with seq > after, in seq order, without
    // building a vector (the visited record is reused; operands only when
    // asked). Returns the seq of the last op visited, or `after`.
    OpSeq scanOps(OpSeq after, int64_t limit, const std::function<void(const OpRecord&)>& visit,
                  bool operands = false) const;

    std::vector<IncidentRecord> incidentsAfter(IncidentSeq after, int64_t limit = kNoLimit,
                                               bool operands = true) const;
    std::vector<OperandRecord> incidentOperands(IncidentSeq seq) const;
    std::vector<IncidentRecord> incidentsInStepRange(int64_t s0, int64_t s1) const;
    std::vector<CollectiveRecord> collectivesInTimeRange(int64_t t0, int64_t t1) const;
    // Every collective in start order (then issue order), one at a time: a
    // pass over a run of any length that holds none of them.
    void scanCollectives(const std::function<void(const CollectiveRecord&)>& visit) const;
    // The rank's last collective (in issue order), if it recorded any; with
    // `state`, the last in that state.
    std::optional<CollectiveRecord> lastCollective(
        std::optional<CollectiveState> state = std::nullopt) const;
    // Its first `limit` collectives in `state` (issue order).
    std::vector<CollectiveRecord> collectivesIn(CollectiveState state, int64_t limit) const;
    // Collectives with seq > after, ordered by seq: polling a live run.
    std::vector<CollectiveRecord> collectivesAfter(CollectiveSeq after,
                                                   int64_t limit = kNoLimit) const;
    // GPU times of ops and collectives, ops first, each by seq; none for
    // files written before device times existed.
    std::vector<DeviceTimeRecord> deviceTimes() const;
    // Replica fingerprints by step (none in a file without the table).
    std::vector<ReplicaRecord> replicas() const;
    // Those at `step` and later (a live run: the latest step may still grow).
    std::vector<ReplicaRecord> replicasFrom(int64_t step) const;
    std::vector<OptimizerStepRecord> optimizerSteps() const;
    // Optimizer steps numbered above `afterStep`, ordered by step.
    std::vector<OptimizerStepRecord> optimizerStepsAfter(int64_t afterStep) const;
    std::vector<MeshRecord> meshes() const;
    std::optional<TensorRecord> tensor(TensorId id) const;

    RankSummary summary() const;

    // Reads what `depth` covers and throws StoreError at the first damage.
    // Ops: decodes every op chunk (summary()'s op counts come from chunk
    // headers alone). Everything: every row of every table through the
    // queries reports and exports use, and SQLite's quick_check over every
    // page, so `check` rejects whatever a report or an export would.
    enum class VerifyDepth { Ops, Everything };
    void verify(VerifyDepth depth) const;
    // Frees what SQLite caches for this file: a pass over one rank of many
    // calls it when it is done.
    void releaseMemory() const;

  private:
    explicit RankReader(std::filesystem::path path);
    static RankReader openVia(const std::filesystem::path& file, ReadVia via);
    template <typename Fn>
    auto guarded(Fn&& fn) const;
    void validate();
    class PrivateCopy;
    void loadStrings() const;
    int64_t metaNumber(std::string_view key) const;
    void decodeChunk(const OpChunkBounds& bounds, std::string_view bytes,
                     std::vector<OpRecord>& out, bool operands) const;
    template <typename Keep>
    std::vector<OpRecord> opsFromChunks(sql::Stmt& s, Keep keep, int64_t limit) const;

    std::filesystem::path m_path;
    std::shared_ptr<PrivateCopy> m_copy;  // the copy m_db reads, if any (outlives m_db)
    std::unique_ptr<sql::Db> m_db;
    RankInfo m_info;
    mutable std::unordered_map<int64_t, std::string> m_strings;  // StringId value -> text
    mutable int64_t m_stringsReadTo = 0;  // highest id read (rows are read in id order)
    mutable std::unique_ptr<sql::Stmt> m_stringsAfter;  // after m_db: finalized before it closes
    bool m_hasDeviceTimes = false;                      // the optional table exists
    bool m_hasReplicas = false;                         // the optional table exists
};

}  // namespace meshscope
