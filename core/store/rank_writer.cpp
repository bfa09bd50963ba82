#include "core/store/rank_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <sqlite3.h>

#include "core/model/settings.h"
#include "core/store/fault_vfs.h"
#include "core/store/record_inserter.h"
#include "core/store/regular_file.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"
#include "core/util/hot_path.h"

namespace meshscope {
namespace {

// Incremented in every fork()ed child: a writer created under another
// generation belongs to an ancestor process and must not be touched.
std::atomic<uint64_t> g_forkGeneration{0};

void installForkHandler() {
    static std::once_flag once;
    std::call_once(once, [] {
        pthread_atfork(nullptr, nullptr,
                       [] { g_forkGeneration.fetch_add(1, std::memory_order_relaxed); });
    });
}

int64_t sinceEpochNs(std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int64_t sinceEpochNs(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A rank file that could not be made whole: removed, -wal and -shm too, so
// that no empty or half-made file is left for a reader to call damaged.
void removeRankFile(const std::filesystem::path& file) {
    for (const char* suffix : {"", "-wal", "-shm"})
        ::unlink((file.string() + suffix).c_str());
}

std::string hostName() {
    char buffer[256] = {};
    return gethostname(buffer, sizeof buffer - 1) == 0 ? buffer : "unknown";
}

}  // namespace

std::unique_ptr<RankWriter> RankWriter::create(const std::filesystem::path& file,
                                               const RankIdentity& identity,
                                               WriterOptions options) {
    installForkHandler();
    if (!options.warn)
        options.warn = [](const std::string& msg) { std::cerr << "meshscope: " << msg << "\n"; };
    try {
        installDiskFaultFromEnvironment();  // tests only (docs/testing.md)
    } catch (const std::invalid_argument& e) {
        throw StoreError(file.string(), e.what());
    }
    // Created here, exclusively and never through a symlink, with the mode
    // its -wal and -shm then take from it: 0640 less the umask.
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    modeWithUmask(0640));
    if (fd < 0) {
        int error = errno;
        if (error == EEXIST || error == ELOOP)
            throw StoreError(file.string(), "already exists; a rank file is never overwritten");
        throw StoreError(file.string(),
                         std::string("cannot create rank file: ") + std::strerror(error));
    }
    ::close(fd);
    sql::Db db;
    try {
        db = sql::Db(file.string(), sql::OpenMode::ReadWriteCreate);
        RecordInserter::createSchema(db);
        db.exec("PRAGMA synchronous=NORMAL");
        db.exec("PRAGMA busy_timeout=100");
        db.exec("PRAGMA cache_size=-16384");
        if (options.maxFileBytes > 0) {
            // SQLite keeps a limit below the pages the file already has at
            // that size: a smaller limit would be ignored without a word.
            int64_t pageSize = db.pragmaInt("page_size");
            int64_t floor = (db.pragmaInt("page_count") + 1) * pageSize;
            if (options.maxFileBytes < floor) {
                options.warn(fmt::format(
                    "{}: a file limit of {} bytes ({}) is below the {} bytes an empty rank file "
                    "takes; the limit is {} bytes",
                    file.string(), options.maxFileBytes, setting("max_file_bytes").env, floor,
                    floor));
                options.maxFileBytes = floor;
            }
            db.exec("PRAGMA max_page_count=" +
                    std::to_string((options.maxFileBytes + pageSize - 1) / pageSize));
        }
    } catch (const sql::Error& e) {
        db = sql::Db();
        removeRankFile(file);
        throw StoreError(file.string(), std::string("cannot create rank file: ") + e.what());
    }
    std::unique_ptr<RankWriter> writer;
    try {
        writer.reset(new RankWriter(file, std::move(db), std::move(options)));
        auto wallOrigin = std::chrono::system_clock::now();
        auto& ins = *writer->m_inserter;
        sql::Transaction tx(writer->m_db);
        ins.writeMeta("rank", std::to_string(identity.rank));
        ins.writeMeta("world_size", std::to_string(identity.worldSize));
        ins.writeMeta("run_id", identity.runId);
        ins.writeMeta("hostname", hostName());
        ins.writeMeta("pid", std::to_string(getpid()));
        ins.writeMeta("clock_origin_monotonic_ns",
                      std::to_string(sinceEpochNs(writer->m_clockOrigin)));
        ins.writeMeta("clock_origin_wall_ns", std::to_string(sinceEpochNs(wallOrigin)));
        ins.writeDrops({}, /*includeZero=*/true);
        tx.commit();
    } catch (const sql::Error& e) {
        writer->m_inserter.reset();
        writer->m_db = sql::Db();
        removeRankFile(file);
        throw StoreError(file.string(), std::string("cannot initialize rank file: ") + e.what());
    }
    writer->m_thread = new std::thread([w = writer.get()] { w->run(); });
    return writer;
}

std::unique_ptr<RankWriter> RankWriter::createUnrecorded(std::string why, WriterOptions options) {
    installForkHandler();
    std::unique_ptr<RankWriter> writer(new RankWriter({}, sql::Db(), std::move(options)));
    writer->m_notRecording = std::move(why);
    writer->m_thread = new std::thread([w = writer.get()] { w->run(); });
    return writer;
}

RankWriter::RankWriter(std::filesystem::path path, sql::Db db, WriterOptions options)
    : m_path(std::move(path)),
      m_db(std::move(db)),
      m_options(std::move(options)),
      m_inserter(m_db.handle() ? std::make_unique<RecordInserter>(m_db) : nullptr),
      m_clockOrigin(std::chrono::steady_clock::now()),
      m_forkGeneration(g_forkGeneration.load()) {
    if (!m_options.warn)
        m_options.warn = [](const std::string& msg) { std::cerr << "meshscope: " << msg << "\n"; };
}

RankWriter::~RankWriter() {
    if (!ownedHere()) {
        // The writer thread and the connection belong to the parent process.
        m_db.abandon();
        (void)m_inserter.release();
        (void)m_sync.release();
        return;
    }
    close();
}

bool RankWriter::ownedHere() const {
    return g_forkGeneration.load(std::memory_order_relaxed) == m_forkGeneration;
}

MESHSCOPE_HOT int64_t RankWriter::nowNs() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                m_clockOrigin)
        .count();
}

