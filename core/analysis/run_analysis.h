#pragma once

// What a recorded run means: incidents grouped by call site with a fix per
// group, cross-rank verification of promotions (a Replicate promotion whose
// content differs across ranks is INVALID), ranks whose op or incident
// sequences diverge, ranks missing from the run, and the findings `check`
// gates on. Shared by the CLI's summary/check/report/diff and the GUI.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis/fix_suggestion.h"
#include "core/analysis/recording_reach.h"
#include "core/analysis/replica_drift.h"
#include "core/analysis/run_summary.h"
#include "core/analysis/time_breakdown.h"
#include "core/store/run_reader.h"

namespace meshscope {

struct SourceFrame {
    std::string file;
    int line = 0;
    std::string function;
    bool operator==(const SourceFrame&) const = default;
};

// "file:line" (or "<unknown>" when no user frame was recorded).
std::string formatLocation(const SourceFrame& frame);

// Cross-rank verdict on one promotion.
enum class Verdict : uint8_t {
    NotChecked = 0,  // not a promotion that must agree across ranks (Shard, raised, ...)
    Verified = 1,    // same fingerprint on every rank that recorded it
    Invalid = 2,     // fingerprints differ: ranks computed with different "replicas"
    Unverified = 3,  // only one rank recorded it, or no fingerprint
};
std::string_view toString(Verdict verdict);

// One incident of one rank, reduced to what analyses and tables need.
struct IncidentRef {
    int rank = 0;
    IncidentSeq seq;
    int64_t timeNs = 0;  // rank-local monotonic ns
    int64_t step = -1;
    uint32_t thread = 0;
    IncidentKind kind = IncidentKind::MixedTensor;
    int group = -1;      // index into RunAnalysis::groups
    int occurrence = 0;  // n-th incident of its group in its step on its rank
    Action action = Action::Observed;
    Outcome outcome = Outcome::Raised;
    std::optional<uint64_t> fingerprint;
    Verdict verdict = Verdict::NotChecked;
    uint32_t evidence = 0;  // index into RunAnalysis::evidenceTexts
};

struct OperandDetail {
    int index = 0;
    bool output = false;
    bool plain = false;  // the plain torch.Tensor of the incident
    bool scalar = false;
    double scalarValue = 0;
    std::string dtype, shape, localShape, device, placements, label;
    int64_t numel = 0;
};

// Everything recorded about one incident, strings resolved: the inspector's
// and the report's view of an incident.
struct IncidentDetail {
    int rank = 0;
    IncidentSeq seq;
    int64_t step = -1;
    int64_t timeNs = 0;
    IncidentKind kind = IncidentKind::MixedTensor;
    std::string op;  // collective incidents: the collective's kind ("all_reduce")
    OriginClass origin = OriginClass::Unknown;
    std::string evidence, policyRule, error, promotedPlacements;
    Action action = Action::Observed;
    Outcome outcome = Outcome::Raised;
    std::optional<uint64_t> fingerprint;
    int operandIndex = -1;
    std::vector<SourceFrame> stack;  // innermost user frame first
    std::vector<OperandDetail> operands;
    std::optional<MeshRecord> mesh;  // mesh of the DTensor operands
    std::string createdAt;           // creating frame of the plain tensor, "file:line"
    std::string createdIn;           // ... and its function ("Attention.forward")
    std::string detail;              // hangs: the Python stacks of all the rank's threads
    // collective incidents: the collective's position in the rank's sequence
    int64_t collectiveIndex = -1;
};

IncidentDetail describeIncident(const RankReader& rank, const IncidentRecord& incident);
// One recorded operand with its tensor's strings resolved (the tensor record
// itself in `tensor`, when asked).
OperandDetail describeOperand(const RankReader& rank, const OperandRecord& operand,
                              std::optional<TensorRecord>* tensor = nullptr);
std::vector<SourceFrame> resolveStack(const RankReader& rank, StackId stack);
std::optional<MeshRecord> findMesh(const RankReader& rank, MeshId id);

// Incidents of the same kind with the same op, origin class and user call site.
struct IncidentGroup {
    int id = 0;
    IncidentKind kind = IncidentKind::MixedTensor;
    std::string op;
    OriginClass origin = OriginClass::Unknown;
    SourceFrame site;
    int64_t count = 0;
    std::map<int, int64_t> perRank;
    std::map<int64_t, int64_t> perStep;
    std::map<Action, int64_t> actions;
    std::map<Outcome, int64_t> outcomes;
    int64_t unreconciled = 0;  // outcome other than Reconciled
    int64_t invalid = 0, verified = 0, unverified = 0;
    int64_t firstStep = -1, lastStep = -1;
    std::vector<std::string> evidence;  // distinct, first few
    int64_t distinctEvidence = 0;
    IncidentDetail example;  // the first incident of the group (lowest rank, seq)
    FixSuggestion fix;
};

// A promotion compared across ranks: incidents joined by (group, step,
// occurrence), which needs no collective at record time.
struct PromotionCheck {
    int group = -1;
    int64_t step = -1;
    int occurrence = 0;
    Action action = Action::Replicated;
    std::map<int, std::optional<uint64_t>> fingerprints;  // rank -> fingerprint
    Verdict verdict = Verdict::NotChecked;
};

// Where one rank's sequence first departs from the others'. A rank whose
// sequence ends early (`actual` empty) is the typical prelude of a hang: the
// others will wait in a collective it never joins.
struct Divergence {
    enum class Kind : uint8_t { Ops, Incidents, Collectives };
    Kind kind = Kind::Ops;
    int rank = 0;              // the rank that departs
    uint32_t thread = 0;       // ops: the thread whose sequence is compared
    int64_t index = 0;         // position in the sequence (0-based)
    int64_t step = -1;         // step of the departing entry (or of the expected one)
    std::string expected;      // what the other ranks have there ("" = they have ended)
    std::string actual;        // what this rank has ("" = its sequence ended)
    std::vector<int> others;   // ranks that have `expected`
    SourceFrame site;          // call site of the departing entry
    SourceFrame expectedSite;  // ops: the call site of what the other ranks have there
    // ops: a side had no user frame of its own (autograd's threads, torch's
    // code): its site is the nearest earlier one on its thread
    bool siteIsNearest = false;
    // collectives: the same kind on the same group with another size (one
    // rank issued a collective the other did not)
    bool sizeOnly = false;
};

// "ops", "incidents", "collectives": how reports and JSON name a kind.
std::string_view toString(Divergence::Kind kind);

// Where one rank stopped, the first thing to read about a hung, failed or
// killed run: the exception that ended it (its text and the user's line),
// the collective incident it ended in (waiting or failed), its last
// completed collective and the ones still pending, and how it ended.
struct RankStop {
    int rank = 0;
    bool closed = false;  // its writer closed cleanly
    RecordingReach::End end = RecordingReach::End::Closed;
    std::string ended;      // "exited with 1", "killed by SIGKILL ...", "died of SIGABRT ..."
    std::string exception;  // "RuntimeError: Connection closed by peer", "" when none
    SourceFrame exceptionSite;
    int64_t collectives = 0;  // how many it recorded
    // Its last completed collective: "all_reduce on default_pg (2 ranks) at h2.py:19 (step 0)"
    std::string lastCollective;
    SourceFrame lastCollectiveSite;
    int64_t lastCollectiveNs = -1;  // its start, rank-local ns; -1: none
    // Collectives still pending when its recording ended (a hang, a kill),
    // described with their call sites; the first few.
    std::vector<std::string> stillPending;
    // The collective incident it ended in, if any ("hang", "collective failed").
    std::optional<IncidentKind> stoppedIn;
    std::string pending;  // "all_reduce on default_pg (2 ranks), waited 30.0 s"
    SourceFrame pendingSite;
    int64_t pendingNs = -1;  // time of that incident, rank-local ns
    int64_t pendingIndex = -1;
    std::string state() const;  // one line: "raised ... at train.py:24; failed in ..."
};

// Ranks that stopped alike: each distinct state (and incident kind) with
// its ranks, in order of their first rank; `keep` picks the stops (all
// when empty). A hang on 1,000 ranks is one group, not 1,000 lines.
struct StopGroup {
    std::vector<int> ranks;
    const RankStop* stop = nullptr;  // the first of its ranks
};
std::vector<StopGroup> groupStops(const std::vector<RankStop>& stops,
                                  const std::function<bool(const RankStop&)>& keep = {});

struct Finding {
    FindingKind kind = FindingKind::Unreconciled;
    std::string message;  // one line, what and where
    int group = -1;       // incident group, when there is one
    int rank = -1;
};

struct RunAnalysis {
    RunSummary summary;
    std::vector<IncidentRef> incidents;      // every incident, by rank then seq
    std::vector<std::string> evidenceTexts;  // distinct evidence, shared by incidents
    std::vector<IncidentGroup> groups;       // most frequent first
    std::vector<PromotionCheck> promotionChecks;
    std::vector<Divergence> divergences;
    std::vector<RankStop> stops;  // one per readable rank, by rank
    // How far each readable rank's recording reaches (in the run's rank
    // order); ranks are compared only that far, and its notes say so.
    std::vector<RecordingReach> reach;
    std::vector<int> missingRanks;  // the first kMissingRanksListed, ascending
    int64_t missingRankCount = 0;   // all of them
    // Replicated training state compared across ranks (replica_drift.h).
    ReplicaCheck replicas;
    std::vector<Finding> findings;
    // Where the time goes: op statistics, steps per rank, the slowest rank
    // of each step (time_breakdown.h); `computed` false when not asked for.
    TimeBreakdown time;
    int64_t opsCompared = 0;
    bool opsComparedFully = false;
};

struct AnalysisOptions {
    // Compare op sequences across ranks (reads every op of every rank).
    bool compareOps = true;
    // Op statistics and the per-step breakdown (reads every op of every rank
    // with its operands).
    bool timeBreakdown = true;
    // Called now and then while reading: stage, done, total (total 0 = unknown).
    std::function<void(std::string_view, int64_t, int64_t)> progress;
};

RunAnalysis analyze(const RunReader& run, const AnalysisOptions& options = {});

// How many findings of each kind; `check` prints the lines and exits 1 when a
// finding of a kind in `failOn` exists.
std::vector<const Finding*> findingsOf(const RunAnalysis& analysis,
                                       const std::vector<FindingKind>& kinds);

// What the policy did with a group's incidents: "replicated 24, observed 4".
std::string formatActions(const IncidentGroup& group);

// One `reconciled` finding per group of mixed-tensor incidents a policy
// repaired (call site, op, origin, what the policy did, ranks, fix): what a
// CI gate forbids when code may not rely on meshscope's repairs. Not among
// `findings`: reports show these incidents as reconciled, not as problems.
std::vector<Finding> reconciledFindings(const RunAnalysis& analysis);

}  // namespace meshscope
