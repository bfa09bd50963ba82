#pragma once

// The usual right fix for each origin class of a mixed-tensor incident
// (core/model/vocabulary.h), worded for a person reading an error message or a report.
// Shared by the capture agent's strict errors, the CLI reports and the GUI.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/vocabulary.h"
#include "core/store/records.h"

namespace meshscope {

// Where a fix's code goes in the user's source, when meshscope can tell
// (core/analysis/fix_placement.h): in place of the statement at file:line,
// or as a new statement before or after it, at its indentation.
struct FixPlace {
    enum class How : uint8_t { Unplaced, Before, After, Replace };
    How how = How::Unplaced;
    std::string file;
    int line = 0;
    std::string unplaced;  // Unplaced: why, and where it belongs instead
};

std::string_view toString(FixPlace::How how);

struct FixSuggestion {
    std::string summary;  // one sentence
    std::string code;     // a concrete line of Python to start from
    FixPlace place{};
};

// "before train.py:30", "after ...", "in place of ..."; "" when unplaced.
std::string describePlace(const FixPlace& place);
// How every text output states a fix: "<summary>, e.g. <code> (before
// train.py:30)"; the summary alone without code.
std::string fixSentence(const FixSuggestion& fix);

// `mesh`, `batchDim` and `name` (the user's name for the plain tensor,
// "mask" or "self.mask"; empty: the origin's placeholder) only shape the
// example code.
// `batchOnMesh` false: the mesh has only model dims, so input data cannot
// be sharded by batch (every rank must hold the same batch) and the fix
// replicates it, as the auto policy does.
FixSuggestion suggestFix(OriginClass origin, std::string_view mesh = "mesh", int batchDim = 0,
                         std::string_view name = {}, bool batchOnMesh = true);

// What shapes one incident's fix beyond its origin and evidence.
struct FixFacts {
    std::string_view name;              // the user's name for the plain tensor ("" unknown)
    int ndim = -1;                      // the plain tensor's dims (-1 unknown)
    std::vector<std::string> meshDims;  // the DTensor's mesh dim names (empty: unknown)
};

// The fix for one incident, from what the agent recorded: the FSDP2 call
// its evidence names (fullyShardFix); a Keras variable's LayoutMap key with
// a tuple of its rank on the mesh's model axis; a buffer distributed as a
// buffer (never made a Parameter); else its origin's fix in the user's name
// for the plain tensor, except for a parameter's gradient, which the
// parameter's fix covers (the evidence names the parameter).
FixSuggestion fixForIncident(OriginClass origin, std::string_view evidence, const FixFacts& facts);

// "[16, 32]" -> 2, "[]" -> 0; -1 for text that is no shape.
int shapeRank(std::string_view shape);

// The fix for a plain tensor promoted as Replicate() whose content differs
// across ranks (a promotion found INVALID): make it identical on every rank
// before it meets the DTensor. A random tensor comes from the mesh's RNG
// (DTensor's random ops, the same values on every rank) where `meshRng`
// (DTensor's RNG tracker serves only accelerator meshes); other data, and
// any on a CPU mesh, is broadcast from one rank. Never a from_local(...,
// [Replicate()]), which keeps each rank's values. `name`: the user's name
// for it; `evidence`: where it was made ("created by aten::rand inside
// forward at model.py:12").
FixSuggestion fixForRankDependentData(std::string_view evidence, std::string_view name,
                                      bool meshRng);

// The fix for origin A when the agent's evidence names an FSDP2 plan
// ("... (fully_shard(model.head) for its module, ...)"): that call, in
// FSDP2's API; nullopt otherwise.
std::optional<FixSuggestion> fullyShardFix(std::string_view evidence);

// The recorded name of a tensor as a Python expression a fix may use
// ("self.mask", "batch['labels']", "model.layers[3].mask"); "" for
// anything else.
std::string pythonReference(std::string_view name);
// "d3/kernel" when `name` is the agent's name for a Keras variable
// ("model.get_layer('d3').kernel"), else "".
std::string kerasVariablePath(std::string_view name);

// Whether a mesh with these dim names can shard input data by batch: a
// data-parallel dim ("batch", "data", "dp", "fsdp", ...), or no names.
bool meshHasBatchDim(const std::vector<std::string>& dimNames);

// ---- incidents other than mixed tensors ----

// The kind of an error DTensor's dispatch, a redistribution or a
// collective raised, from its message ("... does not have a sharding
// strategy registered" is NoShardingStrategy; a peer gone, a timeout or a
// backend error is CollectiveError; anything else DTensorError). nullopt
// for KeyboardInterrupt and SystemExit: a stop, not a failure.
std::optional<IncidentKind> classifyFailure(std::string_view message);

// The fix for a failure of `op` ("aten._scaled_dot_product_flash_attention_
// for_cpu.default") whose DTensor operands had `placements` ("[Shard(dim=1)]"
// each, in argument order), from what `message` says. Collective failures
// get their per-rank fix here; the analysis adds what the other ranks did.
FixSuggestion fixForFailure(IncidentKind kind, std::string_view op,
                            const std::vector<std::string>& placements, std::string_view message);

// What a failed op's fix reasons about beyond its name.
struct FailedCall {
    std::string_view op;                  // "aten::glu"
    std::vector<std::string> placements;  // each DTensor operand's, in argument order
    int ndim = -1;                        // the first DTensor operand's dims (-1 unknown)
    std::string_view args{};              // its non-tensor arguments: "dim=-1, keepdim=False"
    std::string_view name{};              // the user's name for the first DTensor operand
};

// The same, knowing the call's arguments. A no-sharding-strategy fix then
// runs the op on local shards (local_map) only where that is the same
// computation: the op works along a `dim` no operand is sharded on, with
// output placements that fit the output's dims (a reduction without
// keepdim drops one). An op along a sharded dim, or over the whole tensor
// (no dim), needs that dim whole on each rank first: a redistribute to
// Replicate() on the mesh dims that shard it, whose cost (an all-gather) the
// fix names.
FixSuggestion fixForFailure(IncidentKind kind, const FailedCall& call, std::string_view message);

// The op DTensor's "Operator X does not have a sharding strategy" message
// names (a composite op's decomposition, sdpa's flash kernel); `op` when it
// names none.
std::string opWithoutStrategy(std::string_view message, std::string_view op);

// The first line of an error message, without Python's exception prefix
// noise and at most `max` characters: what a one-line finding quotes.
std::string firstLine(std::string_view message, size_t max = 160);

// One-line description of an origin class: "input data not distributed".
std::string_view describeOrigin(OriginClass origin);

}  // namespace meshscope
