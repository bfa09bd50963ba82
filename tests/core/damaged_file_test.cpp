// A corpus of damaged and foreign files: each gives a one-line StoreError
// that names the file, never a crash.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <random>

#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "core/store/schema.h"
#include "core/synth/synthetic_run.h"
#include "tests/core/test_support.h"
#include "tests/fuzz/exercise_reader.h"

namespace meshscope {
namespace {

class DamagedFiles : public ::testing::Test {
  protected:
    void SetUp() override {
        SyntheticRunSpec spec;
        spec.ranks = 1;
        spec.steps = 40;
        writeSyntheticRun(m_dir / "run", spec);
        m_valid = rankFilePath(m_dir / "run", 0);
        std::ifstream in(m_valid, std::ios::binary);
        m_bytes.assign(std::istreambuf_iterator<char>(in), {});
        ASSERT_GT(m_bytes.size(), 8192u * 4);
    }

    std::filesystem::path write(const std::string& name, const std::string& bytes) {
        auto path = m_dir / name;
        std::ofstream(path, std::ios::binary) << bytes;
        return path;
    }

    // Returns the error message, or "" when the file read cleanly.
    std::string problemWith(const std::filesystem::path& file) {
        try {
            test::exerciseRankFile(file);
            return "";
        } catch (const StoreError& e) {
            std::string what = e.what();
            EXPECT_EQ(e.path(), file.string());
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
            EXPECT_EQ(what.rfind(file.string(), 0), 0u) << what;
            return what;
        }
    }

    void sqlOn(const std::filesystem::path& file, const char* sql) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK)
            << sqlite3_errmsg(db);
        sqlite3_close(db);
    }

    test::TempDir m_dir;
    std::filesystem::path m_valid;
    std::string m_bytes;
};

TEST_F(DamagedFiles, ValidFileReadsCleanly) {
    EXPECT_EQ(problemWith(m_valid), "");
}

TEST_F(DamagedFiles, MissingFile) {
    EXPECT_NE(problemWith(m_dir / "nope.msdb").find("no such file"), std::string::npos);
}

TEST_F(DamagedFiles, Directory) {
    std::filesystem::create_directory(m_dir / "d.msdb");
    EXPECT_NE(problemWith(m_dir / "d.msdb").find("not a regular file"), std::string::npos);
}

TEST_F(DamagedFiles, EmptyFile) {
    EXPECT_NE(problemWith(write("empty.msdb", "")).find("empty file"), std::string::npos);
}

TEST_F(DamagedFiles, TextFile) {
    auto msg = problemWith(write("notes.msdb", "step,loss\n1,0.5\n2,0.4\n"));
    EXPECT_NE(msg.find("not an SQLite database"), std::string::npos) << msg;
}

TEST_F(DamagedFiles, TruncatedAtSeveralPoints) {
    for (size_t cut : {size_t(10), size_t(50), size_t(99), size_t(100), size_t(4096), size_t(8192),
                       m_bytes.size() / 2, m_bytes.size() - 8192, m_bytes.size() - 1}) {
        auto msg =
            problemWith(write("cut-" + std::to_string(cut) + ".msdb", m_bytes.substr(0, cut)));
        EXPECT_NE(msg, "") << "cut at " << cut;
        EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                    msg.find("not an SQLite database") != std::string::npos)
            << "cut at " << cut << ": " << msg;
    }
}

TEST_F(DamagedFiles, FlippedBytesNeverCrash) {
    std::mt19937 rng(1234);
    int errors = 0;
    for (int round = 0; round < 60; ++round) {
        std::string bytes = m_bytes;
        int flips = 1 + int(rng() % 40);
        for (int i = 0; i < flips; ++i) {
            size_t at = round < 10 ? rng() % 100 : 100 + rng() % (bytes.size() - 100);
            bytes[at] = char(bytes[at] ^ (1 + rng() % 255));
        }
        errors += !problemWith(write("flip-" + std::to_string(round) + ".msdb", bytes)).empty();
    }
    EXPECT_GT(errors, 0);  // damage is detected at least sometimes; it never crashes
}

