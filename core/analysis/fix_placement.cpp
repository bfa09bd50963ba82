#include "core/analysis/fix_placement.h"

#include <fstream>
#include <regex>

#include <fmt/format.h>

namespace meshscope {
namespace {

using How = FixPlace::How;

bool contains(std::string_view text, std::string_view part) {
    return text.find(part) != std::string_view::npos;
}

std::string trimmed(std::string_view text) {
    size_t from = text.find_first_not_of(" \t");
    size_t to = text.find_last_not_of(" \t\r");
    return from == std::string_view::npos ? std::string()
                                          : std::string(text.substr(from, to - from + 1));
}

// A source line as a statement to rewrite: its indentation and a trailing
// comment (about the old code) dropped.
std::string statementOf(std::string_view line) {
    size_t comment = line.find("  #");
    return trimmed(line.substr(0, comment));
}

std::string replacedAll(std::string text, std::string_view what, std::string_view with) {
    for (size_t at = text.find(what); at != std::string::npos;
         at = text.find(what, at + with.size()))
        text.replace(at, what.size(), with);
    return text;
}

// "path/train.py:12" -> {"path/train.py", 12}; {"", 0} for anything else.
std::pair<std::string, int> splitLocation(std::string_view location) {
    size_t colon = location.rfind(':');
    if (colon == std::string_view::npos || colon + 1 >= location.size()) return {"", 0};
    int line = 0;
    for (char c : location.substr(colon + 1)) {
        if (c < '0' || c > '9') return {"", 0};
        line = line * 10 + (c - '0');
    }
    return {std::string(location.substr(0, colon)), line};
}

// The FILE:LINE the agent wrote after `marker` in an evidence text ("; the
// plan is applied at train.py:12"); {"", 0} when there is none.
std::pair<std::string, int> siteIn(std::string_view evidence, std::string_view marker) {
    size_t at = evidence.find(marker);
    if (at == std::string_view::npos) return {"", 0};
    std::string_view rest = evidence.substr(at + marker.size());
    return splitLocation(rest.substr(0, rest.find_first_of(" );")));
}

// "aten::add_.Tensor" -> "add_"
std::string_view opBase(std::string_view op) {
    size_t colons = op.find("::");
    if (colons != std::string_view::npos) op.remove_prefix(colons + 2);
    return op.substr(0, op.find('.'));
}

// The first DTensor operand's placements ("[Shard(0)]"), as written in Python.
std::string dtensorPlacements(const IncidentDetail& d) {
    for (const OperandDetail& o : d.operands)
        if (!o.plain && !o.output && !o.placements.empty()) return o.placements;
    return {};
}

// "X = nn.Parameter(distribute_tensor(X, mesh, [Replicate()]))" or
// "X = distribute_tensor(X, mesh, [Replicate()])" inside the evidence of a
// parameter or buffer a plan left out (the agent writes it in the names of
// the frame that holds the model).
std::string distributeStatement(const std::string& evidence) {
    static const std::regex statement(
        R"(([A-Za-z_][\w.\[\]']*) = (nn\.Parameter\()?distribute_tensor\(\1, ([\w.]+), \[Replicate\(\)\]\)(\))?)");
    std::smatch m;
    if (!std::regex_search(evidence, m, statement)) return {};
    if (m[2].matched != m[4].matched) return {};
    return m.str(0);
}

// The statements that clip `params` to `maxNorm` with one norm per mesh
// (plain gradients are a mesh of their own), `target` bound to the total
// norm clip_grad_norm_ returned.
std::string perMeshClip(const std::string& params, const std::string& maxNorm,
                        const std::string& target) {
    return fmt::format(
        "from torch.nn.utils import clip_grads_with_norm_, get_total_norm\n"
        "by_mesh = {{}}  # one norm per mesh, as transformers' Trainer._mixed_mesh_grad_norm\n"
        "for p in [q for q in {0} if q.grad is not None]: "
        "by_mesh.setdefault(getattr(p.grad, 'device_mesh', None), []).append(p)\n"
        "norms = [get_total_norm([p.grad for p in group]) for group in by_mesh.values()]\n"
        "total_norm = torch.linalg.vector_norm(torch.stack([n.full_tensor() if hasattr(n, "
        "'full_tensor') else n for n in norms]))\n"
        "for group in by_mesh.values(): clip_grads_with_norm_(group, {1}, total_norm){2}",
        params, maxNorm, target.empty() ? "" : "\n" + target + " = total_norm");
}

}  // namespace

std::optional<std::string> SourceLines::line(const std::string& file, int n) {
    auto it = m_files.find(file);
    if (it == m_files.end()) {
        std::optional<std::vector<std::string>> lines;
        if (std::ifstream in(file); in) {
            lines.emplace();
            for (std::string text; std::getline(in, text) && lines->size() < 200000;)
                lines->push_back(std::move(text));
        }
        it = m_files.emplace(file, std::move(lines)).first;
    }
    if (!it->second || n < 1 || size_t(n) > it->second->size()) return std::nullopt;
    return (*it->second)[size_t(n) - 1];
}

FixNames parseFixNames(std::string_view detail) {
    FixNames names;
    while (!detail.empty()) {
        size_t end = detail.find("; ");
        std::string_view item = detail.substr(0, end);
        detail = end == std::string_view::npos ? std::string_view() : detail.substr(end + 2);
        size_t eq = item.find('=');
        if (eq == std::string_view::npos) continue;
        std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "at") {
            auto [file, line] = splitLocation(value);
            names.file = file;
            names.line = line;
        } else if (key == "mesh") {
            names.mesh = value;
        } else if (key == "dtensor") {
            names.dtensor = value;
        } else if (key == "global") {
            names.global = true;
        }
    }
    return names;
}

