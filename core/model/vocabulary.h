#pragma once

// meshscope's vocabulary, each kind of thing in one table: the origin
// classes of a plain tensor in a mixed-tensor incident, the
// kinds of incident, and the kinds of finding `check` gates on. Everything
// else (the store, the analyses, every report format, the GUI, the capture
// agent) reads these tables: a new origin class or kind is one enum value
// and one row here, and the static_asserts below refuse an enum value
// without its row, as Tracy keeps its queue types beside their size table.
// The bottom layer of core: no dependency but the standard library.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshscope {

// ---- origin classes ----

// Where the plain tensor of a mixed-tensor incident came from. Stored as its
// letter; the letters are contiguous from 'A', End one past the last.
enum class OriginClass : char {
    UnshardedParam = 'A',  // parameter/buffer left out of the sharding plan
    CreatedInForward,      // 'B'
    StrippedDTensor,       // 'C': to_local(), casts, use_local_output, custom kernels
    InputData,             // 'D'
    OptimizerState,        // 'E'
    WeightLoading,         // 'F'
    Unknown,               // 'G'
    UserCode,              // 'H': made by user code outside forward (script, loop, loss)
    End,
};

struct OriginInfo {
    OriginClass origin;
    std::string_view label;        // "A: parameter or buffer not in the sharding plan"
    std::string_view description;  // "a parameter or buffer left out of the sharding plan"
    std::string_view sarifName;    // SARIF rule name: "MixedTensorUnshardedParameter"
    std::string_view fixSummary;   // the usual right fix, one sentence
    // A line of Python to start from; {mesh}, {batch_dim} and {name} (the
    // user's name for the plain tensor, else `placeholder`) are filled in
    // (suggestFix). Empty: no automatic suggestion.
    std::string_view fixCode;
    std::string_view placeholder = "x";
};

inline constexpr std::array kOrigins = std::to_array<OriginInfo>({
    {OriginClass::UnshardedParam, "A: parameter or buffer not in the sharding plan",
     "a parameter or buffer left out of the sharding plan", "MixedTensorUnshardedParameter",
     "shard the parameter too (add it to the parallelize plan, or group tied modules so they "
     "share one placement)",
     "{name} = nn.Parameter(distribute_tensor({name}, {mesh}, [Replicate()]))", "module.weight"},
    {OriginClass::CreatedInForward, "B: tensor created inside forward",
     "a tensor created inside forward", "MixedTensorCreatedInForward",
     "create the tensor from a DTensor (`*_like`) or promote it explicitly",
     "{name} = DTensor.from_local({name}, {mesh}, [Replicate()])", "mask"},
    {OriginClass::StrippedDTensor, "C: DTensor stripped to a plain tensor",
     "a DTensor stripped to a plain tensor", "MixedTensorStrippedDTensor",
     "keep the DTensor instead of its local shard or full tensor; where local computation is "
     "meant, wrap it with local_map / register_sharding, or re-wrap its result with the "
     "placements it stands for (Replicate() for a full_tensor())",
     "{name} = DTensor.from_local({name}, {mesh}, [Replicate()])", "out"},
    {OriginClass::InputData, "D: input data not distributed", "input data not distributed",
     "MixedTensorInputData",
     "distribute each batch: every rank's batch is its shard of the global batch",
     "{name} = DTensor.from_local({name}, {mesh}, [Shard({batch_dim})])", "batch"},
    {OriginClass::OptimizerState, "E: optimizer state or hyperparameter",
     "optimizer or grad-clipping state", "MixedTensorOptimizerState",
     "create optimizer state with *_like(param) and keep hyperparameters as Python floats",
     "state['exp_avg'] = torch.zeros_like(param)  # lr = float(lr)"},
    {OriginClass::WeightLoading, "F: weight loading or syncing",
     "weights loaded or synced as plain tensors", "MixedTensorWeightLoading",
     "distribute the full tensor before copying it into a DTensor, or use the DCP state-dict "
     "helpers",
     "param.copy_(distribute_tensor({name}, param.device_mesh, param.placements))", "full"},
    {OriginClass::Unknown, "G: unknown origin", "origin unknown", "MixedTensorUnknownOrigin",
     "no automatic suggestion: follow the evidence and the creating frame", ""},
    {OriginClass::UserCode, "H: made by user code outside forward",
     "made by user code outside forward (script, training loop, loss)", "MixedTensorUserCode",
     "make the tensor a DTensor where it is created (distribute_tensor, or DTensor.from_local "
     "with the placements the op's other operands have)",
     "{name} = distribute_tensor({name}, {mesh}, [Replicate()])"},
});

