#include "core/analysis/fix_suggestion.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/model/placement.h"

namespace meshscope {
namespace {

bool isLetter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) {
    return c >= '0' && c <= '9';
}

}  // namespace

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

std::string_view toString(FixPlace::How how) {
    switch (how) {
        case FixPlace::How::Before:
            return "before";
        case FixPlace::How::After:
            return "after";
        case FixPlace::How::Replace:
            return "replace";
        case FixPlace::How::Unplaced:
            break;
    }
    return "unplaced";
}

std::string describePlace(const FixPlace& place) {
    if (place.how == FixPlace::How::Unplaced) return {};
    std::string_view how = place.how == FixPlace::How::Replace  ? "in place of"
                           : place.how == FixPlace::How::Before ? "before"
                                                                : "after";
    return fmt::format("{} {}:{}", how, place.file, place.line);
}

std::string fixSentence(const FixSuggestion& fix) {
    if (fix.code.empty()) return fix.summary;
    std::string where = describePlace(fix.place);
    return fix.summary + ", e.g. " + fix.code + (where.empty() ? "" : " (" + where + ")");
}

int shapeRank(std::string_view shape) {
    if (shape.size() < 2 || shape.front() != '[' || shape.back() != ']') return -1;
    if (shape == "[]") return 0;
    return int(std::count(shape.begin(), shape.end(), ',')) + 1;
}

FixSuggestion fixForIncident(OriginClass origin, std::string_view evidence, const FixFacts& facts) {
    bool batchOnMesh = meshHasBatchDim(facts.meshDims);
    bool gradient = evidence.starts_with("gradient of ");
    std::string_view name = gradient ? std::string_view() : facts.name;
    if (origin != OriginClass::UnshardedParam)
        return suggestFix(origin, "mesh", 0, name, batchOnMesh);
    if (auto fsdp = fullyShardFix(evidence)) return *fsdp;
    // Keras: a LayoutMap key whose tuple has one entry per dim of the
    // variable, its last dim on the mesh's model axis
    if (std::string path = kerasVariablePath(facts.name); !path.empty()) {
        std::string axis = "model";
        for (const std::string& dim : facts.meshDims)
            if (!meshHasBatchDim({dim})) {
                axis = dim;
                break;
            }
        std::string axes;
        for (int i = 0; i + 1 < std::max(facts.ndim, 1); ++i)
            axes += "None, ";
        axes += "'" + axis + "'" + (facts.ndim <= 1 ? "," : "");
        return {
            "add a key for the variable to the ModelParallel LayoutMap (or fix the key that "
            "was meant to match it), one entry per dim of the variable",
            fmt::format("layout_map['{}'] = ({})  # {}", path, axes,
                        facts.ndim < 0 ? "one entry per dim of the variable"
                                       : fmt::format("its {} dim(s) on the mesh", facts.ndim))};
    }
    // a buffer stays a buffer: distributed in place, never a Parameter
    if (evidence.starts_with("buffer ")) {
        std::string reference = pythonReference(name);
        return {
            "distribute the buffer itself (assigning a DTensor to a registered buffer keeps "
            "it a buffer, not trained); or, where the module gets it as an input, give that "
            "input a Replicate() layout (PrepareModuleInput)",
            fmt::format("{0} = distribute_tensor({0}, mesh, [Replicate()])  # still a buffer",
                        reference.empty() ? "module.buf" : reference)};
    }
    return suggestFix(origin, "mesh", 0, name, batchOnMesh);
}

