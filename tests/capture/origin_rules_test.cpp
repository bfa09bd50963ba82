// The pure rules of the agent: an incident's origin class from the facts
// gathered about its plain operand (an ordered rule list, first match wins),
// a new tensor's birth by phase (capture/agent/incidents/origin_rules.h), and the
// promotion plan of a reconciled op (capture/agent/incidents/promotion_plan.h).

#include "capture/agent/incidents/origin_rules.h"
#include "capture/agent/incidents/promotion_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace meshscope;
using namespace meshscope::capture;

namespace {

Provenance made(OriginClass origin, std::string evidence, bool derived = false) {
    return Provenance{origin, std::move(evidence), StackId(7), derived};
}

}  // namespace

TEST(OriginRules, AreOrderedFromTheStrongestEvidenceToNone) {
    std::vector<std::string> names;
    for (const OriginRule& rule : kOriginRules)
        names.emplace_back(rule.name);
    EXPECT_EQ(names, (std::vector<std::string>{"optimizer state (owner)", "parameter or buffer",
                                               "weight loading", "recorded provenance",
                                               "used in an optimizer step", "no evidence"}));
}

TEST(OriginRules, AnOwnerBeatsWhereTheTensorWasMade) {
    Provenance forward = made(OriginClass::CreatedInForward, "created by aten::ones in forward");
    OriginFacts f;
    f.provenance = &forward;
    f.owner = {OriginClass::OptimizerState, "optimizer Adam state 'exp_avg' of fc.weight"};
    f.isParameter = true;  // state beats even a Parameter
    Classification c = classifyFacts(f);
    EXPECT_EQ(c.origin, OriginClass::OptimizerState);
    EXPECT_EQ(c.evidence, "optimizer Adam state 'exp_avg' of fc.weight");
    EXPECT_EQ(c.createdAt, StackId(7));  // its own birth, still

    f.owner = {OriginClass::UnshardedParam, "parameter lm_head.weight of Model"};
    EXPECT_EQ(classifyFacts(f).origin, OriginClass::UnshardedParam);
    EXPECT_EQ(classifyFacts(f).evidence, "parameter lm_head.weight of Model");
}

TEST(OriginRules, AParameterNoModuleNamedSaysWhy) {
    OriginFacts f;
    f.isParameter = true;
    Classification c = classifyFacts(f);
    EXPECT_EQ(c.origin, OriginClass::UnshardedParam);
    EXPECT_NE(c.evidence.find("not in the sharding plan"), std::string::npos) << c.evidence;
}

TEST(OriginRules, WeightLoadingBeatsProvenanceAndQuotesIt) {
    Provenance user = made(OriginClass::UserCode, "created by aten::randn in user code");
    OriginFacts f;
    f.provenance = &user;
    f.copyIntoDTensor = true;
    f.opName = "aten::copy_";
    Classification c = classifyFacts(f);
    EXPECT_EQ(c.origin, OriginClass::WeightLoading);
    EXPECT_EQ(c.evidence,
              "plain tensor copied into a DTensor by aten::copy_; the tensor was created by "
              "aten::randn in user code");
    f.insideLoadStateDict = true;
    EXPECT_EQ(classifyFacts(f).evidence.rfind("inside load_state_dict", 0), 0u);
}

TEST(OriginRules, ProvenanceGivesTheClassAndADerivedOneItsLastStep) {
    Provenance data = made(OriginClass::InputData, "created by DataLoader batch #3", true);
    OriginFacts f;
    f.provenance = &data;
    f.lastStep = "aten::slice.Tensor at train.py:10";
    f.phase = Phase::Forward;
    Classification c = classifyFacts(f);
    EXPECT_EQ(c.origin, OriginClass::InputData);
    EXPECT_EQ(c.evidence,
              "derived from a tensor created by DataLoader batch #3; last step aten::slice.Tensor "
              "at train.py:10");
    data.derived = false;
    EXPECT_EQ(classifyFacts(f).evidence, "created by DataLoader batch #3");
}

TEST(OriginRules, UserMadeTensorsUsedByTheOptimizerAreItsState) {
    Provenance user = made(OriginClass::UserCode, "created by aten::tensor in user code");
    OriginFacts f;
    f.provenance = &user;
    f.phase = Phase::Optimizer;
    f.phaseLabel = "torch.optim.Adam.step()";
    Classification c = classifyFacts(f);
    EXPECT_EQ(c.origin, OriginClass::OptimizerState);
    EXPECT_EQ(c.evidence,
              "used inside torch.optim.Adam.step(); created by aten::tensor in user code");
    f.phase = Phase::Forward;  // elsewhere its own class stands
    EXPECT_EQ(classifyFacts(f).origin, OriginClass::UserCode);
    f.provenance = nullptr;  // never seen made, used by the optimizer
    f.phase = Phase::Optimizer;
    f.phaseLabel = "";
    EXPECT_EQ(classifyFacts(f).evidence,
              "used inside an optimizer step; created before meshscope saw it");
}

TEST(OriginRules, NoEvidenceSaysWhyNoneWasRecorded) {
    OriginFacts f;
    f.phase = Phase::Backward;
    Classification c = classifyFacts(f);
    EXPECT_EQ(c.origin, OriginClass::Unknown);
    EXPECT_NE(c.evidence.find("before meshscope attached (phase backward)"), std::string::npos)
        << c.evidence;
    f.attachedAt = "train.py:40";
    EXPECT_NE(classifyFacts(f).evidence.find("made after meshscope.attach() at train.py:40"),
              std::string::npos);
    f.madeBeforeAttach = true;
    EXPECT_NE(classifyFacts(f).evidence.find("made before meshscope.attach() at train.py:40"),
              std::string::npos);
}

