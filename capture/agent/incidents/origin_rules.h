#pragma once

// The pure rules behind an incident's origin class (A-H,
// core/model/vocabulary.h) and a new tensor's birth, from facts the agent
// gathered: no Python, no torch state, so GoogleTest covers them
// (tests/capture/origin_rules_test.cpp). classifier.cpp and births.cpp
// gather the facts (the adapters' owner lookup, the phase, the user frame)
// and apply these.

#include <array>
#include <string>
#include <string_view>

#include "capture/agent/ops/tensor_table.h"
#include "core/store/records.h"

namespace meshscope::capture {

struct Classification {
    OriginClass origin = OriginClass::Unknown;
    std::string evidence;
    StackId createdAt;  // where the tensor was created, when known
    // createdAt is another tensor's birth (a gradient's parameter's), not
    // the one the tensor's own provenance records
    bool bornAsOwner = false;
};

// What a module or optimizer the adapters saw says the tensor is (or what
// its view's base is): class A (a parameter or buffer) or E (optimizer
// state), with the adapters' text; Unknown when neither.
struct OwnerFacts {
    OriginClass origin = OriginClass::Unknown;
    std::string evidence;
    bool bornElsewhere = false;  // its birth is another tensor's (a gradient's parameter)
    StackId bornAt{};            // that tensor's birth site, when known
};

// Everything the rules read about the plain operand of a mixed op.
struct OriginFacts {
    OwnerFacts owner;
    bool isParameter = false;  // an nn.Parameter (owner or not)
    const Provenance* provenance = nullptr;
    std::string_view opName;
    bool copyIntoDTensor = false;  // copy_ with a DTensor destination
    bool insideLoadStateDict = false;
    Phase phase = Phase::Other;
    std::string_view phaseLabel;  // "torch.optim.Adam.step()"
    std::string_view lastStep;    // "aten::slice.Tensor at train.py:10", or empty
    std::string_view attachedAt;  // where attach() was called, or empty
    bool madeBeforeAttach = false;
};

// One rule: the class it decides, and its test; the first that matches wins.
struct OriginRule {
    std::string_view name;
    bool (*applies)(const OriginFacts&, Classification&);
};
// In order: optimizer state by owner; a parameter; weights being loaded;
// the recorded provenance; used in an optimizer step; else no evidence (G).
extern const std::array<OriginRule, 6> kOriginRules;

Classification classifyFacts(const OriginFacts& facts);

// A tensor made now by `what` in `phase` (`label`: the adapters' name for
// it, "" none) at `where` (" at train.py:12", or ""): forward B, optimizer E,
// data loading D, anything else H.
Provenance birthOf(Phase phase, std::string_view label, std::string_view what,
                   std::string_view where, StackId site);

}  // namespace meshscope::capture