FixSuggestion fixForRankDependentData(std::string_view evidence, std::string_view name,
                                      bool meshRng) {
    std::string reference = pythonReference(name);
    std::string tensor = reference.empty() ? "t" : reference;
    // "created by aten::randn.default inside forward at model.py:12"
    auto madeBy = [&](std::string_view op) {
        std::string token = "aten::" + std::string(op);
        for (size_t at = evidence.find(token); at != std::string_view::npos;
             at = evidence.find(token, at + 1)) {
            size_t end = at + token.size();
            if (end == evidence.size() ||
                !(std::isalnum(uint8_t(evidence[end])) || evidence[end] == '_'))
                return true;
        }
        return false;
    };
    bool derived = evidence.starts_with("derived from");  // regenerate the source, not this
    for (std::string_view random : {"rand", "randn", "rand_like", "randn_like"}) {
        if (!meshRng || derived || !madeBy(random)) continue;
        std::string_view op = random.substr(0, random.find('_'));
        return {
            "draw it from the mesh's RNG, so every rank gets the same values (a "
            "from_local(..., [Replicate()]) of per-rank random values keeps them different); "
            "or seed every rank alike, or broadcast it from one rank",
            fmt::format("{0} = torch.distributed.tensor.{1}({0}.shape, device_mesh=mesh, "
                        "placements=[torch.distributed.tensor.Replicate()]).to_local()  # the "
                        "same values on every rank",
                        tensor, op)};
    }
    return {
        "make it identical on every rank before it meets the DTensor: broadcast it from "
        "one rank, or compute it from values every rank holds (a from_local(..., "
        "[Replicate()]) of per-rank values keeps them different)",
        fmt::format("dist.broadcast({}, src=0)  # on every rank of the mesh, before it meets "
                    "the DTensor: rank 0's values everywhere",
                    tensor)};
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

namespace {

bool contains(std::string_view text, std::string_view part) {
    return text.find(part) != std::string_view::npos;
}

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return out;
}

// "aten._scaled_dot_product_flash_attention_for_cpu.default" -> the Python
// call a user writes for it, where one is well known; else a placeholder
// the fix's text explains. Ops only torch.nn.functional has are F.<name>.
std::string pythonCallFor(std::string_view op) {
    if (contains(op, "scaled_dot_product")) return "F.scaled_dot_product_attention";
    constexpr std::string_view kFunctionalOnly[] = {"glu",
                                                    "gelu",
                                                    "silu",
                                                    "mish",
                                                    "elu",
                                                    "leaky_relu",
                                                    "softplus",
                                                    "hardtanh",
                                                    "hardswish",
                                                    "hardsigmoid",
                                                    "softshrink",
                                                    "hardshrink",
                                                    "one_hot",
                                                    "pad",
                                                    "mse_loss",
                                                    "l1_loss",
                                                    "smooth_l1_loss",
                                                    "huber_loss",
                                                    "nll_loss",
                                                    "cross_entropy",
                                                    "binary_cross_entropy",
                                                    "linear",
                                                    "unfold",
                                                    "fold"};
    for (std::string_view prefix : {"aten::", "aten."})
        if (op.substr(0, prefix.size()) == prefix) {
            std::string_view name = op.substr(prefix.size());
            name = name.substr(0, name.find('.'));
            while (!name.empty() && name.front() == '_')
                name.remove_prefix(1);
            if (name.ends_with("_forward")) name.remove_suffix(8);  // nll_loss_forward
            for (std::string_view f : kFunctionalOnly)
                if (name == f) return "F." + std::string(name);
            if (!name.empty() && name.back() != '_') return "torch." + std::string(name);
        }
    return "fn";
}

// The tensor dim each mesh dim shards, in mesh dim order ("[Shard(dim=1),
// Replicate()]" -> {1, none}).
std::vector<std::optional<int>> shardedDims(std::string_view placements) {
    std::vector<std::optional<int>> out;
    for (const std::string& p : splitPlacements(placements)) {
        std::optional<int64_t> dim = shardDim(p);
        out.push_back(dim ? std::optional<int>(int(*dim)) : std::nullopt);
    }
    return out;
}

// An integer argument of "dim=-1, keepdim=False"; nullopt when absent.
std::optional<int> intArgument(std::string_view args, std::string_view name) {
    std::string key = std::string(name) + "=";
    for (size_t at = args.find(key); at != std::string_view::npos; at = args.find(key, at + 1)) {
        if (at > 0 && args[at - 1] != ' ') continue;  // "keepdim=" is not "dim="
        std::string_view value = args.substr(at + key.size());
        value = value.substr(0, value.find(','));
        if (value.empty() || !(value[0] == '-' || std::isdigit(uint8_t(value[0])))) return {};
        return std::atoi(std::string(value).c_str());
    }
    return std::nullopt;
}

std::string placementsCode(const std::vector<std::optional<int>>& dims) {
    std::string out = "[";
    for (size_t i = 0; i < dims.size(); ++i)
        out += (i ? ", " : "") +
               (dims[i] ? fmt::format("Shard({})", *dims[i]) : std::string("Replicate()"));
    return out + "]";
}

FixSuggestion noStrategyFix(const FailedCall& call, std::string_view message) {
    std::string inner = opWithoutStrategy(message, call.op);
    std::string fn = pythonCallFor(call.op);
    std::optional<int> dim = intArgument(call.args, "dim");
    if (dim && *dim < 0 && call.ndim > 0) *dim += call.ndim;
    // the dims the op works along: its `dim`; attention's last two (sequence
    // and head dim); without either (or without the tensor's rank), the whole tensor
    std::vector<int> along;
    if (dim)
        along = {*dim};
    else if (contains(call.op, "scaled_dot_product") && call.ndim >= 2)
        along = {call.ndim - 2, call.ndim - 1};
    bool whole = along.empty() || call.ndim < 0;
    auto worksAlong = [&](int d) {
        return whole || std::find(along.begin(), along.end(), d) != along.end();
    };
    // each operand's placements, with the mesh dims that shard a dim the op
    // works along made Replicate(): what it needs on each rank
    std::vector<std::string> placements =
        call.placements.empty() ? std::vector<std::string>{"[Replicate()]"} : call.placements;
    bool gather = false;
    std::string in;
    std::vector<std::optional<int>> out;
    for (size_t i = 0; i < placements.size(); ++i) {
        std::vector<std::optional<int>> dims = shardedDims(placements[i]);
        for (std::optional<int>& s : dims)
            if (s && worksAlong(*s)) {
                s.reset();
                gather = true;
            }
        in += (i ? ", " : "") + (gather ? placementsCode(dims) : placements[i]);
        if (i == 0) out = dims;
    }
    if (placements.size() == 1) in += ",";
    // a reduction without keepdim drops its dim: a later sharded dim moves down
    if (dim && call.args.find("keepdim=False") != std::string_view::npos)
        for (std::optional<int>& s : out)
            if (s && *s > *dim) --*s;
    std::string reference = pythonReference(call.name);
    std::string x = reference.empty() ? "x" : reference;
    std::string arguments = placements.size() == 1
                                ? x + (call.args.empty() ? "" : ", " + std::string(call.args))
                                : std::string("...");
    std::string code = fmt::format(
        "out = local_map({}, out_placements={}, in_placements=({}){})({})  # from "
        "torch.distributed.tensor.experimental import local_map",
        fn, placementsCode(out), in, gather ? ", redistribute_inputs=True" : "", arguments);
    std::string unknown = fn == "fn" ? " (fn: the Python function that ran the op)" : "";
    if (!gather)
        return {fmt::format("DTensor has no sharding strategy for {} with these placements, but "
                            "{} works along dims no operand is sharded on, so each rank's shard "
                            "gives its part of the result: run it on the local shards with "
                            "local_map{} (it hands the op the local tensors and wraps its result "
                            "with out_placements), or register a strategy with "
                            "register_sharding({})",
                            inner, fn, unknown, inner),
                code};
    std::string why =
        dim      ? fmt::format("{} works along dim {}, which {} is sharded on", fn, *dim, x)
        : !whole ? fmt::format("{} works along the dims {} is sharded on", fn, x)
                 : fmt::format("{} works over the whole tensor (no dim argument)", fn);
    return {fmt::format("DTensor has no sharding strategy for {} with {}: {}, so running it on "
                        "each rank's shard would compute something else. Gather what it works "
                        "along first: local_map{} with redistribute_inputs=True all-gathers {} "
                        "to {} on every call, then runs the op on whole dims on each rank; or "
                        "register a strategy with register_sharding({})",
                        inner, placements.front(), why, unknown, x, in.substr(0, in.find(']') + 1),
                        inner),
            code};
}

}  // namespace

