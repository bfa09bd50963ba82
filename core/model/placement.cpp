#include "core/model/placement.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace meshscope {

// "[8, 16]" -> {8, 16}. Recorded text is untrusted: a number that does not
// fit in int64 ends the shape (no exception, no regex over megabytes).
std::vector<int64_t> parseShape(std::string_view shape) {
    std::vector<int64_t> out;
    const char* p = shape.data();
    const char* end = p + shape.size();
    while (p < end) {
        if (!(*p == '-' || (*p >= '0' && *p <= '9'))) {
            ++p;
            continue;
        }
        int64_t v = 0;
        auto [next, ec] = std::from_chars(p, end, v);
        if (ec != std::errc()) break;
        out.push_back(v);
        p = next == p ? p + 1 : next;
    }
    return out;
}

// The dim of "Shard(1)" or "Shard(dim=1)"; nullopt for anything else.
std::optional<int64_t> shardDim(std::string_view placement) {
    constexpr std::string_view kPrefix = "Shard(";
    if (placement.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
    std::string_view rest = placement.substr(kPrefix.size());
    if (rest.substr(0, 4) == "dim=") rest.remove_prefix(4);
    int64_t dim = 0;
    auto [next, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), dim);
    if (ec != std::errc() || next == rest.data() + rest.size() || *next != ')') return std::nullopt;
    return dim;
}

// "[Shard(0), Replicate()]" -> {"Shard(0)", "Replicate()"}.
std::vector<std::string> splitPlacements(std::string_view text) {
    std::vector<std::string> out;
    std::string current;
    int depth = 0;
    for (char c : text) {
        if (c == '[' && depth == 0) continue;
        if (c == ']' && depth == 0) break;
        if (c == '(') ++depth;
        if (c == ')') --depth;
        if (c == ',' && depth == 0) {
            out.push_back(current);
            current.clear();
            continue;
        }
        if (c != ' ' || depth > 0) current += c;
    }
    if (!current.empty()) out.push_back(current);
    return out;
}

std::string describeLocalPiece(std::string_view shape, std::string_view placements,
                               const std::vector<int64_t>& meshShape,
                               const std::vector<int64_t>& coordinate) {
    std::vector<int64_t> sizes = parseShape(shape);
    std::vector<std::string> per = splitPlacements(placements);
    if (per.empty()) return std::string(placements);
    std::vector<std::pair<int64_t, int64_t>> ranges;  // per tensor dim [from, to)
    for (int64_t s : sizes)
        ranges.emplace_back(0, s);
    bool partial = false;
    for (size_t k = 0; k < per.size() && k < meshShape.size(); ++k) {
        if (per[k].rfind("Partial", 0) == 0) {
            partial = true;
            continue;
        }
        if (per[k].rfind("Replicate", 0) == 0) continue;
        std::optional<int64_t> shard = shardDim(per[k]);
        if (!shard) return std::string(placements);
        int64_t dim = *shard;
        if (dim < 0) dim += int64_t(sizes.size());
        if (dim < 0 || dim >= int64_t(ranges.size())) return std::string(placements);
        auto& [from, to] = ranges[size_t(dim)];
        int64_t n = std::max<int64_t>(meshShape[k], 1), length = to - from;
        // A damaged file's sizes: nothing sensible to draw, and no overflow.
        if (from < 0 || length < 0 || length > std::numeric_limits<int64_t>::max() / 4)
            return std::string(placements);
        int64_t chunk = (length + n - 1) / n;  // torch.chunk semantics
        int64_t c = std::clamp<int64_t>(k < coordinate.size() ? coordinate[k] : 0, 0, n - 1);
        int64_t a = std::min(from + c * chunk, to), b = std::min(from + (c + 1) * chunk, to);
        from = a, to = b;
    }
    std::string piece;
    bool whole = true;
    for (size_t d = 0; d < ranges.size(); ++d) {
        if (ranges[d].first == 0 && ranges[d].second == sizes[d]) continue;
        whole = false;
        std::string what = d == 0 ? "rows" : d == 1 ? "cols" : fmt::format("dim {}", d);
        piece += fmt::format("{}{} {}-{}", piece.empty() ? "" : ", ", what, ranges[d].first,
                             ranges[d].second - 1);
    }
    std::string base =
        whole ? fmt::format("all of {}", shape) : fmt::format("{} of {}", piece, shape);
    return partial ? "partial sum, " + base : base;
}

std::string fromLocalGlobalShape(std::string_view localShape, std::string_view placements,
                                 const std::vector<int64_t>& meshShape) {
    std::vector<int64_t> shape = parseShape(localShape);
    if (shape.empty()) return std::string(localShape);
    std::vector<std::string> each = splitPlacements(placements);
    for (size_t k = 0; k < each.size() && k < meshShape.size(); ++k) {
        std::optional<int64_t> dim = shardDim(each[k]);
        if (dim && *dim < 0) *dim += int64_t(shape.size());
        if (!dim || *dim < 0 || *dim >= int64_t(shape.size())) continue;
        int64_t n = std::clamp<int64_t>(meshShape[k], 1, int64_t(1) << 20);
        if (shape[size_t(*dim)] > (int64_t(1) << 40)) continue;  // untrusted: no overflow
        shape[size_t(*dim)] *= n;
    }
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

}  // namespace meshscope
