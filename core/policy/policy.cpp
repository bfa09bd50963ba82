#include "core/policy/policy.h"

#include <fnmatch.h>

#include <toml++/toml.h>
#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace meshscope {
namespace {

constexpr std::array<std::string_view, 6> kModeNames = {"observe", "replicate", "shard",
                                                        "scalar",  "strict",    "auto"};
constexpr std::array<std::string_view, 6> kRuleKeys = {"op",     "origin", "file",
                                                       "module", "action", "shard_dim"};

std::string modeList() {
    std::string out;
    for (auto name : kModeNames)
        out += (out.empty() ? "" : ", ") + std::string(name);
    return out;
}

bool globMatch(const std::optional<std::string>& pattern, std::string_view text) {
    return !pattern || fnmatch(pattern->c_str(), std::string(text).c_str(), 0) == 0;
}

Action actionFor(PolicyMode mode) {
    switch (mode) {
        case PolicyMode::Replicate:
            return Action::Replicated;
        case PolicyMode::Shard:
            return Action::ShardedFromLocal;
        case PolicyMode::Scalar:
            return Action::Scalarized;
        case PolicyMode::Strict:
            return Action::StrictError;
        case PolicyMode::Observe:
        case PolicyMode::Auto:
            break;
    }
    return Action::Observed;
}

// The auto policy (README, Policies): per-rank data -> from_local(Shard(batch dim)); optimizer
// scalars -> Python scalar; one-element tensors -> replicate; anything else
// -> replicate, fingerprinted so offline analysis can prove it valid.
PolicyDecision resolveAuto(const IncidentFacts& f, int shardDim) {
    if (f.origin == OriginClass::InputData && f.meshHasBatchDim)
        return {Action::ShardedFromLocal, shardDim,
                "auto: per-rank input data -> from_local(Shard(" + std::to_string(shardDim) + "))"};
    if (f.origin == OriginClass::InputData)
        return {Action::Replicated, 0,
                "auto: input data on a mesh with no data-parallel dim (every rank must hold the "
                "same batch) -> Replicate(), fingerprinted"};
    if (f.origin == OriginClass::OptimizerState && (f.numel == 1 || f.scalarList))
        return {Action::Scalarized, 0,
                f.scalarList ? "auto: optimizer scalars tensor -> Python scalar list"
                             : "auto: optimizer scalar -> Python scalar"};
    if (f.numel == 1) return {Action::Replicated, 0, "auto: one-element tensor -> Replicate()"};
    return {Action::Replicated, 0, "auto: other tensor -> Replicate(), fingerprinted"};
}

[[noreturn]] void fail(const std::string& source, const toml::source_region& where,
                       const std::string& problem) {
    std::ostringstream out;
    out << source;
    if (where.begin.line) out << ":" << where.begin.line << ":" << where.begin.column;
    out << ": " << problem;
    throw PolicyError(out.str());
}

PolicyMode parseMode(const toml::node& node, const std::string& source, const char* key) {
    auto text = node.value<std::string>();
    auto mode = text ? policyModeFromString(*text) : std::nullopt;
    if (!mode)
        fail(source, node.source(),
             std::string("'") + key + "' must be one of " + modeList() +
                 (text ? " (got '" + *text + "')" : ""));
    return *mode;
}

std::optional<std::string> parseGlob(const toml::table& rule, const char* key,
                                     const std::string& source) {
    const toml::node* node = rule.get(key);
    if (!node) return std::nullopt;
    auto text = node->value<std::string>();
    if (!text) fail(source, node->source(), std::string("'") + key + "' must be a string (a glob)");
    return text;
}

std::vector<OriginClass> parseOrigins(const toml::table& rule, const std::string& source) {
    const toml::node* node = rule.get("origin");
    if (!node) return {};
    std::vector<OriginClass> origins;
    auto add = [&](const toml::node& item) {
        auto text = item.value<std::string>();
        std::optional<OriginClass> origin;
        if (text && text->size() == 1) origin = originFromChar((*text)[0]);
        if (!origin) fail(source, item.source(), "'origin' takes classes \"A\" to \"G\"");
        origins.push_back(*origin);
    };
    if (const toml::array* list = node->as_array()) {
        for (const toml::node& item : *list)
            add(item);
    } else {
        add(*node);
    }
    return origins;
}

PolicyRule parseRule(const toml::table& rule, const std::string& source) {
    for (const auto& [key, value] : rule)
        if (std::find(kRuleKeys.begin(), kRuleKeys.end(), key.str()) == kRuleKeys.end())
            fail(source, value.source(),
                 "unknown key '" + std::string(key.str()) +
                     "' in [[rule]] (known: op, origin, file, module, action, shard_dim)");
    const toml::node* action = rule.get("action");
    if (!action) fail(source, rule.source(), "[[rule]] has no 'action'");
    PolicyRule r;
    r.mode = parseMode(*action, source, "action");
    r.op = parseGlob(rule, "op", source);
    r.file = parseGlob(rule, "file", source);
    r.module = parseGlob(rule, "module", source);
    r.origins = parseOrigins(rule, source);
    if (const toml::node* dim = rule.get("shard_dim")) {
        auto value = dim->value<int64_t>();
        if (!value || *value < 0 || *value > 64)
            fail(source, dim->source(), "'shard_dim' must be an integer from 0 to 64");
        r.shardDim = int(*value);
    }
    r.source = source + ":" + std::to_string(rule.source().begin.line);
    return r;
}

}  // namespace