consteval bool originTableIsComplete() {
    if (kOrigins.size() != size_t(char(OriginClass::End) - 'A')) return false;
    for (size_t i = 0; i < kOrigins.size(); ++i)
        if (char(kOrigins[i].origin) != char('A' + i) || kOrigins[i].label.empty() ||
            kOrigins[i].label[0] != char('A' + i))
            return false;
    return true;
}
static_assert(originTableIsComplete(),
              "kOrigins needs one row per OriginClass, in letter order, each label starting "
              "with its letter");

// The row of `origin` (Unknown's for a value outside the table).
const OriginInfo& originInfo(OriginClass origin);
inline char originLetter(OriginClass origin) {
    return char(originInfo(origin).origin);
}
inline std::string originText(OriginClass origin) {
    return std::string(1, originLetter(origin));
}
std::optional<OriginClass> originFromChar(char c);
inline std::string_view toString(OriginClass origin) {
    return originInfo(origin).label;
}
// "A-H": the letters in use (from the origin table), for messages.
std::string originLetterRange();

// ---- incident kinds ----

// What went wrong in an incident: a plain tensor meeting DTensors, an op
// DTensor has no sharding strategy for, any other error DTensor's dispatch
// or a redistribution raised, a collective that failed, or one that did not
// complete in time (the watchdog). Stored as its index.
enum class IncidentKind : uint8_t {
    MixedTensor,
    NoShardingStrategy,
    DTensorError,
    CollectiveError,
    CollectiveHang,
    PartialRead,
    End,
};

struct IncidentKindInfo {
    IncidentKind kind;
    std::string_view key;         // "mixed-tensor": SARIF rule ids, file names
    std::string_view title;       // "Plain torch.Tensor mixed with DTensors"
    std::string_view tag;         // as a table cell shows it: "mixed tensor"
    std::string_view sarifRule;   // rule id; mixed tensors: a prefix, rules are per origin
    std::string_view fixSummary;  // the usual right fix, one sentence
    // 0xRRGGBB: the timeline marker and report tag of the kind (mixed
    // tensors are coloured by their state instead: kIncidentStates)
    uint32_t rgb;
};

inline constexpr std::array kIncidentKinds = std::to_array<IncidentKindInfo>({
    {IncidentKind::MixedTensor, "mixed-tensor", "Plain torch.Tensor mixed with DTensors",
     "mixed tensor", "meshscope/mixed-tensor",
     "make the plain tensor a DTensor where it is created (by origin class)", 0x455A64},
    {IncidentKind::NoShardingStrategy, "no-sharding-strategy",
     "An op DTensor has no sharding strategy for", "no strategy", "meshscope/no-sharding-strategy",
     "register a strategy with register_sharding, run the call on local shards with "
     "local_map, or redistribute its operands to a placement that has a strategy",
     0x795548},
    {IncidentKind::DTensorError, "dtensor-error", "DTensor dispatch or redistribution error",
     "DTensor error", "meshscope/dtensor-error",
     "make the operands agree: one mesh, valid Shard dims, placements the op accepts", 0xE65100},
    {IncidentKind::CollectiveError, "collective-error", "A collective failed", "collective failed",
     "meshscope/collective-error",
     "make every rank issue the same collectives in the same order, on the same group", 0x3949AB},
    {IncidentKind::CollectiveHang, "collective-hang", "A collective did not complete in time",
     "hang", "meshscope/collective-hang",
     "make every rank issue the same collectives in the same order, on the same group", 0x212121},
    {IncidentKind::PartialRead, "partial-read",
     "A Partial DTensor read as a number or a local tensor", "partial read",
     "meshscope/partial-read",
     "reduce it first, on every rank: full_tensor() (a collective), or redistribute to "
     "Replicate()",
     0x8E24AA},
});

// Whether `table` has one row per enumerator before End, in enum order.
template <typename Table, typename Enum>
consteval bool kindTableIsComplete(const Table& table, Enum end) {
    if (table.size() != size_t(end)) return false;
    for (size_t i = 0; i < table.size(); ++i)
        if (size_t(table[i].kind) != i) return false;
    return true;
}
static_assert(kindTableIsComplete(kIncidentKinds, IncidentKind::End),
              "kIncidentKinds needs one row per IncidentKind");

const IncidentKindInfo& incidentKindInfo(IncidentKind kind);
inline std::string_view toString(IncidentKind kind) {
    return incidentKindInfo(kind).key;
}
std::optional<IncidentKind> incidentKindFromString(std::string_view key);
// The kind stored as `value`; nullopt for a value outside the table.
std::optional<IncidentKind> incidentKindFromIndex(int64_t value);

// ---- incident states ----

