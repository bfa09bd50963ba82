#pragma once

// RankWriter is the only way records reach a rank file. Producers (the
// capture agent's hooks, on training and autograd threads) hand records over
// by value; a background thread inserts them in batches, one transaction per
// batch. submit() never blocks on I/O and never throws: when the bounded
// queue is full, or SQLite fails (disk full, read-only, locked file), records
// are dropped and counted per reason, and the counts are stored in the file.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/store/op_chunk.h"
#include "core/store/record_queue.h"
#include "core/store/records.h"
#include "core/store/sqlite.h"
#include "core/store/string_interner.h"

namespace meshscope {

struct RankIdentity {
    int rank = 0;
    int worldSize = 1;
    std::string runId;
};

struct WriterOptions {
    size_t queueCapacity = size_t(1)
                           << 18;  // records waiting for the writer thread (bounds memory)
    // A commit costs the writer about 0.25 ms of CPU whatever its size (WAL
    // frames, index pages): every 200 ms, or every 2048 records at high op
    // rates, so the queue's blocks are reused while still in cache.
    size_t batchSize = 2048;                       // records that wake the writer early
    std::chrono::milliseconds flushInterval{200};  // longest time a record waits
    std::chrono::milliseconds flushTimeout{5000};  // flushNow() gives up after this
    int64_t maxFileBytes = 0;                      // 0 = unlimited; past it writes fail (dropped)
    // Called at most once, from the writer thread, the first time records are
    // lost to a write error. Defaults to one line on stderr.
    std::function<void(const std::string&)> warn;
};

struct WriterStats {
    uint64_t submitted = 0;  // records accepted into the queue
    uint64_t written = 0;    // records committed to the file
    std::array<uint64_t, kDropReasonCount> drops{};
    OpSeq lastCommittedOp;  // highest op seq known to be on disk
};

class RankWriter {
  public:
    // Creates a new rank file (refuses an existing one). Throws StoreError
    // naming the file when it cannot be created.
    static std::unique_ptr<RankWriter> create(const std::filesystem::path& file,
                                              const RankIdentity& identity,
                                              WriterOptions options = {});
    // A writer for a rank whose file could not be created (`why`): it takes
    // records like any other, keeps none, and counts each as a NotRecording
    // drop, so the producer behaves the same whatever the disk holds.
    static std::unique_ptr<RankWriter> createUnrecorded(std::string why,
                                                        WriterOptions options = {});
    // Empty when recording; else why this writer keeps nothing.
    const std::string& notRecording() const { return m_notRecording; }
    ~RankWriter();
    RankWriter(const RankWriter&) = delete;
    RankWriter& operator=(const RankWriter&) = delete;

    // Monotonic ns since this rank's clock origin (stored in meta).
    int64_t nowNs() const;

    // In a fork()ed child these return invalid ids without touching locks
    // that a parent thread may have held at fork time.
    StringId intern(std::string_view text) {
        return ownedHere() ? m_interner.intern(text) : StringId{};
    }
    StackId internStack(std::span<const Frame> frames) {
        return ownedHere() ? m_interner.internStack(frames) : StackId{};
    }
    // Ids for records the producer creates; unique within the file.
    MeshId newMeshId() { return MeshId{++m_nextMesh}; }
    TensorId newTensorId() { return TensorId{++m_nextTensor}; }

    // Queue a record. Ops and incidents get their seq here (in queue order, so
    // a reader that polls by seq never misses a row; collectives: below); a
    // dropped one returns an invalid seq.
    OpSeq submit(OpRecord record);
    IncidentSeq submit(IncidentRecord record);
    // Storage for the operands of the next OpRecord this thread submits:
    // the list of the op record it submitted last, emptied (its operands
    // were copied into the queue, see RecordQueue), or a new list at first.
    static std::vector<OperandRecord> operandList();
    // Fetches, for writing, the queue memory the next op record will be
    // copied to: called a few hundred ns before submit(OpRecord), its cache
    // misses overlap the producer's work instead of stalling the queue's lock.
    void prefetchNextOp() const { m_queue.prefetchNextOp(); }
    // A collective's seq is its place in the order the rank issued them:
    // reserved at issue, submitted with the record once the collective's life
    // ended (CollectiveRecord). One without a reserved seq gets the next.
    CollectiveSeq reserveCollectiveSeq() {
        return CollectiveSeq{m_collectiveSeq.fetch_add(1, std::memory_order_relaxed) + 1};
    }
    CollectiveSeq submit(CollectiveRecord record);
    bool submit(Record record);