std::optional<IncidentKind> classifyFailure(std::string_view message) {
    if (contains(message, "KeyboardInterrupt") || contains(message, "SystemExit"))
        return std::nullopt;
    if (contains(message, "does not have a sharding strategy") ||
        contains(message, "has no sharding strategy"))
        return IncidentKind::NoShardingStrategy;
    std::string text = lower(message);
    for (std::string_view sign :
         {"connection closed by peer", "connection reset", "broken pipe", "timed out", "timeout",
          "nccl error", "ncclinternalerror", "ncclremoteerror", "gloo", "processgroup",
          "process group", "collective", "watchdog", "socket"})
        if (contains(text, sign)) return IncidentKind::CollectiveError;
    return IncidentKind::DTensorError;
}

FixSuggestion fixForFailure(IncidentKind kind, std::string_view op,
                            const std::vector<std::string>& placements, std::string_view message) {
    return fixForFailure(kind, FailedCall{op, placements}, message);
}

FixSuggestion fixForFailure(IncidentKind kind, const FailedCall& call, std::string_view message) {
    std::string text = lower(message);
    switch (kind) {
        case IncidentKind::NoShardingStrategy:
            // the op without a strategy is the one the message names (a
            // composite op's decomposition: sdpa's flash kernel)
            return noStrategyFix(call, message);
        case IncidentKind::DTensorError: {
            if (contains(text, "mesh") &&
                (contains(text, "different") || contains(text, "same") || contains(text, "cross")))
                return {
                    "the operands live on different DeviceMeshes: put them on one mesh "
                    "before the op (distribute the other tensor on this mesh, or "
                    "DTensor.from_local(x.to_local(), mesh, placements))",
                    "y = DTensor.from_local(y.to_local(), x.device_mesh, y.placements)"};
            if (contains(text, "uneven") || contains(text, "evenly") || contains(text, "flatten") ||
                contains(text, "divisible") || contains(text, "view") || contains(text, "reshape"))
                return {
                    "a view or reshape splits a dim DTensor sharded unevenly or across "
                    "shards: redistribute that dim to Replicate() before the view, or make "
                    "the dim a multiple of the mesh size",
                    "x = x.redistribute(x.device_mesh, [Replicate()]).view(new_shape)"};
            if (contains(text, "shard") && (contains(text, "dim") || contains(text, "range")))
                return {
                    "a Shard(dim) names a dim the tensor does not have: use a dim in "
                    "range(tensor.ndim) (negative dims count from the end)",
                    "x = distribute_tensor(t, mesh, [Shard(t.ndim - 1)])"};
            if (contains(text, "dimension out of range") || contains(text, "index out of range"))
                return {
                    "a dim index is out of range for the DTensor's global shape: index by "
                    "global dims (x.shape), not the local shard's",
                    "x.size(-1)  # the global size; x.to_local().size(-1) is the shard's"};
            if (contains(text, "placement") || contains(text, "redistribute"))
                return {
                    "the operands' placements do not fit the op: redistribute them to "
                    "placements it accepts (Replicate() always is)",
                    "x = x.redistribute(x.device_mesh, [Replicate()])"};
            if (contains(text, "size") || contains(text, "shape"))
                return {
                    "the DTensors' global shapes do not match what the op needs: compare "
                    "x.shape (global) of each operand, not to_local() shapes",
                    "print(x.shape, x.placements, y.shape, y.placements)"};
            return {
                "DTensor's dispatch raised for this op: check that the operands share one "
                "mesh and have placements the op accepts",
                ""};
        }
        case IncidentKind::CollectiveError:
            if (contains(text, "closed by peer") || contains(text, "reset") ||
                contains(text, "broken pipe"))
                return {
                    "another rank left while this one was in a collective (it exited, "
                    "crashed or never issued it): make every rank issue the same "
                    "collectives, e.g. call full_tensor() on every rank and print on rank 0",
                    "full = loss.full_tensor()  # on every rank; print it on rank 0 only"};
            return {std::string(incidentKindInfo(kind).fixSummary), ""};
        case IncidentKind::PartialRead:
            return {
                "reduce it first, on every rank: full_tensor() is a collective, so call it "
                "where every rank runs, then read or log the value on one",
                "value = t.full_tensor().item()  # on every rank, before the rank-0 log line"};
        case IncidentKind::CollectiveHang:
        case IncidentKind::MixedTensor:
        case IncidentKind::End:
            break;
    }
    return {std::string(incidentKindInfo(kind).fixSummary), ""};
}

std::string opWithoutStrategy(std::string_view message, std::string_view op) {
    size_t at = message.find("Operator ");
    if (at == std::string_view::npos) return std::string(op);
    std::string_view rest = message.substr(at + 9);
    rest = rest.substr(0, rest.find(' '));
    return rest.empty() ? std::string(op) : std::string(rest);
}

std::string firstLine(std::string_view message, size_t max) {
    // torch prefixes notes and tracebacks; the first non-empty line says it
    size_t start = 0;
    while (start < message.size() && (message[start] == '\n' || message[start] == ' '))
        ++start;
    std::string_view line = message.substr(start);
    line = line.substr(0, line.find('\n'));
    std::string out(line.substr(0, max));
    if (line.size() > max) out += "...";
    return out;
}

}  // namespace meshscope