// How an incident ended, as the timeline's markers, the reports' tags and
// the incident table colour it.
enum class IncidentState : uint8_t {
    Raised,    // the op raised: the plain tensor was not reconciled
    Promoted,  // promoted to a DTensor and the op ran
    Invalid,   // promoted, but the ranks promoted different content
    End,
};

struct IncidentStateInfo {
    IncidentState kind;
    std::string_view key;      // "raised": CSS classes, file names
    std::string_view label;    // as a tag shows it: "INVALID"
    uint32_t rgb;              // 0xRRGGBB, the marker's colour
    std::string_view meaning;  // one sentence for a legend
};

inline constexpr std::array kIncidentStates = std::to_array<IncidentStateInfo>({
    {IncidentState::Raised, "raised", "raised", 0xC62828,
     "the op raised: the plain tensor was not reconciled"},
    {IncidentState::Promoted, "promoted", "promoted", 0x2E7D32,
     "the plain tensor was promoted to a DTensor and the op ran"},
    {IncidentState::Invalid, "invalid", "INVALID", 0xAD1457,
     "promoted, but the ranks promoted different content as if it were the same"},
});
static_assert(kindTableIsComplete(kIncidentStates, IncidentState::End),
              "kIncidentStates needs one row per IncidentState");

inline const IncidentStateInfo& incidentStateInfo(IncidentState state) {
    return kIncidentStates[size_t(state) < kIncidentStates.size() ? size_t(state) : 0];
}

// ---- collective states ----

// How a collective's life ended, as its record says (collectives.state).
// A rank's collectives are recorded once their life ends: completed as the
// backend defines it (NCCL: on the device, not when wait() returned), failed,
// still pending when the rank's recording ended (exit, abort, signal), or
// released without anything waiting for it.
enum class CollectiveState : uint8_t {
    Completed,
    Failed,
    Pending,
    Unwaited,
    End,
};

struct CollectiveStateInfo {
    CollectiveState kind;
    std::string_view key;      // "completed": JSON, CSV, trace args
    std::string_view meaning;  // one sentence for a legend
};

inline constexpr std::array kCollectiveStates = std::to_array<CollectiveStateInfo>({
    {CollectiveState::Completed, "completed", "its backend reported it complete"},
    {CollectiveState::Failed, "failed", "it raised: a peer gone, a timeout, a mismatch"},
    {CollectiveState::Pending, "pending", "still pending when its rank's recording ended"},
    {CollectiveState::Unwaited, "unwaited",
     "its result was released without a wait; when it completed is not known"},
});
static_assert(kindTableIsComplete(kCollectiveStates, CollectiveState::End),
              "kCollectiveStates needs one row per CollectiveState");

inline const CollectiveStateInfo& collectiveStateInfo(CollectiveState state) {
    return kCollectiveStates[size_t(state) < kCollectiveStates.size() ? size_t(state) : 0];
}
inline std::string_view toString(CollectiveState state) {
    return collectiveStateInfo(state).key;
}
// The state stored as `value`; nullopt for a value outside the table.
inline std::optional<CollectiveState> collectiveStateFromIndex(int64_t value) {
    if (value < 0 || value >= int64_t(kCollectiveStates.size())) return std::nullopt;
    return CollectiveState(value);
}

// ---- finding kinds ----

// What `check` reports and gates on (--fail-on takes their names).
enum class FindingKind : uint8_t {
    Unreconciled,
    Invalid,
    Divergent,
    MissingRank,
    Unreadable,
    NoStrategy,
    DTensorError,
    CollectiveError,
    Hang,
    Reconciled,
    Drift,
    PartialRead,
    Straggler,
    End,
};

struct FindingKindInfo {
    FindingKind kind;
    std::string_view name;     // "unreconciled": --fail-on, JSON, CSS class
    std::string_view meaning;  // one line for `check --help`
    int order;                 // the HTML report lists lower first
    // Its SARIF rule, when it has one of its own (unreconciled incidents are
    // reported per origin class instead): id, name, brief, help, level.
    std::string_view sarifRule, sarifName, sarifBrief, sarifHelp, sarifLevel;
    // `--fail-on any` covers it; false for what only a gate that asks for it
    // wants (incidents a policy repaired).
    bool inAny = true;
};

// The SARIF rule missing and unreadable ranks share.
struct SarifRuleText {
    std::string_view id, name, brief, help, level;
};
inline constexpr SarifRuleText kIncompleteRun{
    "meshscope/incomplete-run", "IncompleteRun", "A rank file is missing or unreadable",
    "Copy every rank's file into the run (meshscope merge) or record again", "warning"};

