#pragma once

// What happens to each plain operand of a mixed op the policy reconciles
// (pure: GoogleTest in tests/capture/origin_rules_test.cpp). The incident's
// decision is for its first plain operand; each other one gets its own
// policy decision (a foreach op can mix optimizer state with a tensor of
// scalars), but never "observe" or "strict" for only some of them: those
// follow the incident's. Scalarizing needs a one-element tensor or a list of
// them; anything else is replicated instead.

#include <cstdint>
#include <optional>
#include <string>

#include "core/policy/policy.h"

namespace meshscope::capture {

struct PlannedOperand {
    uint16_t index = 0;                 // the operand's argument position
    std::optional<PolicyDecision> own;  // its own decision; none for the first
    bool scalarList = false;            // a list of one-element tensors
    bool oneElement = false;
};

// The action for `operand`, given the incident's `decided` action; appends
// to `rule` why an operand's action differs from it.
Action plannedAction(Action decided, const PlannedOperand& operand, std::string& rule);

}  // namespace meshscope::capture