TEST(OriginRules, AGradientIsBornWhereItsParameterWas) {
    OriginFacts f;
    f.owner = {OriginClass::UnshardedParam, "gradient of parameter fc.weight", true, StackId(42)};
    Classification c = classifyFacts(f);
    EXPECT_TRUE(c.bornAsOwner);
    EXPECT_EQ(c.createdAt, StackId(42));
}

// Every combination of facts gets one class and evidence, decided by the
// first rule that applies.
TEST(OriginRules, EveryCombinationIsDecidedByTheFirstRuleThatApplies) {
    std::vector<Provenance> provenances = {
        made(OriginClass::CreatedInForward, "f"), made(OriginClass::InputData, "d", true),
        made(OriginClass::UserCode, "u"), made(OriginClass::Unknown, "?")};
    int cases = 0;
    for (int p = -1; p < int(provenances.size()); ++p)
        for (OriginClass owner :
             {OriginClass::Unknown, OriginClass::UnshardedParam, OriginClass::OptimizerState})
            for (int flags = 0; flags < 8; ++flags)
                for (uint8_t phase = 0; phase < uint8_t(Phase::End); ++phase) {
                    OriginFacts f;
                    f.provenance = p < 0 ? nullptr : &provenances[size_t(p)];
                    f.owner.origin = owner;
                    f.isParameter = flags & 1;
                    f.copyIntoDTensor = flags & 2;
                    f.insideLoadStateDict = flags & 4;
                    f.phase = Phase(phase);
                    Classification c = classifyFacts(f);
                    Classification first;
                    for (const OriginRule& rule : kOriginRules)
                        if (rule.applies(f, first)) break;
                    EXPECT_EQ(c.origin, first.origin);
                    EXPECT_FALSE(c.evidence.empty() && owner == OriginClass::Unknown &&
                                 !f.isParameter)
                        << "no evidence for a decided class";
                    ++cases;
                }
    EXPECT_EQ(cases, 5 * 3 * 8 * int(Phase::End));
}

TEST(Births, TheClassFollowsThePhase) {
    struct Case {
        Phase phase;
        const char* label;
        OriginClass origin;
        const char* evidence;
    };
    for (const Case& k : {
             Case{Phase::Forward, "", OriginClass::CreatedInForward,
                  "created by aten::ones inside forward at m.py:3"},
             Case{Phase::Forward, "Block.forward()", OriginClass::CreatedInForward,
                  "created by aten::ones inside Block.forward() at m.py:3"},
             Case{Phase::Optimizer, "torch.optim.SGD.step()", OriginClass::OptimizerState,
                  "created by aten::ones in torch.optim.SGD.step() at m.py:3"},
             Case{Phase::Data, "DataLoader batch #2", OriginClass::InputData,
                  "created by aten::ones while loading data (DataLoader batch #2) at m.py:3"},
             Case{Phase::Other, "", OriginClass::UserCode,
                  "created by aten::ones in user code outside forward at m.py:3"},
             // only Python code's tensors are tagged in backward: the user's own
             Case{Phase::Backward, "", OriginClass::CreatedInForward,
                  "created by aten::ones inside backward (a custom autograd Function's "
                  "backward or a backward hook) at m.py:3"},
         }) {
        Provenance p = birthOf(k.phase, k.label, "aten::ones", " at m.py:3", StackId(5));
        EXPECT_EQ(p.origin, k.origin) << k.evidence;
        EXPECT_EQ(p.evidence, k.evidence);
        EXPECT_EQ(p.createdAt, StackId(5));
        EXPECT_FALSE(p.derived);
    }
}

// The promotion plan: each plain operand of a reconciled op.
TEST(PromotionPlan, OtherOperandsFollowTheirOwnDecisionButNeverObserveAlone) {
    std::string rule = "auto: replicate";
    PlannedOperand first{0, std::nullopt, false, false};
    EXPECT_EQ(plannedAction(Action::Replicated, first, rule), Action::Replicated);

    PlannedOperand scalars{2, PolicyDecision{Action::Scalarized, 0, "rule 2: scalarize"}, true,
                           false};
    EXPECT_EQ(plannedAction(Action::Replicated, scalars, rule), Action::Scalarized);
    EXPECT_EQ(rule, "auto: replicate; operand 2: rule 2: scalarize");

    PlannedOperand observed{3, PolicyDecision{Action::Observed, 0, "observe"}, false, false};
    EXPECT_EQ(plannedAction(Action::Replicated, observed, rule), Action::Replicated);
    PlannedOperand strict{4, PolicyDecision{Action::StrictError, 0, "strict"}, false, false};
    EXPECT_EQ(plannedAction(Action::ShardedFromLocal, strict, rule), Action::ShardedFromLocal);
    PlannedOperand same{5, PolicyDecision{Action::Replicated, 0, "same"}, false, false};
    EXPECT_EQ(plannedAction(Action::Replicated, same, rule), Action::Replicated);
    EXPECT_EQ(rule, "auto: replicate; operand 2: rule 2: scalarize");  // only differences said
}

TEST(PromotionPlan, OnlyOneElementTensorsAndScalarListsAreScalarized) {
    std::string rule;
    PlannedOperand big{0, std::nullopt, false, false};
    EXPECT_EQ(plannedAction(Action::Scalarized, big, rule), Action::Replicated);
    PlannedOperand one{0, std::nullopt, false, true};
    EXPECT_EQ(plannedAction(Action::Scalarized, one, rule), Action::Scalarized);
    PlannedOperand list{0, std::nullopt, true, false};
    EXPECT_EQ(plannedAction(Action::Scalarized, list, rule), Action::Scalarized);
}
