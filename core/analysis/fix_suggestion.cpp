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

// "d3/kernel" when `name` is the agent's name for a Keras variable,
// "model.get_layer('d3').kernel", else "".
std::string kerasVariablePath(std::string_view name) {
    constexpr std::string_view call = ".get_layer('";
    size_t at = name.find(call);
    if (at == std::string_view::npos) return {};
    size_t layer = at + call.size(), close = name.find("').", layer);
    if (close == std::string_view::npos) return {};
    std::string_view variable = name.substr(close + 3);
    if (variable.empty() || !pythonReference(variable).size()) return {};
    return std::string(name.substr(layer, close - layer)) + "/" + std::string(variable);
}

}  // namespace

std::optional<FixSuggestion> fullyShardFix(std::string_view evidence) {
    constexpr std::string_view call = "(fully_shard(";
    size_t at = evidence.find(call);
    size_t close = at == std::string_view::npos ? at : evidence.find(')', at + call.size());
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view shard = evidence.substr(at + 1, close - at);  // fully_shard(model.head)
    std::string code(shard);
    if (shard != "fully_shard(model)") code += "  # then fully_shard(model) for the root";
    return FixSuggestion{
        "shard it with FSDP2 too: fully_shard the module that owns it before "
        "the first forward (the root last)",
        std::move(code)};
}

FixSuggestion fixForIncident(OriginClass origin, std::string_view evidence, std::string_view name,
                             bool batchOnMesh) {
    if (origin == OriginClass::UnshardedParam)
        if (auto fsdp = fullyShardFix(evidence)) return *fsdp;
    bool gradient = evidence.starts_with("gradient of ");
    return suggestFix(origin, "mesh", 0, gradient ? std::string_view() : name, batchOnMesh);
}

bool meshHasBatchDim(const std::vector<std::string>& dimNames) {
    constexpr std::string_view kBatchNames[] = {"batch",        "data", "dp", "dp_shard",
                                                "dp_replicate", "fsdp", "ddp"};
    if (dimNames.empty()) return true;
    for (const std::string& name : dimNames)
        for (std::string_view batch : kBatchNames)
            if (name == batch) return true;
    return false;
}

FixSuggestion suggestFix(OriginClass origin, std::string_view mesh, int batchDim,
                         std::string_view name, bool batchOnMesh) {
    // A Keras variable outside the plan: the fix is a LayoutMap key, in Keras
    if (std::string path = kerasVariablePath(name);
        origin == OriginClass::UnshardedParam && !path.empty())
        return {
            "add a key for the variable to the ModelParallel LayoutMap (or fix the key that "
            "was meant to match it)",
            "layout_map['" + path + "'] = (None, 'model')  # its axes on the mesh"};
    const OriginInfo& info = originInfo(origin);
    std::string reference = pythonReference(name);
    if (origin == OriginClass::InputData && !batchOnMesh) {
        std::string batch = reference.empty() ? std::string(info.placeholder) : reference;
        return {
            "the mesh has only model dims: every rank must feed the same batch, replicated "
            "(or add a data-parallel mesh dim and shard the batch over it)",
            fmt::format("{0} = DTensor.from_local({0}, {1}, [Replicate()])", batch, mesh)};
    }
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
