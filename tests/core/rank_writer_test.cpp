// RankWriter under pressure: a full queue, a failing or locked file, fork()ed
// children, and use after close. The producer never blocks or throws; every
// lost record is counted and the counts reach the file.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/store/fault_vfs.h"
#include "core/store/rank_reader.h"
#include "core/store/rank_writer.h"
#include "core/store/record_queue.h"
#include "core/store/store_error.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

OpRecord makeOp(RankWriter& w, int64_t t) {
    OpRecord op;
    op.name = w.intern("aten::add.Tensor");
    op.startNs = t;
    op.endNs = t + 1;
    return op;
}

uint64_t dropped(const RankSummary& s, const char* reason) {
    auto it = s.drops.find(reason);
    return it == s.drops.end() ? 0 : it->second;
}

TEST(RankWriter, FullQueueDropsAndCountsWithoutBlocking) {
    test::TempDir dir;
    WriterOptions options;
    options.queueCapacity = 10;
    options.batchSize = 1000;  // never reached: the writer only wakes on its interval
    options.flushInterval = std::chrono::milliseconds(60'000);
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    int accepted = 0;
    for (int i = 0; i < 100; ++i)
        accepted += w->submit(makeOp(*w, i)).valid();
    EXPECT_EQ(accepted, 10);
    WriterStats stats = w->stats();
    EXPECT_EQ(stats.submitted, 10u);
    EXPECT_EQ(stats.drops[size_t(DropReason::QueueFull)], 90u);
    w->close();

    RankReader r = RankReader::open(dir / "r.msdb");
    RankSummary s = r.summary();
    EXPECT_EQ(s.ops, 10);
    EXPECT_EQ(dropped(s, "queue_full"), 90u);
}

TEST(RankWriter, FlushNowPutsRecordsOnDiskImmediately) {
    test::TempDir dir;
    WriterOptions options;
    options.flushInterval = std::chrono::milliseconds(60'000);
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    IncidentRecord in;
    in.op = w->intern("aten::sub.Tensor");
    w->submit(in);
    ASSERT_TRUE(w->flushNow());
    // A second process' view: a separate read-only connection.
    RankReader r = RankReader::open(dir / "r.msdb");
    auto incidents = r.incidentsAfter(IncidentSeq{});
    ASSERT_EQ(incidents.size(), 1u);
    EXPECT_EQ(r.string(incidents[0].op), "aten::sub.Tensor");
}

// An op record's operand list goes straight back to the thread that
// submitted it, emptied, its storage kept: steady recording allocates none
// and no list of the training thread waits in the queue. The operands
// written are the ones submitted, not those of the reused list.
TEST(RankWriter, OperandListsStayWithTheProducer) {
    test::TempDir dir;
    WriterOptions options;
    options.flushInterval = std::chrono::milliseconds(60'000);
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    const OperandRecord* storage = nullptr;
    auto submitOp = [&](int64_t t, int operands) {
        OpRecord op = makeOp(*w, t);
        op.operands = RankWriter::operandList();
        for (int i = 0; i < operands; ++i)
            op.operands.push_back({uint16_t(i), OperandRole::Input, OperandKind::Scalar, TensorId{},
                                   double(t * 10 + i), StringId{}});
        storage = op.operands.data();
        return w->submit(std::move(op));
    };
    ASSERT_TRUE(submitOp(1, 5));
    std::vector<OperandRecord> back = RankWriter::operandList();  // before any write
    EXPECT_TRUE(back.empty());
    EXPECT_GE(back.capacity(), 5u);
    EXPECT_EQ(back.data(), storage);
    back.push_back({});  // scribbling on it changes nothing queued
    back.clear();
    ASSERT_TRUE(submitOp(2, 1));
    for (int t = 3; t < 3000; ++t)  // several queue blocks
        ASSERT_TRUE(submitOp(t, t % 7));
    ASSERT_TRUE(w->flushNow());
    RankReader r = RankReader::open(dir / "r.msdb");
    auto ops = r.opsAfter(OpSeq{});
    ASSERT_EQ(ops.size(), 2999u);
    ASSERT_EQ(ops[0].operands.size(), 5u);
    EXPECT_EQ(ops[0].operands[4].scalar, 14.0);
    ASSERT_EQ(ops[1].operands.size(), 1u);
    EXPECT_EQ(ops[1].operands[0].scalar, 20.0);
    for (const OpRecord& op : std::span(ops).subspan(2)) {
        int64_t t = op.startNs;  // makeOp's time
        ASSERT_EQ(op.operands.size(), size_t(t % 7)) << t;
        for (size_t i = 0; i < op.operands.size(); ++i)
            ASSERT_EQ(op.operands[i].scalar, double(t * 10 + int64_t(i))) << t;
    }
}

TEST(RankWriter, SubmitAfterCloseIsCounted) {
    test::TempDir dir;
    auto w = RankWriter::create(dir / "r.msdb", {});
    w->close();
    EXPECT_FALSE(w->submit(makeOp(*w, 1)).valid());
    EXPECT_EQ(w->stats().drops[size_t(DropReason::Closed)], 1u);
    EXPECT_TRUE(w->flushNow());
    w->close();  // idempotent
}

TEST(RankWriter, FullFileDropsBatchesAndStoresTheCount) {
    test::TempDir dir;
    WriterOptions options;
    options.maxFileBytes = 256 * 1024;
    std::atomic<int> warnings{0};
    std::string warning;
    options.warn = [&](const std::string& msg) {
        warning = msg;
        ++warnings;
    };
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    const int total = 50'000;
    for (int i = 0; i < total; ++i) {
        w->submit(makeOp(*w, i));
        if (i % 1000 == 999) w->flushNow();
    }
    w->close();
    WriterStats stats = w->stats();
    EXPECT_EQ(warnings.load(), 1);
    EXPECT_NE(warning.find("r.msdb"), std::string::npos) << warning;
    ASSERT_GT(stats.drops[size_t(DropReason::FileCap)], 0u);
    EXPECT_NE(warning.find("file_cap"), std::string::npos) << warning;

    RankReader r = RankReader::open(dir / "r.msdb");
    RankSummary s = r.summary();
    EXPECT_GT(s.ops, 0);
    EXPECT_EQ(uint64_t(s.ops) + dropped(s, "file_cap"), uint64_t(total));
}

// A limit below what an empty rank file takes (its schema) is raised to
// that size with one warning, and then holds: SQLite alone would keep the
// file's own size as the limit without a word.
TEST(RankWriter, FileLimitBelowTheEmptyFileIsRaisedToItAndSaidOnce) {
    test::TempDir dir;
    WriterOptions options;
    options.maxFileBytes = 20'000;
    std::vector<std::string> warnings;
    options.warn = [&](const std::string& msg) { warnings.push_back(msg); };
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("r.msdb"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("20000 bytes"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("below"), std::string::npos) << warnings[0];
    const int total = 20'000;
    for (int i = 0; i < total; ++i) {
        w->submit(makeOp(*w, i));
        if (i % 1000 == 999) w->flushNow();
    }
    w->close();
    RankSummary s = RankReader::open(dir / "r.msdb").summary();
    EXPECT_GT(dropped(s, "file_cap"), 0u);
    EXPECT_EQ(uint64_t(s.ops) + dropped(s, "file_cap"), uint64_t(total));
    EXPECT_LE(std::filesystem::file_size(dir / "r.msdb"), 256u * 1024u);
}

TEST(RankWriter, LockedFileLosesBatchesThenRecovers) {
    test::TempDir dir;
    WriterOptions options;
    options.warn = [](const std::string&) {};
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "r.msdb").c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
    for (int i = 0; i < 5; ++i)
        w->submit(makeOp(*w, i));
    w->flushNow();
    EXPECT_EQ(w->stats().drops[size_t(DropReason::WriteError)], 5u);
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    for (int i = 0; i < 7; ++i)
        w->submit(makeOp(*w, 100 + i));
    w->close();
    RankSummary s = RankReader::open(dir / "r.msdb").summary();
    EXPECT_EQ(s.ops, 7);
    EXPECT_EQ(dropped(s, "write_error"), 5u);
}

// Disk faults through the VFS shim (core/store/fault_vfs.h): each lost
// record is counted under the fault's own reason, and what was committed
// before stays readable.
struct FaultCase {
    const char* fault;
    const char* reason;
    bool storedAtEnd;  // the disk takes the final counts again
};

class DiskFaults : public ::testing::TestWithParam<FaultCase> {
  protected:
    void TearDown() override { installDiskFault({DiskFault::Kind::Full, UINT64_MAX, 0}); }
};

TEST_P(DiskFaults, EveryRecordIsWrittenOrCountedByReason) {
    test::TempDir dir;
    std::optional<DiskFault> fault = parseDiskFault(GetParam().fault);
    ASSERT_TRUE(fault);
    installDiskFault(*fault);
    WriterOptions options;
    std::vector<std::string> warnings;
    options.warn = [&](const std::string& msg) { warnings.push_back(msg); };
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    const int total = 40'000;
    for (int i = 0; i < total; ++i) {
        w->submit(makeOp(*w, i));
        if (i % 1000 == 999) w->flushNow();
    }
    w->close();
    WriterStats stats = w->stats();
    installDiskFault({DiskFault::Kind::Full, UINT64_MAX, 0});
    auto row = std::find_if(kDropReasonNames.begin(), kDropReasonNames.end(),
                            [](const auto& n) { return n.key == GetParam().reason; });
    ASSERT_NE(row, kDropReasonNames.end());
    uint64_t lost = stats.drops[size_t(row->kind)];
    EXPECT_GT(lost, 0u);
    EXPECT_EQ(stats.written + lost, stats.submitted);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(GetParam().reason), std::string::npos) << warnings[0];
    RankSummary s = RankReader::open(dir / "r.msdb").summary();
    EXPECT_GT(s.ops, 0);
    EXPECT_EQ(uint64_t(s.ops) + lost, uint64_t(total));
    if (GetParam().storedAtEnd) {
        EXPECT_EQ(dropped(s, GetParam().reason), lost);
    }
}

INSTANTIATE_TEST_SUITE_P(RankWriter, DiskFaults,
                         ::testing::Values(FaultCase{"full-after=300000", "disk_full", false},
                                           FaultCase{"full-after=300000,free-after=5", "disk_full",
                                                     true},
                                           FaultCase{"readonly-after=300000", "io_error", false}),
                         [](const auto& info) {
                             return std::string(info.index == 0   ? "DiskFull"
                                                : info.index == 1 ? "SpaceFreed"
                                                                  : "ReadOnly");
                         });

// A fault at a trigger file fails the disk exactly where the test chose:
// everything flushed before is on disk, everything after is counted.
TEST(RankWriter, DiskFaultAtATriggerFileKeepsWhatWasFlushedBefore) {
    test::TempDir dir;
    std::filesystem::path trigger = dir / "remounted";
    std::optional<DiskFault> fault = parseDiskFault("readonly-when=" + trigger.string());
    ASSERT_TRUE(fault);
    installDiskFault(*fault);
    WriterOptions options;
    options.warn = [](const std::string&) {};
    auto w = RankWriter::create(dir / "r.msdb", {}, options);
    for (int i = 0; i < 300; ++i)
        w->submit(makeOp(*w, i));
    w->flushNow();
    std::ofstream(trigger) << "";
    for (int i = 300; i < 500; ++i)
        w->submit(makeOp(*w, i));
    w->close();
    WriterStats stats = w->stats();
    installDiskFault({DiskFault::Kind::Full, UINT64_MAX, 0});
    EXPECT_EQ(stats.drops[size_t(DropReason::IoError)], 200u);
    EXPECT_EQ(stats.written + 200u, stats.submitted);
    EXPECT_EQ(RankReader::open(dir / "r.msdb").summary().ops, 300);
}

TEST(RankWriter, DiskFaultValuesAreCheckedByName) {
    std::string error;
    EXPECT_FALSE(parseDiskFault("readonly-when=", &error));
    EXPECT_NE(error.find("'readonly-when=' is not KEY=PATH"), std::string::npos) << error;
    EXPECT_FALSE(parseDiskFault("full-after=5,readonly-when=/x", &error));
    EXPECT_NE(error.find("given twice"), std::string::npos) << error;
    std::optional<DiskFault> when = parseDiskFault("full-when=/tmp/x,free-after=2");
    ASSERT_TRUE(when);
    EXPECT_EQ(when->whenExists, "/tmp/x");
    EXPECT_EQ(when->freeAfterFails, 2u);
    EXPECT_FALSE(parseDiskFault("full-after=lots", &error));
    EXPECT_NE(error.find("'full-after=lots' is not KEY=NUMBER"), std::string::npos) << error;
    EXPECT_FALSE(parseDiskFault("free-after=3", &error));
    EXPECT_NE(error.find("needs full-after"), std::string::npos) << error;
    EXPECT_FALSE(parseDiskFault("slow-after=3", &error));
    EXPECT_NE(error.find("unknown key 'slow-after'"), std::string::npos) << error;
}

// A rank that cannot create its file takes records like any other and
// counts each as not recorded: the producer's behaviour never depends on it.
TEST(RankWriter, UnrecordedWriterCountsEveryRecord) {
    auto w = RankWriter::createUnrecorded("r.msdb: cannot create rank file: disk full");
    EXPECT_EQ(w->notRecording(), "r.msdb: cannot create rank file: disk full");
    for (int i = 0; i < 500; ++i)
        EXPECT_TRUE(w->submit(makeOp(*w, i)).valid());
    EXPECT_TRUE(w->flushNow());
    w->close();
    WriterStats stats = w->stats();
    EXPECT_EQ(stats.submitted, 500u);
    EXPECT_EQ(stats.written, 0u);
    EXPECT_EQ(stats.drops[size_t(DropReason::NotRecording)], 500u);
}

TEST(RankWriter, RankFileIsCreatedExclusivelyWithoutFollowingASymlink) {
    test::TempDir dir;
    std::filesystem::path victim = dir / "victim";
    { std::ofstream(victim) << "keep"; }
    std::filesystem::create_symlink(victim, dir / "r.msdb");
    try {
        RankWriter::create(dir / "r.msdb", {});
        FAIL() << "expected StoreError";
    } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
    }
    std::ifstream in(victim);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "keep");
}

