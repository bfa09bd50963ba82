#pragma once

// The record types of a meshscope rank file. Producers (the capture agent, the
// synthetic run generator) fill these structs and hand them to RankWriter by
// value; RankReader returns the same structs. The SQL that stores them lives
// only in core/store/schema.cpp and its inserter/reader.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/model/vocabulary.h"
#include "core/util/strong_id.h"

namespace meshscope {

// Where in the training step an op ran.
enum class Phase : uint8_t { Other = 0, Forward = 1, Backward = 2, Optimizer = 3, Data = 4, End };

// What the policy did with an incident.
enum class Action : uint8_t {
    Observed = 0,          // recorded; PyTorch raised as it would have
    Replicated = 1,        // promoted with Replicate() on every mesh dim
    ShardedFromLocal = 2,  // DTensor.from_local with Shard(batch dim)
    Scalarized = 3,        // one-element tensor turned into a Python scalar
    StrictError = 4,       // raised an enriched error
    End,
};

// How the incident ended.
enum class Outcome : uint8_t { Raised = 0, Reconciled = 1, Failed = 2, End };

enum class OperandKind : uint8_t { None = 0, Tensor = 1, Scalar = 2 };
enum class OperandRole : uint8_t { Input = 0, Output = 1 };

// Each enum's names as the store, reports and the Python package write
// them, one row per enumerator in enum order (checked when compiling).
template <typename Enum>
struct StoreName {
    Enum kind;
    std::string_view key;
};
inline constexpr std::array kPhaseNames = std::to_array<StoreName<Phase>>({
    {Phase::Other, "other"},
    {Phase::Forward, "forward"},
    {Phase::Backward, "backward"},
    {Phase::Optimizer, "optimizer"},
    {Phase::Data, "data"},
});
static_assert(kindTableIsComplete(kPhaseNames, Phase::End), "kPhaseNames: one row per Phase");
inline constexpr std::array kActionNames = std::to_array<StoreName<Action>>({
    {Action::Observed, "observed"},
    {Action::Replicated, "replicated"},
    {Action::ShardedFromLocal, "sharded_from_local"},
    {Action::Scalarized, "scalarized"},
    {Action::StrictError, "strict_error"},
});
static_assert(kindTableIsComplete(kActionNames, Action::End), "kActionNames: one row per Action");
inline constexpr std::array kOutcomeNames = std::to_array<StoreName<Outcome>>({
    {Outcome::Raised, "raised"},
    {Outcome::Reconciled, "reconciled"},
    {Outcome::Failed, "failed"},
});
static_assert(kindTableIsComplete(kOutcomeNames, Outcome::End),
              "kOutcomeNames: one row per Outcome");

std::string_view toString(Phase phase);
std::string_view toString(Action action);
std::string_view toString(Outcome outcome);

// One Python/C++ frame of an interned stack.
struct Frame {
    StringId file;
    int32_t line = 0;
    StringId function;
    bool operator==(const Frame&) const = default;
};

// Meta key naming a thread of a rank ("thread.3" = "pt_autograd_0"); the
// writer records it on the thread's first op, readers use it for labels.
inline constexpr std::string_view kThreadMetaPrefix = "thread.";
inline std::string threadMetaKey(uint32_t thread) {
    return std::string(kThreadMetaPrefix) + std::to_string(thread);
}

struct MetaRecord {
    std::string key;
    std::string value;
};

struct MeshRecord {
    MeshId id;
    std::string deviceType;      // "cpu", "cuda"
    std::vector<int64_t> shape;  // mesh dims
    std::vector<std::string> dimNames;
    std::vector<int64_t> ranks;  // global ranks in row-major mesh order
};

struct TensorRecord {
    TensorId id;
    StringId dtype;
    StringId globalShape;  // interned "[4, 8]"
    StringId localShape;
    StringId device;
    MeshId mesh;          // none for plain tensors
    StringId placements;  // "[Shard(0), Replicate()]"; none for plain tensors
    StringId label;       // parameter name or other user-facing label
    StackId createdAt;
    int64_t numel = 0;
    bool isDTensor = false;
};

struct OperandRecord {
    uint16_t index = 0;
    OperandRole role = OperandRole::Input;
    OperandKind kind = OperandKind::None;
    TensorId tensor;
    double scalar = 0.0;
    StringId placements;
    bool operator==(const OperandRecord&) const = default;
};

struct OpRecord {
    OpSeq seq;            // assigned by RankWriter::submit
    int64_t startNs = 0;  // monotonic ns since the rank's clock origin
    int64_t endNs = 0;
    uint32_t thread = 0;  // small per-rank thread index
    StringId name;        // "aten::sub.Tensor"
    Phase phase = Phase::Other;
    int64_t step = -1;  // optimizer step the op belongs to; -1 before the first
    StackId stack;
    uint16_t depth = 0;    // nesting depth on its thread
    IncidentSeq incident;  // set on the promoted op that reconciled an incident
    std::vector<OperandRecord> operands;
};

// One collective, recorded once its life ended (CollectiveState). Its seq
// is its position in the order the rank issued its collectives (reserved at
// issue: RankWriter::reserveCollectiveSeq), so rows may reach the file out
// of seq order, and a seq missing from a file is a collective whose record
// was lost.
struct CollectiveRecord {
    CollectiveSeq seq;  // issue order; assigned by RankWriter::submit when not reserved
    OpSeq op;           // op that caused it, if known
    StringId kind;      // "all_reduce", "all_gather", "redistribute", ...
    StringId group;     // process group / communicator name
    StringId srcPlacements;
    StringId dstPlacements;
    int64_t bytes = 0;
    int64_t startNs = 0;   // issued
    int64_t endNs = 0;     // completed, failed, or when the recording ended (pending)
    int64_t issuedNs = 0;  // the issuing call returned (host); startNs when not known
    uint32_t thread = 0;
    int64_t step = -1;
    StackId stack;  // the user frame that issued it
    CollectiveState state = CollectiveState::Completed;
    StringId error;  // failed: the error; pending: how the recording ended
};

// Time an op or a collective took on its GPU, beside the host times of its
// own record. A record of its own because the device time is known only
// after the host record: CUDA events are resolved later, without
// synchronizing; NCCL reports kernel times once the kernel ran.
struct DeviceTimeRecord {
    std::variant<OpSeq, CollectiveSeq> subject;
    int64_t durationNs = 0;
    std::optional<int64_t> deviceStartNs;  // device clock (GPU globaltimer); none from CUDA events
};

struct OptimizerStepRecord {
    int64_t step = 0;
    StringId optimizer;  // "torch.optim.Adam"
    int64_t startNs = 0;
    int64_t endNs = 0;
    int64_t paramCount = 0;
};

// The content of a tensor that must be equal on other ranks, at a sampled
// optimizer step (capture's replica check): a parameter, its gradient or an
// optimizer state whose values every rank holding the same replica must
// agree on. Offline analysis compares them across ranks (replica drift).
struct ReplicaRecord {
    int64_t step = 0;
    StringId name;  // the parameter's module path: "layers.0.ffn_norm.weight"
    StringId role;  // "param", "grad", "state exp_avg"
    // Which ranks must agree: those with the same name and key. The key is
    // the rank's coordinates on the mesh dims its DTensor is sharded on
    // ("dp=0"); empty for a tensor every rank holds whole (Replicate() on
    // every dim, or a plain parameter of a tensor-parallel model).
    StringId replicaKey;
    StringId placements;  // "[Shard(dim=0)] on dp", "plain"
    StringId module;      // the owning module's class: "RMSNorm"
    uint64_t fingerprint = 0;
    int64_t numel = 0;
};

struct IncidentRecord {
    IncidentSeq seq;  // assigned by RankWriter::submit
    IncidentKind kind = IncidentKind::MixedTensor;
    int64_t timeNs = 0;
    int64_t step = -1;
    uint32_t thread = 0;
    StringId op;
    // Mixed tensors: the first plain operand. Collective incidents: the
    // pending collective's position in the rank's sequence of collectives
    // (0-based; -1 unknown).
    int32_t operandIndex = -1;
    TensorId plainTensor;
    OriginClass origin = OriginClass::Unknown;
    StringId evidence;    // "created by DataLoader batch #12"
    StringId policyRule;  // "auto: per-rank data -> Shard(0)"
    Action action = Action::Observed;
    Outcome outcome = Outcome::Raised;
    StringId error;
    std::optional<uint64_t> fingerprint;  // content hash of the promoted tensor
    StringId promotedPlacements;
    StackId stack;
    // Hangs: the Python stacks of all the rank's threads; other kinds: what
    // the error says beyond `error` (the pending collective, the rank that
    // left); failed ops: their non-tensor arguments. Mixed tensors: the names
    // a fix at the incident needs ("at=train.py:30; mesh=mesh; dtensor=h").
    StringId detail;
    std::vector<OperandRecord> operands;
};

// A record queued for the writer thread. Strings and stacks are not records:
// they are interned on the producer side and never dropped.
using Record = std::variant<MetaRecord, MeshRecord, TensorRecord, OpRecord, CollectiveRecord,
                            OptimizerStepRecord, IncidentRecord, DeviceTimeRecord, ReplicaRecord>;

// Why a record did not reach the file.
enum class DropReason : uint8_t {
    QueueFull = 0,     // producer outran the writer; the record was discarded
    WriteError = 1,    // SQLite failed otherwise (a locked file): batch lost
    ForkedChild = 2,   // submitted from a fork()ed child that does not own the file
    Closed = 3,        // submitted after close()
    StringLimit = 4,   // interner full; the string was replaced by a marker
    DiskFull = 5,      // the file system is full (SQLITE_FULL): batch lost
    IoError = 6,       // an I/O error: read-only file system, folder deleted, EIO
    FileCap = 7,       // the file reached its limit (MESHSCOPE_MAX_FILE_BYTES)
    NotRecording = 8,  // the rank has no file (it could not be created): not kept
    End,
};
inline constexpr int kDropReasonCount = int(DropReason::End);
inline constexpr std::array kDropReasonNames = std::to_array<StoreName<DropReason>>({
    {DropReason::QueueFull, "queue_full"},
    {DropReason::WriteError, "write_error"},
    {DropReason::ForkedChild, "forked_child"},
    {DropReason::Closed, "closed"},
    {DropReason::StringLimit, "string_limit"},
    {DropReason::DiskFull, "disk_full"},
    {DropReason::IoError, "io_error"},
    {DropReason::FileCap, "file_cap"},
    {DropReason::NotRecording, "not_recording"},
});
static_assert(kindTableIsComplete(kDropReasonNames, DropReason::End),
              "kDropReasonNames: one row per DropReason");
std::string_view toString(DropReason reason);

}  // namespace meshscope