void RankWriter::countDrop(DropReason reason, uint64_t n) {
    m_drops[size_t(reason)].fetch_add(n, std::memory_order_relaxed);
    if (reason != DropReason::ForkedChild && reason != DropReason::Closed &&
        reason != DropReason::StringLimit) {
        int64_t none = -1;
        m_firstLossNs.compare_exchange_strong(none, nowNs(), std::memory_order_relaxed);
    }
}

// The seq counter of a sequenced record type, or nullptr.
int64_t* RankWriter::seqCounterFor(const Record& record) {
    return std::visit(
        [this](const auto& r) -> int64_t* {
            using R = std::decay_t<decltype(r)>;
            if constexpr (std::is_same_v<R, OpRecord>) return &m_opSeq;
            if constexpr (std::is_same_v<R, IncidentRecord>) return &m_incidentSeq;
            return nullptr;
        },
        record);
}

// The operand list operandList() hands this thread next: the list of the op
// record it submitted last, emptied.
thread_local std::vector<OperandRecord> t_operandList;

MESHSCOPE_HOT std::vector<OperandRecord> RankWriter::operandList() {
    return std::exchange(t_operandList, {});
}

template <typename Push>
MESHSCOPE_HOT int64_t RankWriter::enqueueWith(int64_t* counter, Push&& push) {
    if (!ownedHere()) {
        countDrop(DropReason::ForkedChild);
        return 0;
    }
    int64_t seq = 1;
    bool wake = false;
    {
        std::lock_guard lock(m_sync->mutex);
        if (m_closed) {
            countDrop(DropReason::Closed);
            return 0;
        }
        if (m_queue.size() >= m_options.queueCapacity) {
            countDrop(DropReason::QueueFull);
            return 0;
        }
        if (counter) seq = ++*counter;
        push(counter ? seq : 0);
        ++m_enqueued;
        wake = m_queue.size() == m_options.batchSize;
    }
    if (wake) m_sync->wake.notify_one();
    return seq;
}

int64_t RankWriter::enqueue(Record&& record, bool refill) {
    return enqueueWith(seqCounterFor(record), [&](int64_t seq) {
        if (seq)
            std::visit(
                [seq](auto& r) {
                    if constexpr (requires { r.seq; }) r.seq = decltype(r.seq){seq};
                },
                record);
        m_queue.push(std::move(record), refill ? &t_operandList : nullptr);
    });
}

// An op record, the most frequent: numbered and queued without a variant
// of its own on the way (one per op, on the training thread).
MESHSCOPE_HOT OpSeq RankWriter::submit(OpRecord record) {
    return OpSeq{enqueueWith(&m_opSeq, [&](int64_t seq) {
        record.seq = OpSeq{seq};
        m_queue.push(std::move(record), &t_operandList);
    })};
}

