// What core is the one source of, for the CLI and the Python package alike
// (which reads it through meshscope._capture, tests/capture/test_single_sources.py):
// the default run directory's name, the policy names and the version.

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

#include "core/policy/policy.h"
#include "core/store/run_directory.h"
#include "core/version.h"

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

}  // namespace
}  // namespace meshscope
