#include "capture/agent/incidents/origin_rules.h"

namespace meshscope::capture {
namespace {

bool optimizerOwner(const OriginFacts& f, Classification& out) {
    if (f.owner.origin != OriginClass::OptimizerState) return false;
    out.origin = OriginClass::OptimizerState;
    out.evidence = f.owner.evidence;
    return true;
}

// A: a module's own parameter or buffer, still a plain tensor.
bool parameter(const OriginFacts& f, Classification& out) {
    if (f.owner.origin != OriginClass::UnshardedParam && !f.isParameter) return false;
    out.origin = OriginClass::UnshardedParam;
    // the adapters' text says which plan left it out (describe_tensor)
    out.evidence = f.owner.evidence.empty()
                       ? "an nn.Parameter not in the sharding plan (its module was not seen "
                         "in forward)"
                       : f.owner.evidence;
    return true;
}

// F: weights being loaded or synced.
bool weightLoading(const OriginFacts& f, Classification& out) {
    if (!f.insideLoadStateDict && !f.copyIntoDTensor) return false;
    out.origin = OriginClass::WeightLoading;
    out.evidence = f.insideLoadStateDict
                       ? "inside load_state_dict"
                       : "plain tensor copied into a DTensor by " + std::string(f.opName);
    if (f.provenance) out.evidence += "; the tensor was " + f.provenance->evidence;
    return true;
}

bool userMade(const OriginFacts& f) {
    return f.provenance && f.provenance->origin == OriginClass::UserCode;
}

// B-E, H: recorded when the tensor was made (or derived from one that was);
// made by the user's code and used in an optimizer step: E (next rule).
bool recorded(const OriginFacts& f, Classification& out) {
    if (!f.provenance || f.provenance->origin == OriginClass::Unknown ||
        (userMade(f) && f.phase == Phase::Optimizer))
        return false;
    out.origin = f.provenance->origin;
    out.evidence = f.provenance->derived ? "derived from a tensor " + f.provenance->evidence
                                         : f.provenance->evidence;
    if (f.provenance->derived && !f.lastStep.empty())
        out.evidence += "; last step " + std::string(f.lastStep);
    return true;
}

bool usedInOptimizer(const OriginFacts& f, Classification& out) {
    if (f.phase != Phase::Optimizer) return false;
    out.origin = OriginClass::OptimizerState;
    out.evidence =
        "used inside " +
        (f.phaseLabel.empty() ? std::string("an optimizer step") : std::string(f.phaseLabel)) +
        (userMade(f) ? "; " + f.provenance->evidence
                     : std::string("; created before meshscope saw it"));
    return true;
}

// G: no evidence; says why none was recorded.
bool noEvidence(const OriginFacts& f, Classification& out) {
    out.origin = OriginClass::Unknown;
    std::string phase = " (phase " + std::string(toString(f.phase)) + ")";
    std::string at(f.attachedAt);
    if (!at.empty() && !f.madeBeforeAttach)
        out.evidence = "no birth recorded: made after meshscope.attach() at " + at +
                       " by code whose ops meshscope does not see: another thread than the one "
                       "that attached (meshscope follows that one and autograd), or no op at all "
                       "(torch.frombuffer, a DLPack import, a C++ extension)" +
                       phase;
    else if (!at.empty())
        out.evidence = "no birth recorded: made before meshscope.attach() at " + at +
                       " (attach before the model and data are built, or run the script under "
                       "`meshscope record`, which attaches as the interpreter starts, to see "
                       "where it was made)" +
                       phase;
    else
        out.evidence =
            "no birth recorded: made by code that dispatches no op meshscope sees "
            "(torch.frombuffer, a DLPack import, a C++ extension) or while the "
            "interpreter started, before meshscope attached" +
            phase;
    return true;
}

}  // namespace

const std::array<OriginRule, 6> kOriginRules{{
    {"optimizer state (owner)", optimizerOwner},
    {"parameter or buffer", parameter},
    {"weight loading", weightLoading},
    {"recorded provenance", recorded},
    {"used in an optimizer step", usedInOptimizer},
    {"no evidence", noEvidence},
}};

Classification classifyFacts(const OriginFacts& facts) {
    Classification out;
    if (facts.provenance) out.createdAt = facts.provenance->createdAt;
    if (facts.owner.bornElsewhere) {  // a parameter's gradient is born where its parameter was
        out.createdAt = facts.owner.bornAt;
        out.bornAsOwner = true;
    }
    for (const OriginRule& rule : kOriginRules)
        if (rule.applies(facts, out)) break;
    return out;
}

Provenance birthOf(Phase phase, std::string_view label, std::string_view what,
                   std::string_view where, StackId site) {
    Provenance p;
    p.createdAt = site;
    std::string made = "created by " + std::string(what);
    std::string in(label);
    if (phase == Phase::Forward) {
        p.origin = OriginClass::CreatedInForward;
        p.evidence = made + " inside " + (in.empty() ? std::string("forward") : in);
    } else if (phase == Phase::Optimizer) {
        p.origin = OriginClass::OptimizerState;
        p.evidence = made + " in " + (in.empty() ? std::string("an optimizer step") : in);
    } else if (phase == Phase::Backward) {  // a custom Function's backward, a hook
        p.origin = OriginClass::CreatedInForward;
        p.evidence = made +
                     " inside backward (a custom autograd Function's backward or a "
                     "backward hook)";
    } else if (phase == Phase::Data) {
        p.origin = OriginClass::InputData;
        p.evidence = made + " while loading data" + (in.empty() ? "" : " (" + in + ")");
    } else {
        p.origin = OriginClass::UserCode;
        p.evidence = made + " in user code outside forward";
    }
    p.evidence += where;
    return p;
}

}  // namespace meshscope::capture