FixSuggestion placeFix(FixSuggestion fix, const IncidentDetail& d, SourceLines& source) {
    if (d.kind != IncidentKind::MixedTensor) return fix;
    auto placed = [&](How how, std::string file, int line, std::string code) {
        fix.code = std::move(code);
        fix.place = {how, std::move(file), line, {}};
        return fix;
    };
    auto unplaced = [&](std::string why) {
        fix.place = {How::Unplaced, {}, 0, std::move(why)};
        return fix;
    };
    FixNames names = parseFixNames(d.detail);
    std::string plainName;
    for (const OperandDetail& o : d.operands)
        if (o.plain) {
            plainName = o.label;
            break;
        }
    const std::string p = pythonReference(plainName);
    auto [birthFile, birthLine] = splitLocation(d.createdAt);
    std::optional<std::string> birth =
        birthLine > 0 ? source.line(birthFile, birthLine) : std::nullopt;
    std::string atFile = names.file;
    int atLine = names.line;
    if (atFile.empty() && !d.stack.empty()) {
        atFile = d.stack.front().file;
        atLine = d.stack.front().line;
    }
    std::string atFunction;
    for (const SourceFrame& f : d.stack)
        if (f.file == atFile && f.line == atLine) {
            atFunction = f.function;
            break;
        }

    // a stripped DTensor: the line that stripped it, without the strip
    if (d.origin == OriginClass::StrippedDTensor && birth &&
        (contains(*birth, ".to_local()") || contains(*birth, ".full_tensor()"))) {
        std::string code = replacedAll(statementOf(*birth), ".to_local()", "");
        code = replacedAll(code, ".full_tensor()", ".clone()");
        fix.summary +=
            "; here: keep the DTensor where it was stripped, so what is computed from "
            "it stays a DTensor (.full_tensor() becomes .clone(): a copy, as before)";
        return placed(How::Replace, birthFile, birthLine, std::move(code));
    }
    // state made from a DTensor's shape, or hyperparameters made a tensor
    if (birth && (d.origin == OriginClass::OptimizerState || d.origin == OriginClass::UserCode)) {
        static const std::regex shaped(
            R"(torch\.(zeros|ones|empty)\(\s*\*?\s*([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\.(?:shape|size\(\))\s*\))");
        if (std::regex_search(*birth, shaped)) {
            fix.summary =
                "create it with *_like() of the DTensor whose shape it copies: it gets "
                "that DTensor's mesh and placements (a shape alone makes a plain tensor)";
            return placed(How::Replace, birthFile, birthLine,
                          std::regex_replace(statementOf(*birth), shaped, "torch.$1_like($2)"));
        }
        static const std::regex scalars(R"(^([A-Za-z_][\w.\[\]'"]*\s*=\s*)torch\.tensor\((.+)\)$)");
        std::string line = statementOf(*birth);
        std::smatch m;
        if (d.origin == OriginClass::OptimizerState && std::regex_match(line, m, scalars))
            return placed(How::Replace, birthFile, birthLine,
                          m.str(1) + m.str(2) + "  # Python floats: ops take a list of scalars");
    }
    if (d.origin == OriginClass::UnshardedParam) {
        // transformers keeps what its tp_plan does not name plain on purpose:
        // a clip over all gradients takes one norm per mesh instead
        if (contains(d.evidence, "transformers' tp_plan keeps") && atLine > 0) {
            static const std::regex clip(
                R"(^(?:([A-Za-z_][\w.]*)\s*=\s*)?[\w.]*clip_grad_norm_\(\s*(.+?)\s*,\s*(?:max_norm\s*=\s*)?([^,()]+?)\s*(?:,[^()]*)?\)\s*(?:#.*)?$)");
            std::optional<std::string> line = source.line(atFile, atLine);
            std::smatch m;
            std::string text = line ? trimmed(*line) : std::string();
            if (std::regex_match(text, m, clip)) {
                fix.summary =
                    "transformers' tp_plan keeps these parameters plain tensors by design (no "
                    "tp_plan key makes them DTensors), and clip_grad_norm_ cannot mix them with "
                    "DTensor gradients: take one norm per mesh and combine them, as transformers' "
                    "Trainer._mixed_mesh_grad_norm does";
                return placed(How::Replace, atFile, atLine,
                              perMeshClip(m.str(2), m.str(3), m.str(1)));
            }
        }
        // Keras: the LayoutMap key, after the last key the user set
        if (!kerasVariablePath(plainName).empty()) {
            static const std::regex key(R"(([A-Za-z_]\w*)\['([^'\\]*)'\] = (\([^()]*\)))");
            std::smatch m;
            auto [file, line] = siteIn(d.evidence, "the LayoutMap is built at ");
            if (line > 0 && std::regex_search(d.evidence, m, key))
                return placed(How::After, file, line, m.str(0));
            return unplaced(
                "it belongs where the LayoutMap is built, before the model is created "
                "(no LayoutMap key set by your code was seen)");
        }
        // a buffer: distributed where the op meets it (distributing a
        // DTensor again with the same placements returns it)
        if (d.evidence.starts_with("buffer ") && !p.empty() && !names.mesh.empty() && atLine > 0)
            return placed(
                How::Before, atFile, atLine,
                fmt::format("{0} = distribute_tensor({0}, {1}, [Replicate()])  # still a buffer", p,
                            names.mesh));
        if (d.evidence.starts_with("a view of buffer"))
            return unplaced(fmt::format(
                "`{}` is a view of the buffer: distribute the buffer itself before the view is "
                "taken (where the module is set up)",
                p.empty() ? std::string("it") : p));
        // a parameter: once, after the statement that applied the plan, in
        // the names of the frame that holds the model (the agent's evidence)
        std::string code;
        if (auto fsdp = fullyShardFix(d.evidence))
            code = fsdp->code;
        else if (std::string statement = distributeStatement(d.evidence); !statement.empty())
            code = statement;
        if (!code.empty()) fix.code = code;
        auto [siteFile, siteLine] = siteIn(d.evidence, "the plan is applied at ");
        if (siteLine > 0 && !code.empty()) return placed(How::After, siteFile, siteLine, code);
        return unplaced(
            "it belongs where the model is built, before an optimizer takes its parameters (no "
            "parallelize_module, distribute_module or fully_shard call was seen to put it after)");
    }
    if (p.empty())
        return unplaced(
            "no name holds the plain tensor at the op (it is a temporary): make it a "
            "DTensor where it is computed");
    if (names.mesh.empty() || atLine <= 0)
        return unplaced(fmt::format(
            "no name for the DTensor's mesh where `{}` is held: put it where the mesh is in scope",
            p));
    std::string code;
    if (d.origin == OriginClass::WeightLoading || d.origin == OriginClass::OptimizerState) {
        std::string placements =
            d.origin == OriginClass::WeightLoading ? dtensorPlacements(d) : "[Replicate()]";
        if (placements.empty() || contains(placements, "Partial"))
            return unplaced("the DTensor it is copied into has no placements a fix can name");
        code = fmt::format("{0} = distribute_tensor({0}, {1}, {2})", p, names.mesh, placements);
    } else {
        code = suggestFix(d.origin, names.mesh, 0, p,
                          d.mesh ? meshHasBatchDim(d.mesh->dimNames) : true)
                   .code;
        if (!code.starts_with(p + " = ")) return unplaced("the fix is not one statement about it");
    }
    // before the op's statement: the code between its birth and the op was
    // written for a plain tensor and still runs on one. An op that writes
    // the tensor in place: only where it is a local born under that name in
    // the op's function (rebinding a name for a tensor kept elsewhere, in a
    // state or an attribute, would lose what the op writes)
    bool inPlace = d.operandIndex == 0 && opBase(d.op).ends_with('_');
    bool bornHere = false;
    if (birth && birthFile == atFile && birthLine <= atLine && !atFunction.empty() &&
        d.createdIn == atFunction) {
        std::string line = trimmed(*birth);
        bornHere =
            line.starts_with(p + " = ") || line.starts_with(p + "=") || line.starts_with(p + ": ");
    }
    if (inPlace && !bornHere)
        return unplaced(fmt::format(
            "`{}` is changed in place and kept elsewhere: make it a DTensor where it is created{}",
            p, d.createdAt.empty() ? "" : " (" + d.createdAt + ")"));
    // rebinding a module global inside a function needs `global`, or the
    // name becomes the function's local
    if (names.global && atFunction != "<module>") code = "global " + p + "\n" + code;
    return placed(How::Before, atFile, atLine, std::move(code));
}

}  // namespace meshscope
