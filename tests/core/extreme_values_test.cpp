// Well-formed files with extreme values (issue #32): INT64 extremes in times,
// huge and negative world sizes, sparse string ids, FIFOs and directories
// where files belong, unreadable files. Each is one clear StoreError or a
// result bounded by what the files hold, never a crash, a hang or an
// allocation sized by a number from a file.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/analysis/run_analysis.h"
#include "core/export/trace_json.h"
#include "core/model/run_clock.h"
#include "core/store/op_chunk.h"
#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "core/synth/synthetic_run.h"
#include "core/util/terminal_text.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

class ExtremeValues : public ::testing::Test {
  protected:
    void SetUp() override {
        SyntheticRunSpec spec;
        spec.ranks = 2;
        spec.steps = 3;
        spec.layers = 2;
        writeSyntheticRun(run(), spec);
    }

    std::filesystem::path run() const { return m_dir / "run"; }
    std::filesystem::path rankFile(int rank) const { return rankFilePath(run(), rank); }

    void sql(const std::filesystem::path& file, const std::string& text) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, text.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
            << sqlite3_errmsg(db);
        sqlite3_close(db);
    }

    // Sets one manifest field to raw JSON text.
    void setManifest(const std::string& key, const std::string& json) {
        auto file = run() / "manifest.json";
        nlohmann::json m = nlohmann::json::parse(std::ifstream(file));
        m[key] = nlohmann::json::parse(json);
        std::ofstream(file) << m.dump();
    }

    // The problems RunReader::open reports, one string.
    std::string problemsOf(const std::filesystem::path& path) {
        std::string all;
        RunReader reader = RunReader::open(path);
        for (const StoreError& e : reader.problems())
            all += std::string(e.what()) + "\n";
        return all;
    }

    test::TempDir m_dir;
};

TEST_F(ExtremeValues, ExportWritesInt64ExtremesExactly) {
    sql(rankFile(0),
        "UPDATE optimizer_steps SET start_ns=-9223372036854775808 WHERE id=1;"
        "UPDATE collectives SET start_ns=-9223372036854775808, end_ns=9223372036854775807,"
        " bytes=9223372036854775807 WHERE seq IN (1, 2);"
        "UPDATE incidents SET time_ns=9223372036854775807 WHERE seq=1;");
    RunReader reader = RunReader::open(run());
    std::ostringstream out;
    writeChromeTrace(reader, out);
    nlohmann::json trace = nlohmann::json::parse(out.str());
    EXPECT_NE(out.str().find("\"ts\":-9223372036854775.808"), std::string::npos);
    bool stepSeen = false;
    for (const auto& e : trace["traceEvents"])
        if (e.value("cat", "") == "step" && e["ts"].get<double>() < -9e15) stepSeen = true;
    EXPECT_TRUE(stepSeen);
}

TEST(SaturatingArithmetic, ClampsAtBothEnds) {
    EXPECT_EQ(saturatingSub(kMax, kMin), kMax);
    EXPECT_EQ(saturatingSub(kMin, 1), kMin);
    EXPECT_EQ(saturatingAdd(kMax, 1), kMax);
    EXPECT_EQ(saturatingAdd(kMin, -1), kMin);
    EXPECT_EQ(saturatingCast(1e30), kMax);
    EXPECT_EQ(saturatingCast(-1e30), kMin);
    EXPECT_EQ(saturatingCast(std::nan("")), 0);
    EXPECT_EQ(saturatingCast(-2.5), -2);
}

TEST(MissingRanks, FoundFromTheGapsBetweenPresentRanks) {
    MissingRanks m = findMissingRanks({0, 3, 7}, 10, 64);
    EXPECT_EQ(m.listed, (std::vector<int>{1, 2, 4, 5, 6, 8, 9}));
    EXPECT_EQ(m.count, 7);
    // A rank beyond the world size is not a gap.
    EXPECT_EQ(findMissingRanks({0, 12}, 2, 64).listed, (std::vector<int>{1}));
    MissingRanks huge = findMissingRanks({0, 1}, std::numeric_limits<int>::max(), 3);
    EXPECT_EQ(huge.listed, (std::vector<int>{2, 3, 4}));
    EXPECT_EQ(huge.count, int64_t(std::numeric_limits<int>::max()) - 2);
}

