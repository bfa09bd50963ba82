// What core is the one source of, for the CLI and the Python package alike
// (which reads it through meshscope._capture, tests/capture/test_single_sources.py):
// the default run directory's name, the policy names and the version; and
// the rank file's tables, declared once (core/store/schema.h) for the DDL,
// the writer's INSERTs and the reader's SELECTs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "core/policy/policy.h"
#include "core/store/rank_writer.h"
#include "core/store/run_directory.h"
#include "core/store/schema.h"
#include "core/store/sqlite.h"
#include "core/version.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

// Runs the test body in UTC, restoring the process's time zone afterwards.
class InUtc : public ::testing::Test {
  protected:
    void SetUp() override {
        if (const char* tz = std::getenv("TZ")) m_saved = tz;
        setenv("TZ", "UTC", 1);
        tzset();
    }
    void TearDown() override {
        if (m_saved)
            setenv("TZ", m_saved->c_str(), 1);
        else
            unsetenv("TZ");
        tzset();
    }

  private:
    std::optional<std::string> m_saved;
};

constexpr std::time_t kWhen = 1700000000;  // 2023-11-14 22:13:20 UTC

using RunDirectoryName = InUtc;

TEST_F(RunDirectoryName, TimestampPrefixAndJob) {
    EXPECT_EQ(defaultRunName(kWhen), "20231114-221320");
    EXPECT_EQ(defaultRunName(kWhen, "pytest"), "pytest-20231114-221320");
    EXPECT_EQ(defaultRunName(kWhen, {}, "port29500"), "20231114-port29500");
    EXPECT_EQ(defaultRunName(kWhen, "pytest", "abc"), "pytest-20231114-abc");
}

TEST(RunDirectoryNameRules, UnderTheWorkingDirectory) {
    EXPECT_EQ(defaultRunDirectory("/work/dir", "20231114-221320"),
              std::filesystem::path("/work/dir/meshscope-runs/20231114-221320"));
}

TEST(RunDirectoryNameRules, JobIsTheElasticRunIdElseTheMasterPort) {
    EXPECT_EQ(defaultRunJob("d7c1", "29500"), "d7c1");
    EXPECT_EQ(defaultRunJob("none", "29500"), "port29500");
    EXPECT_EQ(defaultRunJob(std::nullopt, "1234"), "port1234");
    EXPECT_EQ(defaultRunJob(std::nullopt, std::nullopt), "port0");
}

TEST(PolicyNames, InPolicyModeOrderAndAccepted) {
    auto names = policyModeNames();
    ASSERT_FALSE(names.empty());
    for (size_t i = 0; i < names.size(); ++i) {
        EXPECT_EQ(policyModeFromString(names[i]), PolicyMode(i)) << names[i];
        EXPECT_EQ(toString(PolicyMode(i)), names[i]);
        EXPECT_EQ(Policy::named(names[i]).defaultMode(), PolicyMode(i));
    }
}

TEST(Version, NameAndVersionAgree) {
    EXPECT_EQ(std::string(kNameAndVersion), "meshscope " + std::string(kVersion));
    EXPECT_NE(std::string(kVersion).find('.'), std::string::npos);
}

// A fresh rank file has exactly the tables and columns schema.h declares,
// in their order and with their types: what the INSERTs bind and the
// SELECTs read by a column's position.
template <size_t N>
void expectTableAsDeclared(sql::Db& db, const schema::Table<N>& t) {
    sql::Stmt info(db, "SELECT name, type, pk, \"notnull\" FROM pragma_table_info(?1)");
    info.bind(1, t.name);
    size_t i = 0;
    for (; info.step(); ++i) {
        ASSERT_LT(i, N) << t.name << ": column " << info.text(0) << " is not declared";
        EXPECT_EQ(info.text(0), t.columns[i].name) << t.name << " column " << i;
        EXPECT_EQ(std::string(t.columns[i].type).rfind(info.text(1), 0), 0u)
            << t.name << "." << info.text(0) << " is " << info.text(1);
        std::string type(t.columns[i].type), name = info.text(0);
        bool key = type.find("PRIMARY KEY") != std::string::npos ||
                   std::string(t.key).find(name) != std::string::npos;
        EXPECT_EQ(info.int64(2) != 0, key) << t.name << "." << name << ": primary key";
        if (!key) {  // a WITHOUT ROWID table's key is NOT NULL whatever its type says
            EXPECT_EQ(info.int64(3) != 0, type.find("NOT NULL") != std::string::npos)
                << t.name << "." << name << ": NOT NULL";
        }
    }
    EXPECT_EQ(i, N) << t.name << ": the file has fewer columns than declared";
}

TEST(StoreTables, AFreshRankFileHasTheDeclaredTablesAndColumnsInOrder) {
    test::TempDir dir;
    RankWriter::create(dir / "rank-00000.msdb", RankIdentity{0, 1, "run"})->close();
    sql::Db db((dir / "rank-00000.msdb").string(), sql::OpenMode::ReadOnly);
    using namespace schema;
    expectTableAsDeclared(db, kMeta);
    expectTableAsDeclared(db, kStrings);
    expectTableAsDeclared(db, kStackFrames);
    expectTableAsDeclared(db, kMeshes);
    expectTableAsDeclared(db, kTensors);
    expectTableAsDeclared(db, kOpChunks);
    expectTableAsDeclared(db, kIncidentOperands);
    expectTableAsDeclared(db, kCollectives);
    expectTableAsDeclared(db, kOptimizerSteps);
    expectTableAsDeclared(db, kIncidents);
    expectTableAsDeclared(db, kDrops);
    expectTableAsDeclared(db, kDeviceTimes);
    expectTableAsDeclared(db, kReplicas);
    // no table the declarations lack; the required ones are all but the optional two
    sql::Stmt tables(db, "SELECT name FROM sqlite_schema WHERE type='table' ORDER BY name");
    std::vector<std::string> names;
    while (tables.step())
        names.push_back(tables.text(0));
    std::vector<std::string> declared(kRequiredTables.begin(), kRequiredTables.end());
    declared.emplace_back(kDeviceTimes.name);
    declared.emplace_back(kReplicas.name);
    std::sort(declared.begin(), declared.end());
    EXPECT_EQ(names, declared);
}

TEST(StoreTables, ColumnPositionsAreTheDeclarationOrder) {
    using namespace schema;
    static_assert(kCollectives["seq"] == 0 && kCollectives.param("seq") == 1);
    static_assert(kIncidents["detail_id"] == int(kIncidents.columns.size()) - 1);
    EXPECT_EQ(insertSql(kDrops), "INSERT INTO drops (reason, count) VALUES (?1, ?2)");
    EXPECT_EQ(selectSql(kMeta), "SELECT key, value FROM meta ");
}

}  // namespace
}  // namespace meshscope