IncidentSeq RankWriter::submit(IncidentRecord record) {
    return IncidentSeq{enqueue(std::move(record))};
}

CollectiveSeq RankWriter::submit(CollectiveRecord record) {
    if (!record.seq) record.seq = reserveCollectiveSeq();
    CollectiveSeq seq = record.seq;
    return enqueue(std::move(record)) ? seq : CollectiveSeq{};
}

bool RankWriter::submit(Record record) {
    return enqueue(std::move(record)) != 0;
}

bool RankWriter::flushNow() {
    if (!ownedHere()) return false;
    std::unique_lock lock(m_sync->mutex);
    if (m_closed) return m_processed == m_enqueued;
    if (!m_thread) return false;
    uint64_t target = m_enqueued;
    m_flushRequested = true;
    m_sync->wake.notify_one();
    return m_sync->flushed.wait_for(lock, m_options.flushTimeout,
                                    [&] { return m_processed >= target; });
}

void RankWriter::run() {
    // Named so that top -H, gdb and /proc show whose thread this is.
    pthread_setname_np(pthread_self(), "meshscope-wr");
#ifdef __linux__
    // Batch scheduling: same share of the CPU, but waking up does not
    // preempt a running thread. The writer's work lands on a core that
    // waits (a rank blocked in a collective) instead of interrupting the
    // training threads when every core is busy. Failure changes nothing.
    sched_param batch{};
    batch.sched_priority = 0;
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
#endif
    for (;;) {
        bool stopping;
        RecordQueue::Blocks batch;
        {
            std::unique_lock lock(m_sync->mutex);
            m_sync->wake.wait_for(lock, m_options.flushInterval, [&] {
                return m_stopping || m_flushRequested || m_queue.size() >= m_options.batchSize;
            });
            batch = m_queue.takeAll();
            m_flushRequested = false;
            stopping = m_stopping;
        }
        size_t records = writeBatch(batch);
        RecordQueue::clearBlocks(batch);
        {
            std::lock_guard lock(m_sync->mutex);
            m_processed += records;
            m_queue.recycle(std::move(batch));
        }
        m_sync->flushed.notify_all();
        if (stopping) return;
    }
}

size_t RankWriter::writeBatch(const RecordQueue::Blocks& batch) {
    size_t records = 0;
    for (const auto& block : batch)
        records += block->size();
    std::array<uint64_t, kDropReasonCount> drops = dropSnapshot();
    bool dropsChanged = drops != m_dropsStored;
    StringInterner::Pending pending = m_interner.takePending();
    if (records == 0 && pending.empty() && !dropsChanged) return 0;
    if (!m_inserter) {  // no file: every record is counted, none kept
        countDrop(DropReason::NotRecording, records);
        return records;
    }
    int64_t lastOp = 0;
    ChunkReach reach = m_reachStored;
    try {
        sql::Transaction tx(m_db);
        m_inserter->insertPending(pending);
        m_chunk.clear();
        auto writeChunk = [&] {
            if (m_chunk.empty()) return;
            const OpChunkBounds& b = m_chunk.bounds();
            reach.timeNs = std::max(reach.timeNs, b.maxEndNs - b.minStartNs);
            reach.steps = std::max(reach.steps, b.maxStep - b.minStep);
            lastOp = b.lastSeq.value();
            m_inserter->insertOpChunk(m_chunk);
            m_chunk.clear();
        };
        for (const auto& block : batch) {
            for (size_t i = 0; i < block->size(); ++i) {
                const Record& r = (*block)[i];
                if (auto* op = std::get_if<OpRecord>(&r)) {
                    if (!m_chunk.add(*op, block->operandsOf(i))) {
                        writeChunk();
                        m_chunk.add(*op, block->operandsOf(i));
                    }
                } else {
                    m_inserter->insert(r);
                }
            }
        }
        writeChunk();
        if (reach.timeNs > m_reachStored.timeNs)
            m_inserter->writeMeta(schema::kMetaChunkTimeReach, std::to_string(reach.timeNs));
        if (reach.steps > m_reachStored.steps)
            m_inserter->writeMeta(schema::kMetaChunkStepReach, std::to_string(reach.steps));
        if (dropsChanged) writeDropRows(drops);
        tx.commit();
    } catch (const sql::Error& e) {
        m_interner.restorePending(std::move(pending));
        DropReason reason = lossReason(e);
        countDrop(reason, records);
        storeDropsOnly();
        if (!m_warned) {
            m_warned = true;
            m_options.warn(fmt::format(
                "{}: cannot write ({}: {}); records are being dropped and counted as {}",
                m_path.string(), toString(reason), e.what(), toString(reason)));
        }
        return records;
    }
    m_dropsStored = drops;
    m_reachStored = reach;
    m_written.fetch_add(records, std::memory_order_relaxed);
    if (lastOp) m_lastCommittedOp.store(lastOp, std::memory_order_release);
    return records;
}

