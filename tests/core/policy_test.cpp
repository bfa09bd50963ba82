// Reconciliation policies: named modes, auto's per-origin choices, TOML
// rules matched in order, and bad policy files as one-line errors.

#include <gtest/gtest.h>

#include <fstream>

#include "core/policy/policy.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

IncidentFacts facts(std::string_view op, OriginClass origin, int64_t numel = 64,
                    std::string_view file = "train.py", std::string_view module = "__main__") {
    return {op, origin, file, module, numel};
}

std::string errorOf(std::string_view toml) {
    try {
        Policy::fromToml(toml, "p.toml");
    } catch (const PolicyError& e) {
        return e.what();
    }
    return "";
}

TEST(Policy, NamedModes) {
    auto in = facts("aten::sub.Tensor", OriginClass::InputData);
    EXPECT_EQ(Policy::named("observe").decide(in).action, Action::Observed);
    EXPECT_EQ(Policy::named("replicate").decide(in).action, Action::Replicated);
    EXPECT_EQ(Policy::named("strict").decide(in).action, Action::StrictError);
    EXPECT_EQ(Policy::named("replicate").decide(in).rule, "policy replicate");
    EXPECT_THROW(Policy::named("promote"), PolicyError);
}

TEST(Policy, AutoChoosesPerOrigin) {
    Policy p = Policy::named("auto");
    PolicyDecision data = p.decide(facts("aten::sub.Tensor", OriginClass::InputData));
    EXPECT_EQ(data.action, Action::ShardedFromLocal);
    EXPECT_EQ(data.shardDim, 0);
    EXPECT_NE(data.rule.find("per-rank input data"), std::string::npos);
    EXPECT_EQ(p.decide(facts("aten::_foreach_mul_.Tensor", OriginClass::OptimizerState, 1)).action,
              Action::Scalarized);
    EXPECT_EQ(p.decide(facts("aten::mul.Tensor", OriginClass::CreatedInForward, 1)).action,
              Action::Replicated);
    PolicyDecision other = p.decide(facts("aten::add.Tensor", OriginClass::CreatedInForward));
    EXPECT_EQ(other.action, Action::Replicated);
    EXPECT_NE(other.rule.find("fingerprinted"), std::string::npos);
}

TEST(Policy, FirstMatchingRuleWins) {
    Policy p = Policy::fromToml(R"(
default = "observe"

[[rule]]
op = "aten::_foreach_*"
origin = ["E"]
action = "scalar"

[[rule]]
file = "*/data/*.py"
action = "shard"
shard_dim = 1

[[rule]]
module = "keras.src.*"
origin = "B"
action = "auto"

[[rule]]
op = "aten::index.*"
action = "strict"
)",
                                "p.toml");
    ASSERT_EQ(p.rules().size(), 4u);
    PolicyDecision opt = p.decide(facts("aten::_foreach_add_.List", OriginClass::OptimizerState));
    EXPECT_EQ(opt.action, Action::Scalarized);
    EXPECT_EQ(opt.rule, "rule #1 (p.toml:4): scalar");
    // Same op, other origin: rule 1 does not match; nothing else does either.
    EXPECT_EQ(p.decide(facts("aten::_foreach_add_.List", OriginClass::Unknown)).action,
              Action::Observed);
    PolicyDecision data =
        p.decide(facts("aten::index.Tensor", OriginClass::InputData, 64, "/src/data/loader.py"));
    EXPECT_EQ(data.action, Action::ShardedFromLocal);  // rule 2 before rule 4
    EXPECT_EQ(data.shardDim, 1);
    PolicyDecision keras = p.decide(facts("aten::add.Tensor", OriginClass::CreatedInForward, 64,
                                          "layers.py", "keras.src.layers.core"));
    EXPECT_EQ(keras.action, Action::Replicated);
    EXPECT_NE(keras.rule.find("rule #3 (p.toml:14): auto:"), std::string::npos) << keras.rule;
    EXPECT_EQ(p.decide(facts("aten::index.Tensor", OriginClass::InputData)).action,
              Action::StrictError);
}

TEST(Policy, BadFilesAreOneLineErrorsWithTheLine) {
    EXPECT_EQ(errorOf("default = \"promote\""),
              "p.toml:1:11: 'default' must be one of observe, replicate, shard, scalar, strict, "
              "auto (got 'promote')");
    EXPECT_EQ(errorOf("[[rule]]\nop = \"aten::*\"\n"), "p.toml:1:1: [[rule]] has no 'action'");
    EXPECT_NE(errorOf("[[rule]]\naction = \"observe\"\nacton = \"x\"\n")
                  .find("p.toml:3:9: unknown key 'acton'"),
              std::string::npos);
    EXPECT_NE(errorOf("[[rule]]\naction = \"observe\"\norigin = [\"Z\"]\n").find("p.toml:3:"),
              std::string::npos);
    EXPECT_NE(errorOf("[[rule]]\naction = \"shard\"\nshard_dim = -1\n").find("'shard_dim' must be"),
              std::string::npos);
    EXPECT_NE(errorOf("rule = 3").find("'rule' must be written as [[rule]] tables"),
              std::string::npos);
    EXPECT_NE(errorOf("defaults = \"auto\"").find("unknown key 'defaults'"), std::string::npos);
    std::string syntax = errorOf("default = \"auto\nx");
    EXPECT_EQ(syntax.rfind("p.toml:1:", 0), 0u) << syntax;
    EXPECT_NE(syntax.find("not valid TOML"), std::string::npos) << syntax;
    EXPECT_EQ(syntax.find('\n'), std::string::npos) << syntax;
}

TEST(Policy, FromFile) {
    test::TempDir dir;
    std::ofstream(dir / "policy.toml") << "default = \"strict\"\n";
    EXPECT_EQ(Policy::fromFile(dir / "policy.toml").defaultMode(), PolicyMode::Strict);
    try {
        Policy::fromFile(dir / "absent.toml");
        FAIL();
    } catch (const PolicyError& e) {
        EXPECT_EQ(std::string(e.what()),
                  (dir / "absent.toml").string() +
                      ": neither a policy name (observe, replicate, shard, scalar, strict, auto) "
                      "nor a policy file (no such file)");
    }
}

// A mistyped policy name reads as a file that is not there: the error lists
// the names and suggests the closest; a directory is no policy file.
TEST(Policy, MistypedNameSuggestsTheClosest) {
    test::TempDir dir;
    auto message = [](const std::filesystem::path& file) {
        try {
            Policy::fromFile(file);
        } catch (const PolicyError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_TRUE(message(dir / "autoo").ends_with("did you mean auto?")) << message(dir / "autoo");
    EXPECT_TRUE(message(dir / "obsrve").ends_with("did you mean observe?"));
    EXPECT_TRUE(message(dir / "x.toml").ends_with("(no such file)"));
    std::filesystem::create_directory(dir / "strict.d");
    EXPECT_NE(message(dir / "strict.d").find("(not a regular file)"), std::string::npos);
}

}  // namespace
}  // namespace meshscope