TEST_F(ExtremeValues, HugeWorldSizeListsBoundedMissingRanks) {
    for (const char* where : {"manifest", "meta"}) {
        SCOPED_TRACE(where);
        if (std::string(where) == "manifest") {
            setManifest("world_size", "2147483647");
        } else {
            setManifest("world_size", "2");
            sql(rankFile(1), "UPDATE meta SET value='2147483647' WHERE key='world_size'");
        }
        RunReader reader = RunReader::open(run());
        ASSERT_EQ(reader.worldSize(), std::numeric_limits<int>::max());
        RunAnalysis a = analyze(reader);
        EXPECT_EQ(a.missingRanks.size(), kMissingRanksListed);
        EXPECT_EQ(a.missingRanks.front(), 2);
        EXPECT_EQ(a.missingRankCount, int64_t(std::numeric_limits<int>::max()) - 2);
        size_t findings = 0;
        for (const Finding& f : a.findings)
            findings += f.kind == FindingKind::MissingRank;
        EXPECT_EQ(findings, kMissingRanksListed + 1);
        EXPECT_NE(a.findings[kMissingRanksListed].message.find("2147483581 more missing"),
                  std::string::npos)
            << a.findings[kMissingRanksListed].message;
    }
}

TEST_F(ExtremeValues, ManifestListingManyAbsentRanksGivesBoundedProblems) {
    std::string ranks = "[0,1";
    for (int r = 2; r < 100000; ++r)
        ranks += "," + std::to_string(r);
    setManifest("world_size", "100000");
    setManifest("ranks", ranks + "]");
    std::vector<StoreError> problems = RunReader::open(run()).problems();
    ASSERT_EQ(problems.size(), kMissingRanksListed + 1);
    EXPECT_NE(std::string(problems.back().what()).find("99934 more listed rank(s) have no file"),
              std::string::npos)
        << problems.back().what();
}

TEST_F(ExtremeValues, WorldSizesOutOfRangeAreRefusedByName) {
    for (const char* bad : {"-5", "0", "-2147483648", "1e30", "4294967298", "2.5", "\"2\""}) {
        SCOPED_TRACE(bad);
        setManifest("world_size", bad);
        std::string problems = problemsOf(run());
        EXPECT_NE(problems.find("manifest.json: field 'world_size' is "), std::string::npos)
            << problems;
    }
    setManifest("world_size", "2");
    setManifest("ranks", "[0, 4294967297]");
    EXPECT_NE(problemsOf(run()).find("field 'ranks' is 4294967297, out of range 0..1"),
              std::string::npos);
}

TEST_F(ExtremeValues, MetaIdentityOutOfRangeIsRefusedByName) {
    for (const char* bad : {"-5", "0", "-2147483648", "1e30", "4294967298", "2x", ""}) {
        SCOPED_TRACE(bad);
        sql(rankFile(0), std::string("UPDATE meta SET value='") + bad + "' WHERE key='world_size'");
        try {
            RankReader::open(rankFile(0));
            ADD_FAILURE() << "accepted";
        } catch (const StoreError& e) {
            EXPECT_EQ(std::string(e.what()), rankFile(0).string() + ": meta 'world_size' is '" +
                                                 bad + "', not an integer in 1..2147483647");
        }
    }
    sql(rankFile(1), "UPDATE meta SET value='-1' WHERE key='rank'");
    EXPECT_NE(problemsOf(run()).find("meta 'rank' is '-1', not an integer in 0..2147483646"),
              std::string::npos);
}

