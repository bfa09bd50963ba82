#pragma once

// Reconciliation policy: which action the capture agent takes for a
// mixed-tensor incident. A policy is a default mode plus ordered rules from a
// TOML file, each matching by op name, origin class, file or module (globs);
// the first matching rule decides. Lives in core so the agent, the CLI and
// the GUI explain decisions the same way.
//
//   default = "auto"
//   [[rule]]
//   op = "aten::_foreach_*"      # optional glob on the aten op name
//   origin = ["E"]               # optional origin classes A-H
//   file = "*/optimizers/*.py"   # optional glob on the user frame's file
//   module = "keras.src.*"       # optional glob on its Python module
//   action = "scalar"            # observe | replicate | shard | scalar | strict | auto
//   shard_dim = 0                # for "shard": the batch dimension

#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/records.h"

namespace meshscope {

// A bad policy file or name. what() is one line: "FILE:LINE:COL: problem".
class PolicyError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// What the policy may choose. Auto resolves per origin class (see decide()).
enum class PolicyMode : uint8_t { Observe, Replicate, Shard, Scalar, Strict, Auto };

std::optional<PolicyMode> policyModeFromString(std::string_view text);
std::string_view toString(PolicyMode mode);
// Every policy name, in PolicyMode order: the one list that the CLI, the
// agent and the Python package (meshscope._capture.policy_names()) accept.
std::span<const std::string_view> policyModeNames();

// What the agent knows about an incident when it must decide.
struct IncidentFacts {
    std::string_view op;  // "aten::sub.Tensor"
    OriginClass origin = OriginClass::Unknown;
    std::string_view file;    // user frame's file
    std::string_view module;  // user frame's Python module
    int64_t numel = 0;        // of the plain operand
    // The plain operand is a tensor of per-tensor scalars of a foreach op
    // (`_foreach_addcdiv_.Tensor(..., scalars)`): it can become a Python list.
    bool scalarList = false;
    // The DTensor's mesh can hold a per-rank batch: it has a data-parallel dim
    // ("batch", "data", "dp", ...) or unnamed dims. A mesh of only named
    // model dims means every rank must see the same data (tensor parallel).
    bool meshHasBatchDim = true;
};

struct PolicyDecision {
    Action action = Action::Observed;
    int shardDim = 0;  // for ShardedFromLocal
    std::string rule;  // human-readable: which rule or default decided, and why
};

struct PolicyRule {
    std::optional<std::string> op, file, module;  // globs
    std::vector<OriginClass> origins;             // empty = any
    PolicyMode mode = PolicyMode::Observe;
    int shardDim = 0;
    std::string source;  // "policy.toml:12" for explanations
};

class Policy {
  public:
    // A policy with no rules: "observe", "replicate", "auto", "strict", ...
    static Policy named(std::string_view name);
    // Parses a TOML policy file; throws PolicyError naming file and line.
    static Policy fromFile(const std::filesystem::path& file);
    static Policy fromToml(std::string_view text, const std::string& sourceName);

    PolicyDecision decide(const IncidentFacts& facts) const;

    PolicyMode defaultMode() const { return m_default; }
    const std::vector<PolicyRule>& rules() const { return m_rules; }

  private:
    PolicyMode m_default = PolicyMode::Observe;
    std::vector<PolicyRule> m_rules;
};

}  // namespace meshscope