std::optional<PolicyMode> policyModeFromString(std::string_view text) {
    for (size_t i = 0; i < kModeNames.size(); ++i)
        if (text == kModeNames[i]) return PolicyMode(i);
    return std::nullopt;
}

std::string_view toString(PolicyMode mode) {
    return size_t(mode) < kModeNames.size() ? kModeNames[size_t(mode)] : "invalid";
}

std::span<const std::string_view> policyModeNames() {
    return kModeNames;
}

Policy Policy::named(std::string_view name) {
    auto mode = policyModeFromString(name);
    if (!mode)
        throw PolicyError("unknown policy '" + std::string(name) + "' (use one of " + modeList() +
                          ", or a .toml policy file)");
    Policy p;
    p.m_default = *mode;
    return p;
}

namespace {

size_t editDistance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// "'autoo' is neither a policy name (observe, ...) nor a policy file; did
// you mean auto?"
std::string notAPolicy(const std::filesystem::path& file, const std::string& why) {
    std::string names, closest;
    size_t best = 3;  // a name this close or closer is suggested
    std::string given = file.filename().string();
    for (std::string_view name : policyModeNames()) {
        names += (names.empty() ? "" : ", ") + std::string(name);
        if (size_t d = editDistance(given, name); d < best) {
            best = d;
            closest = name;
        }
    }
    return file.string() + ": neither a policy name (" + names + ") nor a policy file (" + why +
           ")" + (closest.empty() ? "" : "; did you mean " + closest + "?");
}

}  // namespace

Policy Policy::fromFile(const std::filesystem::path& file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) throw PolicyError(notAPolicy(file, "no such file"));
    if (!std::filesystem::is_regular_file(file, ec))
        throw PolicyError(notAPolicy(file, "not a regular file"));
    std::ifstream in(file, std::ios::binary);
    if (!in) throw PolicyError(file.string() + ": cannot open the policy file");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return fromToml(text, file.string());
}

Policy Policy::fromToml(std::string_view text, const std::string& sourceName) {
    toml::table doc;
    try {
        doc = toml::parse(text, sourceName);
    } catch (const toml::parse_error& e) {
        fail(sourceName, e.source(),
             std::string("not valid TOML: ") + std::string(e.description()));
    }
    Policy p;
    for (const auto& [key, value] : doc) {
        if (key.str() == "default") {
            p.m_default = parseMode(value, sourceName, "default");
        } else if (key.str() == "rule") {
            const toml::array* rules = value.as_array();
            if (!rules || !rules->is_array_of_tables())
                fail(sourceName, value.source(), "'rule' must be written as [[rule]] tables");
            for (const toml::node& rule : *rules)
                p.m_rules.push_back(parseRule(*rule.as_table(), sourceName));
        } else {
            fail(sourceName, value.source(),
                 "unknown key '" + std::string(key.str()) + "' (known: default, [[rule]])");
        }
    }
    return p;
}

PolicyDecision Policy::decide(const IncidentFacts& f) const {
    for (size_t i = 0; i < m_rules.size(); ++i) {
        const PolicyRule& r = m_rules[i];
        bool originOk = r.origins.empty() ||
                        std::find(r.origins.begin(), r.origins.end(), f.origin) != r.origins.end();
        if (!originOk || !globMatch(r.op, f.op) || !globMatch(r.file, f.file) ||
            !globMatch(r.module, f.module))
            continue;
        std::string why = "rule #" + std::to_string(i + 1) + " (" + r.source + "): ";
        if (r.mode == PolicyMode::Auto) {
            PolicyDecision d = resolveAuto(f, r.shardDim);
            d.rule = why + d.rule;
            return d;
        }
        return {actionFor(r.mode), r.shardDim, why + std::string(toString(r.mode))};
    }
    if (m_default == PolicyMode::Auto) return resolveAuto(f, 0);
    return {actionFor(m_default), 0, "policy " + std::string(toString(m_default))};
}

}  // namespace meshscope
