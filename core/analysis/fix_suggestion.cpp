#include "core/analysis/fix_suggestion.h"

#include <fmt/format.h>

namespace meshscope {
namespace {

bool isLetter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) {
    return c >= '0' && c <= '9';
}

// The recorded name of a tensor as a Python expression a fix snippet may
// put where the placeholder was: "mask", "self.mask", "batch['labels']",
// "outputs[0]", and a module path "model.layers.3.mask" as
// "model.layers[3].mask"; "" for anything else (labels are any bytes).
std::string pythonReference(std::string_view name) {
    std::string out;
    size_t i = 0;
    auto identifier = [&] {
        if (i >= name.size() || !isLetter(name[i])) return false;
        while (i < name.size() && (isLetter(name[i]) || isDigit(name[i])))
            out += name[i++];
        return true;
    };
    auto subscript = [&] {  // [12] or ['key'] / ["key"]
        size_t from = i++;
        if (i < name.size() && (name[i] == '\'' || name[i] == '"')) {
            char quote = name[i++];
            while (i < name.size() && name[i] != quote && name[i] != '\\' && name[i] != '\n')
                ++i;
            if (i >= name.size() || name[i] != quote) return false;
            ++i;
        } else {
            size_t digits = i;
            while (i < name.size() && isDigit(name[i]))
                ++i;
            if (i == digits) return false;
        }
        if (i >= name.size() || name[i] != ']') return false;
        out.append(name.substr(from, ++i - from));
        return true;
    };
    if (!identifier()) return {};
    while (i < name.size()) {
        if (name[i] == '[') {
            if (!subscript()) return {};
        } else if (name[i] == '.' && i + 1 < name.size() && isDigit(name[i + 1])) {
            size_t from = ++i;  // a module list's index: layers.3 -> layers[3]
            while (i < name.size() && isDigit(name[i]))
                ++i;
            out += "[" + std::string(name.substr(from, i - from)) + "]";
        } else if (name[i] == '.') {
            ++i;
            out += '.';
            if (!identifier()) return {};
        } else {
            return {};
        }
    }
    return out;
}

}  // namespace

FixSuggestion suggestFix(OriginClass origin, std::string_view mesh, int batchDim,
                         std::string_view name) {
    const OriginInfo& info = originInfo(origin);
    std::string reference = pythonReference(name);
    std::string code =
        info.fixCode.empty()
            ? std::string()
            : fmt::format(fmt::runtime(info.fixCode), fmt::arg("mesh", mesh),
                          fmt::arg("batch_dim", batchDim),
                          fmt::arg("name", reference.empty() ? info.placeholder : reference));
    return {std::string(info.fixSummary), std::move(code)};
}

std::string_view describeOrigin(OriginClass origin) {
    return originInfo(origin).description;
}

}  // namespace meshscope