TEST(RankWriter, UncreatableFileIsAClearError) {
    try {
        RankWriter::create("/proc/meshscope-cannot-exist/r.msdb", {});
        FAIL() << "expected StoreError";
    } catch (const StoreError& e) {
        EXPECT_EQ(e.path(), "/proc/meshscope-cannot-exist/r.msdb");
        EXPECT_NE(std::string(e.what()).find("cannot create rank file"), std::string::npos);
    }
}

TEST(RankWriter, ForkedChildStaysSilentAndParentFileStaysIntact) {
    test::TempDir dir;
    auto w = RankWriter::create(dir / "r.msdb", {});
    for (int i = 0; i < 100; ++i)
        w->submit(makeOp(*w, i));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // Like a DataLoader worker: it inherits the writer and must not use it.
        bool ok = true;
        for (int i = 0; i < 100; ++i)
            ok &= !w->submit(makeOp(*w, 1000 + i)).valid();
        ok &= !w->flushNow();
        ok &= w->stats().drops[size_t(DropReason::ForkedChild)] == 100;
        w.reset();  // destroying it in the child must not close the parent's connection
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    for (int i = 0; i < 100; ++i)
        w->submit(makeOp(*w, 200 + i));
    w->close();

    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "r.msdb").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "ok");
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    RankSummary s = RankReader::open(dir / "r.msdb").summary();
    EXPECT_EQ(s.ops, 200);
    EXPECT_EQ(dropped(s, "forked_child"), 0u);  // the child's own counts never reach the file
}