    // Blocks until everything submitted before the call is committed (or its
    // loss counted). For records that must be on disk before an exception
    // propagates. False if it timed out or this process does not own the file.
    bool flushNow();

    // Flushes, stops the writer thread, stores the final drop counts and
    // closes the file. Further submits count as Closed drops.
    void close();

    WriterStats stats() const;
    const std::filesystem::path& path() const { return m_path; }

  private:
    RankWriter(std::filesystem::path path, sql::Db db, WriterOptions options);
    bool ownedHere() const;
    // seq, 1 if unsequenced, 0 if dropped; `refill`: an op record's operand
    // list goes back to this thread for its next op record
    int64_t enqueue(Record&& record, bool refill = false);
    // enqueue() with the checks and the lock around push(seq), which gives
    // the record its seq (when `counter` numbers its kind) and queues it.
    template <typename Push>
    int64_t enqueueWith(int64_t* counter, Push&& push);
    int64_t* seqCounterFor(const Record& record);
    void run();
    size_t writeBatch(const RecordQueue::Blocks& batch);  // returns the record count
    void countDrop(DropReason reason, uint64_t n = 1);
    DropReason lossReason(const sql::Error& error);
    void storeDropsOnly();
    void writeDropRows(const std::array<uint64_t, kDropReasonCount>& drops);
    std::array<uint64_t, kDropReasonCount> dropSnapshot() const;

    std::filesystem::path m_path;
    std::string m_notRecording;
    sql::Db m_db;
    WriterOptions m_options;
    StringInterner m_interner;
    std::unique_ptr<class RecordInserter> m_inserter;
    std::chrono::steady_clock::time_point m_clockOrigin;
    uint64_t m_forkGeneration;

    // Heap-allocated so a fork()ed child can leak them: destroying a
    // condition variable that a parent thread waited on at fork time blocks.
    struct Sync {
        std::mutex mutex;  // guards the queue, seq counters and flags below
        std::condition_variable wake;
        std::condition_variable flushed;
    };
    std::unique_ptr<Sync> m_sync = std::make_unique<Sync>();
    RecordQueue m_queue;
    int64_t m_opSeq = 0, m_incidentSeq = 0;
    std::atomic<int64_t> m_collectiveSeq{0};  // reserved without the queue's lock
    uint64_t m_enqueued = 0;                  // total accepted
    uint64_t m_processed = 0;                 // total committed or counted lost
    bool m_flushRequested = false;
    bool m_stopping = false;
    bool m_closed = false;

    std::atomic<int64_t> m_nextMesh{0}, m_nextTensor{0};
    std::atomic<uint64_t> m_written{0};
    std::atomic<int64_t> m_lastCommittedOp{0};
    std::array<std::atomic<uint64_t>, kDropReasonCount> m_drops{};
    std::atomic<int64_t> m_firstLossNs{-1};  // schema::kMetaFirstLossNs; -1: none yet
    std::array<uint64_t, kDropReasonCount> m_dropsStored{};  // writer thread only
    bool m_warned = false;                                   // writer thread only
    // Largest time/step extent of any stored op chunk (meta; bounds readers'
    // index scans). Writer thread only, like the chunk being built.
    struct ChunkReach {
        int64_t timeNs = 0;
        int64_t steps = 0;
    };
    ChunkReach m_reachStored;
    OpChunkEncoder m_chunk;
    std::thread* m_thread = nullptr;  // raw: a forked child must leak, never join, it
};

}  // namespace meshscope