TEST_F(ExtremeValues, SparseHugeStringIdsAreReadByRow) {
    std::string rows;
    for (int64_t k = 1; k <= 40; ++k)
        rows += "INSERT INTO strings VALUES (" + std::to_string(k << 24) + ", 'far " +
                std::to_string(k) + "');";
    rows += "INSERT INTO strings VALUES (4611686018427387904, 'farthest');";
    sql(rankFile(0), rows + "UPDATE incidents SET op_id=" + std::to_string(int64_t(40) << 24));
    RankReader reader = RankReader::open(rankFile(0));
    EXPECT_EQ(reader.string(StringId{int64_t(40) << 24}), "far 40");
    EXPECT_EQ(reader.string(StringId{int64_t(1) << 24}), "far 1");
    EXPECT_EQ(reader.string(StringId{int64_t(1) << 62}), "farthest");
    EXPECT_EQ(reader.string(StringId{(int64_t(1) << 24) + 1}),
              "<missing string #" + std::to_string((int64_t(1) << 24) + 1) + ">");
    RunAnalysis a = analyze(RunReader::open(run()));
    bool named = false;
    for (const IncidentGroup& g : a.groups)
        named |= g.op == "far 40";
    EXPECT_TRUE(named);
}

TEST_F(ExtremeValues, LongStringsAreCut) {
    sql(rankFile(0), "UPDATE strings SET text=printf('%.*c', 1048576, 'x')");
    RankReader reader = RankReader::open(rankFile(0));
    std::string text = reader.string(StringId{1});
    EXPECT_EQ(text,
              std::string(RankReader::kMaxStringBytes, 'x') + "... (cut: 1048576 bytes recorded)");
}

TEST_F(ExtremeValues, DirectoryNamedManifestIsNamed) {
    std::filesystem::remove(run() / "manifest.json");
    std::filesystem::create_directory(run() / "manifest.json");
    EXPECT_NE(problemsOf(run()).find("manifest.json: is a directory, not a regular file"),
              std::string::npos);
}

// Opens the FIFO for writing after a while: a reader that blocked on it is
// released (and then reads nothing) instead of hanging the test.
class FifoRelease {
  public:
    explicit FifoRelease(std::filesystem::path fifo)
        : m_thread([fifo] {
              std::this_thread::sleep_for(std::chrono::seconds(3));
              int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
              if (fd >= 0) ::close(fd);
          }) {}
    ~FifoRelease() { m_thread.join(); }

  private:
    std::thread m_thread;
};

TEST_F(ExtremeValues, FifoNamedManifestOrRankFileIsRefusedWithoutBlocking) {
    std::filesystem::remove(run() / "manifest.json");
    ASSERT_EQ(::mkfifo((run() / "manifest.json").c_str(), 0644), 0);
    std::filesystem::remove(rankFile(1));
    ASSERT_EQ(::mkfifo(rankFile(1).c_str(), 0644), 0);
    FifoRelease release1(run() / "manifest.json"), release2(rankFile(1));
    std::string problems = problemsOf(run());
    EXPECT_NE(problems.find("manifest.json: is a FIFO, not a regular file"), std::string::npos)
        << problems;
    EXPECT_NE(problems.find("rank-00001.msdb: is a FIFO, not a regular file"), std::string::npos)
        << problems;
}

TEST_F(ExtremeValues, FifoNamedLikeARankFilesCompanionIsRefused) {
    auto shm = std::filesystem::path(rankFile(0)) += "-shm";
    ASSERT_EQ(::mkfifo(shm.c_str(), 0644), 0);
    EXPECT_NE(problemsOf(run()).find("rank-00000.msdb-shm: is a FIFO, not a regular file"),
              std::string::npos);
}