// Why a batch that failed with `error` is lost: the file system is full,
// the file reached its own limit (max_page_count, which SQLite also reports
// as SQLITE_FULL), an I/O error (read-only remount, folder deleted, EIO), or
// anything else (a lock held by another process).
DropReason RankWriter::lossReason(const sql::Error& error) {
    switch (error.code() & 0xff) {
        case SQLITE_FULL: {
            if (m_options.maxFileBytes <= 0) return DropReason::DiskFull;
            // A batch of many pages fails below the cap, so the file's own
            // size does not tell: the file system's free space does.
            try {
                if (m_db.pragmaInt("page_count") + 1 >= m_db.pragmaInt("max_page_count"))
                    return DropReason::FileCap;
            } catch (const sql::Error&) {
            }
            struct statvfs fs {};
            constexpr uint64_t kRoomLeft = uint64_t(16) << 20;
            std::filesystem::path dir = m_path.has_parent_path() ? m_path.parent_path() : ".";
            if (::statvfs(dir.c_str(), &fs) == 0 && uint64_t(fs.f_bavail) * fs.f_frsize > kRoomLeft)
                return DropReason::FileCap;
            return DropReason::DiskFull;
        }
        case SQLITE_IOERR:
        case SQLITE_READONLY:
        case SQLITE_CANTOPEN:
            return DropReason::IoError;
        default:
            return DropReason::WriteError;
    }
}

// The drop counts and when the first record was lost (inside a transaction).
void RankWriter::writeDropRows(const std::array<uint64_t, kDropReasonCount>& drops) {
    m_inserter->writeDrops(drops);
    int64_t firstLoss = m_firstLossNs.load(std::memory_order_relaxed);
    if (firstLoss >= 0) m_inserter->writeMeta(schema::kMetaFirstLossNs, std::to_string(firstLoss));
}

std::array<uint64_t, kDropReasonCount> RankWriter::dropSnapshot() const {
    std::array<uint64_t, kDropReasonCount> drops;
    for (int i = 0; i < kDropReasonCount; ++i)
        drops[i] = m_drops[i].load();
    drops[size_t(DropReason::StringLimit)] += m_interner.limitDrops();
    return drops;
}

// After a failed batch: the drop rows exist from creation, so updating them
// in place usually succeeds even on a full disk. Best effort.
void RankWriter::storeDropsOnly() {
    std::array<uint64_t, kDropReasonCount> drops = dropSnapshot();
    try {
        sql::Transaction tx(m_db);
        writeDropRows(drops);
        tx.commit();
        m_dropsStored = drops;
    } catch (const sql::Error&) {
        // Still failing; the counts are retried with the next batch.
    }
}

void RankWriter::close() {
    if (!ownedHere()) return;
    {
        std::lock_guard lock(m_sync->mutex);
        if (m_closed) return;
        m_closed = true;
        m_stopping = true;
    }
    m_sync->wake.notify_one();
    if (m_thread) {
        m_thread->join();
        delete m_thread;
        m_thread = nullptr;
    }
    // Final drop counts and the end marker, written from this thread now that
    // the writer thread is gone.
    // Not a record of its own: a disk that takes nothing more loses the
    // marker without counting it (the counts stay as last stored, and the
    // agent tells `record` the final ones).
    if (!m_inserter) return;
    try {
        sql::Transaction tx(m_db);
        m_inserter->writeMeta("ended_ns", std::to_string(nowNs()));
        writeDropRows(dropSnapshot());
        tx.commit();
    } catch (const sql::Error&) {
    }
    m_inserter.reset();
    m_db = sql::Db();
}

WriterStats RankWriter::stats() const {
    WriterStats s;
    if (ownedHere()) {
        std::lock_guard lock(m_sync->mutex);
        s.submitted = m_enqueued;
    }
    s.written = m_written.load();
    s.drops = dropSnapshot();
    s.lastCommittedOp = OpSeq{m_lastCommittedOp.load(std::memory_order_acquire)};
    return s;
}

}  // namespace meshscope