TEST_F(DamagedFiles, ForeignSqliteDatabase) {
    auto file = m_dir / "foreign.sqlite";
    sqlOn(file, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    auto msg = problemWith(file);
    EXPECT_NE(
        msg.find("not a meshscope rank file (SQLite database with application_id 0x00000000)"),
        std::string::npos)
        << msg;
}

TEST_F(DamagedFiles, NewerSchema) {
    auto file = write("newer.msdb", m_bytes);
    sqlOn(file, ("PRAGMA user_version=" + std::to_string(schema::kSchemaVersion + 1)).c_str());
    auto msg = problemWith(file);
    EXPECT_NE(msg.find("newer meshscope"), std::string::npos) << msg;
    EXPECT_NE(msg.find("upgrade"), std::string::npos) << msg;
}

TEST_F(DamagedFiles, OlderSchema) {
    auto file = write("older.msdb", m_bytes);
    sqlOn(file, "PRAGMA user_version=0");
    EXPECT_NE(problemWith(file).find("older meshscope (schema v0"), std::string::npos);
}

TEST_F(DamagedFiles, MissingTable) {
    auto file = write("notable.msdb", m_bytes);
    sqlOn(file, "DROP TABLE incidents");
    EXPECT_NE(problemWith(file).find("table 'incidents' is missing"), std::string::npos);
}

TEST_F(DamagedFiles, MissingMeta) {
    auto file = write("nometa.msdb", m_bytes);
    sqlOn(file, "DELETE FROM meta WHERE key='rank'");
    EXPECT_NE(problemWith(file).find("no 'rank' in meta"), std::string::npos);
}

// Hostile schemas (issue #45): SQL of the file's own that would run inside
// every query is refused before any query, by name.
TEST_F(DamagedFiles, GeneratedColumnIsRefused) {
    auto file = write("generated.msdb", m_bytes);
    // a crafted file of this kind cost `check` 24 s and 1.8 GB
    sqlOn(file,
          "ALTER TABLE strings ADD COLUMN big BLOB GENERATED ALWAYS AS (zeroblob(100000000))");
    std::string problem = problemWith(file);
    EXPECT_NE(problem.find("unexpected schema: column 'big' of table 'strings' is generated"),
              std::string::npos)
        << problem;
}

TEST_F(DamagedFiles, ViewWhereATableBelongsIsRefused) {
    auto file = write("view.msdb", m_bytes);
    sqlOn(file, "DROP TABLE drops; CREATE VIEW drops AS SELECT 'queue_full' AS reason, 1 AS count");
    std::string problem = problemWith(file);
    EXPECT_NE(problem.find("unexpected schema: it holds view 'drops'"), std::string::npos)
        << problem;
}

TEST_F(DamagedFiles, ForeignTableOrIndexIsRefused) {
    auto table = write("table.msdb", m_bytes);
    sqlOn(table, "CREATE TABLE extra (x)");
    EXPECT_NE(problemWith(table).find("unexpected schema: it holds table 'extra'"),
              std::string::npos);
    auto index = write("index.msdb", m_bytes);
    sqlOn(index, "CREATE INDEX slow ON strings (length(text) * 7)");
    EXPECT_NE(problemWith(index).find("unexpected schema: it holds index 'slow'"),
              std::string::npos);
}

TEST_F(DamagedFiles, ColumnsOtherThanTheWritersAreRefused) {
    auto renamed = write("renamed.msdb", m_bytes);
    sqlOn(renamed, "ALTER TABLE drops RENAME COLUMN count TO n");
    std::string problem = problemWith(renamed);
    EXPECT_NE(problem.find("table 'drops' has column 'n' where meshscope writes 'count'"),
              std::string::npos)
        << problem;
    auto added = write("added.msdb", m_bytes);
    sqlOn(added, "ALTER TABLE drops ADD COLUMN note TEXT");
    EXPECT_NE(problemWith(added).find("table 'drops' has column 'note' where meshscope writes "
                                      "no more columns"),
              std::string::npos);
}

TEST_F(DamagedFiles, ReaderNeverModifiesTheFile) {
    auto file = write("copy.msdb", m_bytes);
    problemWith(file);
    std::ifstream in(file, std::ios::binary);
    std::string after(std::istreambuf_iterator<char>(in), {});
    EXPECT_EQ(after, m_bytes);
}

}  // namespace
}  // namespace meshscope
