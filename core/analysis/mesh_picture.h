#pragma once

// The device mesh of an incident or op as a picture: one cell per rank, in
// each what that rank holds of every DTensor operand ("rows 0-3 of
// [8, 16]") and of the plain operand once promoted. One layout for the HTML
// report and the GUI's inspector, which draw it each in their own medium:
// columns along the mesh's last dim, rows along the others (folded, dims
// named), at most `maxCells` ranks drawn.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/run_analysis.h"

namespace meshscope {

// What the drawing shows, independent of how it is laid out.
struct MeshPicture {
    std::optional<MeshRecord> mesh;
    int rank = 0;  // the rank the selection belongs to
    std::vector<OperandDetail> dtensors;
    std::optional<OperandDetail> plain;
    std::string promotedPlacements;  // empty when the plain tensor was not promoted
    Outcome outcome = Outcome::Raised;
    Action action = Action::Observed;

    // An incident's operands: its plain operand apart, the DTensors on the mesh.
    static MeshPicture ofIncident(const IncidentDetail& d);
    // An op's: every operand with placements is a DTensor on the mesh.
    static MeshPicture ofOp(const std::optional<MeshRecord>& mesh, int rank,
                            const std::vector<OperandDetail>& operands);
};

struct MeshCell {
    int64_t rank = 0;
    bool here = false;  // the selection's rank
    // "rank 1", then "op0 rows 0-7 of [16, 32]" per DTensor operand ("out2
    // ..." for outputs), then the promoted plain operand's piece, if any.
    std::vector<std::string> lines;
    bool promotedLine = false;  // the last line is the promoted plain operand's
};

struct MeshGrid {
    size_t columns = 1;                     // cells per row drawn
    size_t meshCells = 0;                   // ranks on the mesh (saturated)
    std::vector<MeshCell> cells;            // row-major, at most maxCells
    std::vector<std::string> rowLabels;     // "dp 1", "pp 0, dp 1"; empty on 1-D meshes
    std::vector<std::string> columnLabels;  // "tp 0", ...
    // "device mesh (dp=2, tp=4) on cuda[, first N of M ranks drawn]"
    std::string title;
};

// The grid of `picture` (no cells without a mesh). Recorded strings are
// untrusted: a piece that cannot be worked out shows the placements, and
// dim names and the device type are cut to 64 bytes in labels and title.
MeshGrid meshGrid(const MeshPicture& picture, size_t maxCells);

}  // namespace meshscope
