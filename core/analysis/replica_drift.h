#pragma once

// Replica drift: training state that ranks must hold equal and do not. The
// capture agent fingerprints, at sampled optimizer steps, every parameter,
// gradient and optimizer state whose values other ranks must share
// (ReplicaRecord: DTensors on the mesh dims they are replicated on, plain
// parameters of a tensor-parallel model). Ranks that recorded the same name,
// role and replica key must agree; this compares them step by step, finds
// where each parameter first differs and says why it likely does (the
// gradient differed first: it comes from sequence or batch shards and is
// never reduced across these ranks; the parameter differed from the start:
// initialized differently; the parameter alone: a rank-dependent update).
// No error is ever raised for this in training: the model is silently wrong.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/analysis/fix_suggestion.h"
#include "core/store/run_reader.h"

namespace meshscope {

// One tensor that a set of ranks must hold equal, over the sampled steps.
struct ReplicaSeries {
    std::string name;        // "layers.0.ffn_norm.weight"
    std::string role;        // "param", "grad", "state exp_avg"
    std::string key;         // the replica key ("dp=0"; "" for every rank)
    std::string placements;  // as the first rank recorded it
    std::string module;      // the owning module's class
    std::vector<int> ranks;  // ranks that recorded it, ascending
    // Per sampled step: whether every rank that recorded it there agreed.
    std::vector<std::pair<int64_t, bool>> steps;
    int64_t firstDiffering = -1;   // -1: equal at every sampled step
    int64_t lastEqualBefore = -1;  // the last sampled step before that where it agreed
    // At firstDiffering: the ranks grouped by equal content, largest first.
    std::vector<std::vector<int>> groups;
};

// Why a parameter's replicas likely differ.
enum class DriftCause : uint8_t {
    UnreducedGradient,    // its gradient differed first (or with it)
    InitialValues,        // it differed at the first sampled step, its gradient did not
    RankDependentUpdate,  // it differed after being equal, with equal gradients
    StateOnly,            // only optimizer state differs
};

// "unreduced_gradient", "initial_values", ...: how JSON names a cause.
std::string_view toString(DriftCause cause);

// One parameter whose replicas drift apart: what `check` reports.
struct ReplicaDrift {
    std::string name;  // the parameter's module path
    std::string key;
    std::string module;
    std::string placements;
    int64_t firstStep = -1;                // first sampled step where any of its roles differs
    int64_t lastEqualStep = -1;            // the sampled step before it where all agreed; -1: none
    std::string firstRole;                 // the role that differed first ("grad", "param", ...)
    std::vector<std::vector<int>> groups;  // ranks with equal content at firstStep
    DriftCause cause = DriftCause::UnreducedGradient;
    std::string causeText;  // one sentence
    FixSuggestion fix;
};

struct ReplicaCheck {
    std::vector<ReplicaSeries> series;  // by name, role, key
    std::vector<ReplicaDrift> drifts;   // by first step, then name
    std::vector<int64_t> steps;         // the sampled steps, ascending
    int64_t tensorsCompared = 0;        // series recorded by more than one rank
};

// Reads every rank's replica fingerprints and compares them.
ReplicaCheck checkReplicas(const RunReader& run);

// Replica records from ranks, gathered by tensor and step; check() compares
// what was gathered so far.
class ReplicaGathering {
  public:
    void add(const RankReader& rank, const std::vector<ReplicaRecord>& records);
    ReplicaCheck check() const;

    // What the ranks recorded for one tensor: step -> fingerprint -> ranks.
    struct Gathered {
        ReplicaSeries series;
        std::map<int64_t, std::map<uint64_t, std::vector<int>>> byStep;
    };

  private:
    using Key = std::tuple<std::string, std::string, std::string>;  // name, role, replica key
    std::map<Key, Gathered> m_series;
    std::set<int64_t> m_steps;
};

// Follows a run while it is recorded (`meshscope record` prints what it
// finds as the job goes on): each poll reads the ranks' new replica
// records and returns the parameters found drifting since the last poll,
// each once. Files not readable yet are tried again next time.
class ReplicaWatch {
  public:
    explicit ReplicaWatch(std::filesystem::path runDir);
    ~ReplicaWatch();
    std::vector<ReplicaDrift> poll();

  private:
    std::filesystem::path m_runDir;
    std::map<int, std::unique_ptr<RankReader>> m_readers;
    std::map<int, int64_t> m_cursor;  // rank -> the latest step read (read again: it may grow)
    std::map<int, std::set<std::tuple<int64_t, int64_t, int64_t>>> m_seen;  // step, name, role
    ReplicaGathering m_gathering;
    std::set<std::pair<std::string, std::string>> m_reported;  // name, key
};

// "ranks 0 | 1" (groups of ranks holding equal content).
std::string formatRankGroups(const std::vector<std::vector<int>>& groups);

}  // namespace meshscope