TEST(RankWriter, ConcurrentProducersGetUniqueOrderedSeqs) {
    test::TempDir dir;
    auto w = RankWriter::create(dir / "r.msdb", {});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 5000; ++i) {
                OpRecord op = makeOp(*w, i);
                op.thread = uint32_t(t);
                w->submit(op);
            }
        });
    for (auto& t : threads)
        t.join();
    w->close();
    RankReader r = RankReader::open(dir / "r.msdb");
    auto ops = r.opsAfter(OpSeq{});
    ASSERT_EQ(ops.size(), 20000u);
    for (size_t i = 0; i < ops.size(); ++i)
        ASSERT_EQ(ops[i].seq.value(), int64_t(i) + 1);
}

// The hook prefetches where its next op record goes (RecordQueue::nextOp):
// a hint that points elsewhere costs a miss for nothing and saves none. It
// must name the very slots the next push writes, across a block boundary and
// after the writer took the blocks and handed them back.
TEST(RecordQueue, NextOpNamesTheSlotsTheNextPushWrites) {
    RecordQueue queue;
    std::vector<OperandRecord> list;
    for (int round = 0; round < 2; ++round) {
        std::vector<RecordQueue::NextOp> hints;
        const size_t ops = RecordQueue::kBlockSize + 3;
        for (size_t i = 0; i < ops; ++i) {
            hints.push_back(queue.nextOp());
            OpRecord op;
            op.startNs = int64_t(i);
            op.operands = std::move(list);
            op.operands.resize(1 + i % 3);
            queue.push(std::move(op), &list);
        }
        RecordQueue::Blocks blocks = queue.takeAll();
        EXPECT_EQ(queue.nextOp().record, nullptr) << "the taken blocks are the writer's";
        ASSERT_EQ(blocks.size(), 2u);
        size_t known = 0;
        for (size_t i = 0; i < ops; ++i) {
            const RecordQueue::Block& block = *blocks[i / RecordQueue::kBlockSize];
            size_t at = i % RecordQueue::kBlockSize;
            if (!hints[i].record) continue;  // a new block: nothing to fetch yet
            ++known;
            EXPECT_EQ(hints[i].record, reinterpret_cast<const char*>(&block[at])) << i;
            EXPECT_EQ(hints[i].operands, reinterpret_cast<const char*>(block.operandsOf(at).data()))
                << i;
        }
        // round 0: the first op of each block found none; round 1: the
        // blocks came back, and every op's slot was known ahead
        EXPECT_EQ(known, round == 0 ? ops - 2 : ops);
        RecordQueue::clearBlocks(blocks);
        queue.recycle(std::move(blocks));
    }
}

TEST(StringInterner, LimitReturnsMarkerAndCounts) {
    StringInterner interner(160);  // room for the marker and "short"
    StringId a = interner.intern("short");
    StringId big = interner.intern(std::string(200, 'x'));
    StringId again = interner.intern(std::string(300, 'y'));
    EXPECT_NE(a, big);
    EXPECT_EQ(big, again);
    EXPECT_EQ(interner.limitDrops(), 2u);
    EXPECT_EQ(interner.intern("short"), a);
}

TEST(StringInterner, RestoredPendingKeepsOrder) {
    StringInterner interner;
    interner.takePending();  // the marker
    interner.intern("a");
    auto first = interner.takePending();
    interner.intern("b");
    interner.restorePending(std::move(first));
    auto both = interner.takePending();
    ASSERT_EQ(both.strings.size(), 2u);
    EXPECT_EQ(both.strings[0].text, "a");
    EXPECT_EQ(both.strings[1].text, "b");
}

}  // namespace
}  // namespace meshscope
