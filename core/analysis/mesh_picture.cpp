#include "core/analysis/mesh_picture.h"

#include <algorithm>
#include <exception>

#include "core/model/placement.h"

namespace meshscope {
namespace {

// A recorded name (untrusted: any length) as a label shows it: at most
// kLongestName bytes, cut at a UTF-8 character boundary, with an ellipsis.
std::string capped(const std::string& name) {
    constexpr size_t kLongestName = 64;
    if (name.size() <= kLongestName) return name;
    size_t n = kLongestName;
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80)
        --n;
    return name.substr(0, n) + "\u2026";
}

std::string dimName(const MeshRecord& mesh, size_t k) {
    if (k < mesh.dimNames.size() && !mesh.dimNames[k].empty()) return capped(mesh.dimNames[k]);
    return "dim" + std::to_string(k);
}

// Row-major coordinate of cell `c` on a mesh of `shape`.
std::vector<int64_t> coordinateOf(size_t c, const std::vector<int64_t>& shape) {
    std::vector<int64_t> coord(shape.size());
    auto rest = int64_t(c);
    for (size_t k = shape.size(); k-- > 0;) {
        int64_t n = std::max<int64_t>(shape[k], 1);
        coord[k] = rest % n;
        rest /= n;
    }
    return coord;
}

// Ranks on a mesh of `shape`; saturates, since a damaged file may claim any size.
size_t cellsOf(const std::vector<int64_t>& shape) {
    constexpr size_t kCap = size_t(1) << 30;
    size_t n = 1;
    for (int64_t s : shape)
        n = std::min(kCap, n * size_t(std::clamp<int64_t>(s, 1, int64_t(kCap))));
    return n;
}

// describeLocalPiece() on recorded strings: those are untrusted, and a
// number too large for int64 throws, a very long one exhausts std::regex's
// recursion. Either way the placements themselves are still worth showing.
std::string localPiece(const std::string& shape, const std::string& placements,
                       const std::vector<int64_t>& meshShape, const std::vector<int64_t>& coord) {
    constexpr size_t kLongest = 256;
    if (shape.size() > kLongest || placements.size() > kLongest) return placements;
    try {
        return describeLocalPiece(shape, placements, meshShape, coord);
    } catch (const std::exception&) {
        return placements;
    }
}

}  // namespace

MeshPicture MeshPicture::ofIncident(const IncidentDetail& d) {
    MeshPicture p;
    p.mesh = d.mesh;
    p.rank = d.rank;
    for (const OperandDetail& o : d.operands) {
        if (o.plain && !p.plain)
            p.plain = o;
        else if (!o.plain && !o.scalar && !o.placements.empty())
            p.dtensors.push_back(o);
    }
    p.promotedPlacements = d.promotedPlacements;
    p.outcome = d.outcome;
    p.action = d.action;
    return p;
}

MeshPicture MeshPicture::ofOp(const std::optional<MeshRecord>& mesh, int rank,
                              const std::vector<OperandDetail>& operands) {
    MeshPicture p;
    p.mesh = mesh;
    p.rank = rank;
    for (const OperandDetail& o : operands)
        if (!o.scalar && !o.placements.empty()) p.dtensors.push_back(o);
    return p;
}

MeshGrid meshGrid(const MeshPicture& pic, size_t maxCells) {
    MeshGrid g;
    if (!pic.mesh || pic.mesh->shape.empty() || maxCells == 0) return g;
    const MeshRecord& mesh = *pic.mesh;
    const std::vector<int64_t>& shape = mesh.shape;
    const auto fullColumns = size_t(std::max<int64_t>(shape.back(), 1));
    g.meshCells = cellsOf(shape);
    g.columns = std::min(fullColumns, maxCells);
    const size_t meshRows = std::max<size_t>(g.meshCells / fullColumns, 1);
    const size_t rows = std::clamp<size_t>(maxCells / g.columns, 1, meshRows);
    for (size_t r = 0; r < rows; ++r) {
        if (shape.size() > 1) {
            std::vector<int64_t> first = coordinateOf(r * fullColumns, shape);
            std::string label;
            for (size_t k = 0; k + 1 < shape.size(); ++k)
                label += (k ? ", " : "") + dimName(mesh, k) + " " + std::to_string(first[k]);
            g.rowLabels.push_back(std::move(label));
        }
        for (size_t c = 0; c < g.columns; ++c) {
            size_t index = r * fullColumns + c;
            MeshCell cell;
            cell.rank = index < mesh.ranks.size() ? mesh.ranks[index] : int64_t(index);
            cell.here = cell.rank == pic.rank;
            cell.lines.push_back("rank " + std::to_string(cell.rank));
            std::vector<int64_t> coord = coordinateOf(index, shape);
            for (const OperandDetail& o : pic.dtensors)
                cell.lines.push_back((o.output ? "out" : "op") + std::to_string(o.index) + " " +
                                     localPiece(o.shape, o.placements, shape, coord));
            if (pic.plain && !pic.promotedPlacements.empty()) {
                // promoted with from_local: what the plain tensor is, is one
                // rank's piece of the DTensor
                std::string global =
                    fromLocalGlobalShape(pic.plain->shape, pic.promotedPlacements, shape);
                cell.lines.push_back("op" + std::to_string(pic.plain->index) + " " +
                                     localPiece(global, pic.promotedPlacements, shape, coord));
                cell.promotedLine = true;
            }
            g.cells.push_back(std::move(cell));
        }
    }
    for (size_t c = 0; c < g.columns; ++c)
        g.columnLabels.push_back(dimName(mesh, shape.size() - 1) + " " + std::to_string(c));
    std::string dims;
    for (size_t k = 0; k < shape.size(); ++k)
        dims += (k ? ", " : "") + dimName(mesh, k) + "=" + std::to_string(shape[k]);
    g.title = "device mesh (" + dims + ") on " + capped(mesh.deviceType);
    if (g.cells.size() < g.meshCells)
        g.title += ", first " + std::to_string(g.cells.size()) + " of " +
                   std::to_string(g.meshCells) + " ranks drawn";
    return g;
}

}  // namespace meshscope