// The message of opening `file` as a user who may not read it (root reads
// everything: the check runs in a child as nobody).
std::string openAsUnprivileged(const std::filesystem::path& file) {
    int pipeFds[2];
    if (::pipe(pipeFds) != 0) return "pipe failed";
    pid_t child = ::fork();
    if (child == 0) {
        ::close(pipeFds[0]);
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
        std::string what = "opened";
        try {
            RankReader::open(file);
        } catch (const StoreError& e) {
            what = e.what();
        }
        ssize_t n = ::write(pipeFds[1], what.data(), what.size());
        ::_exit(n < 0 ? 3 : 0);
    }
    ::close(pipeFds[1]);
    std::string out;
    char buffer[512];
    for (ssize_t n; (n = ::read(pipeFds[0], buffer, sizeof buffer)) > 0;)
        out.append(buffer, size_t(n));
    ::close(pipeFds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    return out;
}

TEST_F(ExtremeValues, UnreadableRankFileSaysPermissionDenied) {
    std::filesystem::permissions(m_dir.path(), std::filesystem::perms::all);
    std::filesystem::permissions(run(), std::filesystem::perms::all);
    ASSERT_EQ(::chmod(rankFile(0).c_str(), 0), 0);
    std::string message = openAsUnprivileged(rankFile(0));
    EXPECT_EQ(message, rankFile(0).string() + ": permission denied (cannot read it)");
}

TEST(TerminalSafe, EscapesControlsAndKeepsText) {
    EXPECT_EQ(terminalSafe("aten::mm at train.py:3 \\ ü"), "aten::mm at train.py:3 \\ ü");
    EXPECT_EQ(terminalSafe("red\x1b[31m\nnext\r\t\x07\x7f"), "red\\x1b[31m\\nnext\\r\\t\\x07\\x7f");
    EXPECT_EQ(terminalSafe(std::string("nul\0x", 5)), "nul\\x00x");
    EXPECT_EQ(terminalSafe("csi\xc2\x9b"
                           "31m"),
              "csi\\u009b31m");  // C1 control
    EXPECT_EQ(terminalSafe("bad\xff"), "bad\xef\xbf\xbd");
}

TEST(OpChunkBounds, ColumnsThatDoNotDescribeTheOpsAreDamage) {
    OpChunkEncoder enc;
    for (int64_t s = 1; s <= 5; ++s) {
        OpRecord op;
        op.seq = OpSeq{s};
        op.startNs = s * 10;
        op.endNs = s * 10 + 5;
        op.step = s / 2;
        ASSERT_TRUE(enc.add(op));
    }
    EXPECT_EQ(decodeOpChunk(enc.bounds(), enc.bytes()).size(), 5u);
    auto refused = [&](OpChunkBounds b, std::string bytes, const char* what) {
        try {
            decodeOpChunk(b, bytes);
            ADD_FAILURE() << "accepted: " << what;
        } catch (const ChunkError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    OpChunkBounds fewer = enc.bounds();
    fewer.count = 4;  // the seqs 1..5 hold five ops
    refused(fewer, enc.bytes(), "claims 4 ops for seqs 1..5");
    fewer.lastSeq = OpSeq{4};
    refused(fewer, enc.bytes(), "bytes after its last op");
    OpChunkBounds later = enc.bounds();
    later.minStartNs = 11;
    refused(later, enc.bytes(), "time bounds");
    OpChunkBounds steps = enc.bounds();
    steps.maxStep = 99;
    refused(steps, enc.bytes(), "step bounds");
}

TEST_F(ExtremeValues, VerifyFindsWhatOnlyAFullReadFinds) {
    sql(rankFile(0), "UPDATE op_chunks SET count=count-1");
    RankReader reader = RankReader::open(rankFile(0));
    EXPECT_GT(reader.summary().ops, 0);  // the headers alone look fine
    EXPECT_THROW(reader.verify(RankReader::VerifyDepth::Ops), StoreError);
    RunReader opened = RunReader::open(run());
    ASSERT_EQ(opened.ranks().size(), 2u);
    try {
        opened.ranks()[0].verify(RankReader::VerifyDepth::Everything);
        ADD_FAILURE() << "accepted";
    } catch (const StoreError& e) {
        opened.dropRank(0, e);
    }
    EXPECT_EQ(opened.ranks().size(), 1u);
    EXPECT_NE(std::string(opened.problems().back().what()).find("corrupt op chunk"),
              std::string::npos);
    opened.ranks()[0].verify(RankReader::VerifyDepth::Everything);  // the other rank is clean
}

}  // namespace
}  // namespace meshscope
