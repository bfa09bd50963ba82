#include "core/analysis/fix_suggestion.h"

#include <fmt/format.h>

namespace meshscope {

FixSuggestion suggestFix(OriginClass origin, std::string_view mesh, int batchDim) {
    const OriginInfo& info = originInfo(origin);
    std::string code = info.fixCode.empty()
                           ? std::string()
                           : fmt::format(fmt::runtime(info.fixCode), fmt::arg("mesh", mesh),
                                         fmt::arg("batch_dim", batchDim));
    return {std::string(info.fixSummary), std::move(code)};
}

std::string_view describeOrigin(OriginClass origin) {
    return originInfo(origin).description;
}

}  // namespace meshscope
