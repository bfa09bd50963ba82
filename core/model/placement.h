#pragma once

// Shapes and placements as meshscope records them ("[8, 16]",
// "[Shard(0), Replicate()]") and what one rank holds of such a tensor: the
// arithmetic the HTML report's and the GUI inspector's mesh drawings share.
// Recorded text is untrusted: nothing here throws or overflows on it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshscope {

// "[8, 16]" -> {8, 16}; a number that does not fit in int64 ends the shape.
std::vector<int64_t> parseShape(std::string_view shape);

// The dim of "Shard(1)" or "Shard(dim=1)"; nullopt for anything else.
std::optional<int64_t> shardDim(std::string_view placement);

// "[Shard(0), Replicate()]" -> {"Shard(0)", "Replicate()"}.
std::vector<std::string> splitPlacements(std::string_view text);

// The global shape of a DTensor made by DTensor.from_local(t, mesh,
// placements) from a local tensor of `localShape` on each rank: each dim a
// mesh dim shards is that many times longer ("[16, 32]" with [Shard(0)] on
// a mesh of 2 -> "[32, 32]"). `localShape` when it is no shape.
std::string fromLocalGlobalShape(std::string_view localShape, std::string_view placements,
                                 const std::vector<int64_t>& meshShape);

// What one rank holds of a tensor with `shape` ("[8, 16]") and `placements`
// ("[Shard(0), Replicate()]") at `coordinate` of a mesh of `meshShape`:
// "rows 0-3 of [8, 16]", "all of [16]", "partial sum, all of [4, 4]".
std::string describeLocalPiece(std::string_view shape, std::string_view placements,
                               const std::vector<int64_t>& meshShape,
                               const std::vector<int64_t>& coordinate);

}  // namespace meshscope
