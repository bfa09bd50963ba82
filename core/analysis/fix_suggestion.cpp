#include "core/analysis/fix_suggestion.h"

#include <fmt/format.h>

namespace meshscope {
namespace {

// A dotted Python name ("mask", "self.mask"): what a fix snippet may put
// where the placeholder was. Recorded labels are any bytes.
bool isDottedName(std::string_view name) {
    bool start = true;
    for (char c : name) {
        const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (c == '.' && !start) {
            start = true;
        } else if (letter || (!start && c >= '0' && c <= '9')) {
            start = false;
        } else {
            return false;
        }
    }
    return !name.empty() && !start;
}

}  // namespace

FixSuggestion suggestFix(OriginClass origin, std::string_view mesh, int batchDim,
                         std::string_view name) {
    const OriginInfo& info = originInfo(origin);
    std::string code =
        info.fixCode.empty()
            ? std::string()
            : fmt::format(fmt::runtime(info.fixCode), fmt::arg("mesh", mesh),
                          fmt::arg("batch_dim", batchDim),
                          fmt::arg("name", isDottedName(name) ? name : info.placeholder));
    return {std::string(info.fixSummary), std::move(code)};
}

std::string_view describeOrigin(OriginClass origin) {
    return originInfo(origin).description;
}

}  // namespace meshscope
