#pragma once

// The usual right fix for each origin class of a mixed-tensor incident
// (DESIGN.md §1), worded for a person reading an error message or a report.
// Shared by the capture agent's strict errors, the CLI reports and the GUI.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/records.h"

namespace meshscope {

struct FixSuggestion {
    std::string summary;  // one sentence
    std::string code;     // a concrete line of Python to start from
};

// `mesh`, `batchDim` and `name` (the user's name for the plain tensor,
// "mask" or "self.mask"; empty: the origin's placeholder) only shape the
// example code.
// `batchOnMesh` false: the mesh has only model dims, so input data cannot
// be sharded by batch (every rank must hold the same batch) and the fix
// replicates it, as the auto policy does.
FixSuggestion suggestFix(OriginClass origin, std::string_view mesh = "mesh", int batchDim = 0,
                         std::string_view name = {}, bool batchOnMesh = true);

// The fix for one incident, from what the agent recorded: the FSDP2 call
// its evidence names (fullyShardFix), else its origin's fix in the user's
// name for the plain tensor, except for a parameter's gradient, which the
// parameter's fix covers (the evidence names the parameter).
FixSuggestion fixForIncident(OriginClass origin, std::string_view evidence, std::string_view name,
                             bool batchOnMesh = true);

// The fix for origin A when the agent's evidence names an FSDP2 plan
// ("... (fully_shard(model.head) for its module, ...)"): that call, in
// FSDP2's API; nullopt otherwise.
std::optional<FixSuggestion> fullyShardFix(std::string_view evidence);

// Whether a mesh with these dim names can shard input data by batch: a
// data-parallel dim ("batch", "data", "dp", "fsdp", ...), or no names.
bool meshHasBatchDim(const std::vector<std::string>& dimNames);

// One-line description of an origin class: "input data not distributed".
std::string_view describeOrigin(OriginClass origin);

}  // namespace meshscope
