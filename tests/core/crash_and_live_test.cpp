// A writer process killed with SIGKILL leaves a sound database with every
// committed batch; a reader polling a run while a writer appends sees rows
// arrive.

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/store/rank_reader.h"
#include "core/store/rank_writer.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

std::string integrityCheck(const std::filesystem::path& file) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr);
    std::string result = sqlite3_step(stmt) == SQLITE_ROW
                             ? reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))
                             : sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return result;
}

// Child body: writes ops forever, reporting the highest committed op seq.
[[noreturn]] void writeUntilKilled(const std::filesystem::path& file, int reportFd,
                                   bool flushEach) {
    auto w = RankWriter::create(file, {});
    StringId name = w->intern("aten::mm");
    int64_t last = 0;
    for (int64_t i = 0;; ++i) {
        OpRecord op;
        op.name = name;
        op.startNs = i;
        op.endNs = i + 1;
        w->submit(op);
        if (i % 2000 == 1999) {
            if (flushEach) w->flushNow();
            int64_t committed = w->stats().lastCommittedOp.value();
            if (committed != last) {
                last = committed;
                if (write(reportFd, &committed, sizeof committed) < 0) _exit(2);
            }
        }
    }
}

void killWriterAfter(int64_t target, bool flushEach) {
    test::TempDir dir;
    auto file = dir / "rank-00000.msdb";
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        writeUntilKilled(file, fds[1], flushEach);
    }
    close(fds[1]);
    int64_t committed = 0, value = 0;
    while (committed < target && read(fds[0], &value, sizeof value) == sizeof value)
        committed = value;
    kill(pid, SIGKILL);
    while (read(fds[0], &value, sizeof value) == sizeof value)
        committed = std::max(committed, value);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    ASSERT_GE(committed, target);

    // Read-only first, as a user opening the crashed run would: the -wal and
    // -shm files of the killed writer are still there, unrecovered.
    ASSERT_TRUE(std::filesystem::exists(file.string() + "-wal"));
    RankReader r = RankReader::open(file);
    EXPECT_EQ(integrityCheck(file), "ok");
    EXPECT_FALSE(r.info().endedNs.has_value());  // it never closed
    RankSummary s = r.summary();
    EXPECT_GE(s.ops, committed);
    auto tail = r.opsAfter(OpSeq{s.ops - 1});
    ASSERT_EQ(tail.size(), 1u);
    EXPECT_EQ(tail[0].seq.value(), s.ops);  // no gaps: seqs 1..ops
}

TEST(Crash, SigkillKeepsEveryBackgroundCommittedBatch) {
    killWriterAfter(200'000, false);
}

TEST(Crash, SigkillKeepsEveryFlushedRecord) {
    killWriterAfter(50'000, true);
}

// A rank file its writer closed never changes again: it is read immutable,
// nothing written beside it (no -wal, no -shm). One still being written is
// read the shared way (its -shm), and its committed rows are read.
TEST(LiveRead, AClosedFileIsReadWithoutWritingBesideIt) {
    test::TempDir dir;
    auto beside = [](const std::filesystem::path& file, const char* suffix) {
        return std::filesystem::exists(std::filesystem::path(file) += suffix);
    };
    auto writeOps = [](RankWriter& w, int n) {
        StringId name = w.intern("aten::add.Tensor");
        for (int i = 0; i < n; ++i) {
            OpRecord op;
            op.name = name;
            w.submit(op);
        }
        w.flushNow();
    };
    auto closed = dir / "rank-00000.msdb";
    {
        auto w = RankWriter::create(closed, {});
        writeOps(*w, 100);
        w->close();
    }
    ASSERT_FALSE(beside(closed, "-shm"));
    {
        RankReader r = RankReader::open(closed);
        EXPECT_TRUE(r.info().endedNs.has_value());
        EXPECT_EQ(r.summary().ops, 100);
        r.verify(RankReader::VerifyDepth::Everything);
        EXPECT_FALSE(beside(closed, "-shm"));
        EXPECT_FALSE(beside(closed, "-wal"));
    }
    auto live = dir / "rank-00001.msdb";
    auto w = RankWriter::create(live, {});
    writeOps(*w, 60);
    RankReader r = RankReader::open(live);
    EXPECT_FALSE(r.info().endedNs.has_value());
    EXPECT_TRUE(beside(live, "-shm"));
    EXPECT_EQ(r.summary().ops, 60);
    w->close();
}

TEST(LiveRead, ReaderSeesRowsArriveWhileWriterAppends) {
    test::TempDir dir;
    auto file = dir / "rank-00000.msdb";
    int ready[2], go[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(go), 0);
    const int kBatches = 40, kPerBatch = 250;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto w = RankWriter::create(file, {});
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(2);
        StringId name = w->intern("aten::add.Tensor");
        for (int b = 0; b < kBatches; ++b) {
            for (int i = 0; i < kPerBatch; ++i) {
                OpRecord op;
                op.name = name;
                op.startNs = b * kPerBatch + i;
                op.endNs = op.startNs + 1;
                w->submit(op);
            }
            w->flushNow();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        w->close();
        _exit(0);
    }
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    RankReader r = RankReader::open(file);  // opened while the writer is live
    EXPECT_FALSE(r.info().endedNs);
    ASSERT_EQ(write(go[1], &c, 1), 1);

    OpSeq last;
    int polls = 0, pollsWithRows = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (last.value() < kBatches * kPerBatch && std::chrono::steady_clock::now() < deadline) {
        auto rows = r.opsAfter(last);
        ++polls;
        if (!rows.empty()) {
            ++pollsWithRows;
            EXPECT_EQ(rows.front().seq.value(), last.value() + 1);
            last = rows.back().seq;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_EQ(last.value(), kBatches * kPerBatch);
    EXPECT_GT(pollsWithRows, 3);  // rows arrived over time, not all at the end
    r.refreshInfo();
    EXPECT_TRUE(r.info().endedNs);  // the reader sees the writer close
    EXPECT_EQ(r.string(r.opsAfter(OpSeq{}, 1).at(0).name), "aten::add.Tensor");
}

}  // namespace
}  // namespace meshscope