inline constexpr std::array kFindingKinds = std::to_array<FindingKindInfo>({
    {FindingKind::Unreconciled, "unreconciled",
     "an incident that was not reconciled (raised, strict, failed)", 2, "", "", "", "", ""},
    {FindingKind::Invalid, "invalid",
     "a Replicate/scalar promotion whose content differs across ranks", 0,
     "meshscope/invalid-replicate", "InvalidReplicatePromotion",
     "A plain tensor promoted as Replicate() differs across ranks",
     "Promote per-rank data with DTensor.from_local(t, mesh, [Shard(d)]), or make the tensor "
     "identical on every rank before replicating it",
     "error"},
    {FindingKind::Divergent, "divergent",
     "ranks whose op or incident sequences differ (predicts hangs)", 1, "meshscope/divergent-ranks",
     "DivergentRanks", "Ranks ran different op or incident sequences",
     "Ranks that diverge wait for each other in collectives: find why the departing rank took "
     "another path",
     "error"},
    {FindingKind::MissingRank, "missing-rank", "a rank of the run has no file", 2,
     kIncompleteRun.id, kIncompleteRun.name, kIncompleteRun.brief, kIncompleteRun.help,
     kIncompleteRun.level},
    {FindingKind::Unreadable, "unreadable", "a rank file that cannot be read", 2, kIncompleteRun.id,
     kIncompleteRun.name, kIncompleteRun.brief, kIncompleteRun.help, kIncompleteRun.level},
    {FindingKind::NoStrategy, "no-strategy",
     "an op DTensor has no sharding strategy for (the run stopped there)", 1,
     "meshscope/no-sharding-strategy", "NoShardingStrategy",
     "DTensor has no sharding strategy for an op with these placements",
     "Register one with register_sharding, run the call on local shards with local_map, or "
     "redistribute the operands to a placement that has a strategy",
     "error"},
    {FindingKind::DTensorError, "dtensor-error",
     "a DTensor dispatch or redistribution error (placements, shapes, Shard dim, mesh)", 1,
     "meshscope/dtensor-error", "DTensorDispatchError",
     "DTensor's dispatch or a redistribution raised",
     "Make the operands agree: one mesh, valid Shard dims, placements the op accepts", "error"},
    {FindingKind::CollectiveError, "collective-error",
     "a collective that failed (a peer gone, a timeout, a mismatch the backend saw)", 1,
     "meshscope/collective-error", "CollectiveFailed", "A collective failed",
     "Make every rank issue the same collectives in the same order, on the same group", "error"},
    {FindingKind::Hang, "hang",
     "a collective still pending after the watchdog's time, or when its rank ended", 0,
     "meshscope/collective-hang", "CollectiveHang", "A collective did not complete",
     "Make every rank issue the same collectives in the same order, on the same group", "error"},
    {FindingKind::Reconciled, "reconciled",
     "mixed-tensor incidents a policy repaired: the code runs only under meshscope (only when "
     "asked for: --fail-on reconciled)",
     3, "", "", "", "", "", false},
    {FindingKind::Drift, "drift",
     "a parameter, gradient or optimizer state that ranks must hold equal and do not "
     "(replicas drifting apart; no error is raised)",
     0, "meshscope/replica-drift", "ReplicaDrift",
     "Replicated training state differs across the ranks that must hold it equal",
     "Reduce the gradient across the ranks that hold the replica (a module left out of the "
     "SequenceParallel / parallelize plan), or make the update identical on every rank",
     "error"},
    {FindingKind::PartialRead, "partial-read",
     "a Partial DTensor read as a Python number (or as a local tensor on some ranks only): "
     "each rank's unreduced share, not the value",
     1, "meshscope/partial-read", "PartialRead",
     "A Partial DTensor was read as a number or local tensor before its reduction",
     "Call full_tensor() on every rank (a collective) before reading the value, or "
     "redistribute it to Replicate() first",
     "warning"},
    {FindingKind::Straggler, "straggler",
     "a rank that is the slowest in most steps while the others wait for it in collectives "
     "(only when asked for: --fail-on straggler)",
     3, "", "", "", "", "", false},
});

static_assert(kindTableIsComplete(kFindingKinds, FindingKind::End),
              "kFindingKinds needs one row per FindingKind");

const FindingKindInfo& findingKindInfo(FindingKind kind);
// Collective failures and hangs: incidents about a collective rather than an op.
inline bool isCollectiveKind(IncidentKind kind) {
    return kind == IncidentKind::CollectiveError || kind == IncidentKind::CollectiveHang;
}
// What `check` reports an incident of `kind` as (mixed tensors: when not
// reconciled).
FindingKind findingKindOf(IncidentKind kind);
std::string_view toString(FindingKind kind);
std::optional<FindingKind> findingKindFromString(std::string_view text);

}  // namespace meshscope
