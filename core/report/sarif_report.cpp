// The SARIF report (2.1.0): one rule per origin class and per finding kind
// with its own rule (core/model/vocabulary.h), one result per incident
// group (failures under their kind's rule), for code-scanning UIs.

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>

#include "core/report/report.h"
#include "core/report/report_text.h"
#include "core/version.h"

namespace meshscope {
namespace {

using namespace report_text;

nlohmann::json sarifRule(std::string_view id, std::string_view name, std::string_view brief,
                         std::string_view help, std::string_view level) {
    return {{"id", id},
            {"name", name},
            {"shortDescription", {{"text", brief}}},
            {"fullDescription", {{"text", brief}}},
            {"help", {{"text", help}}},
            {"defaultConfiguration", {{"level", level}}}};
}

// `path` as the path of a URI (RFC 3986): every byte but the unreserved
// characters, '/' and the sub-delimiters a path may hold percent-encoded
// (a space, '%', '#', '?', non-ASCII bytes, control bytes).
std::string uriPath(std::string_view path) {
    constexpr std::string_view kKept = "-._~/!$&'()*+,;=:@";
    std::string out;
    for (unsigned char c : path) {
        if (std::isalnum(c) || kKept.find(char(c)) != std::string_view::npos) {
            out += char(c);
        } else {
            char hex[4];
            std::snprintf(hex, sizeof hex, "%%%02X", c);
            out += hex;
        }
    }
    return out;
}

// A recorded path as a SARIF artifact location: relative to the source root
// when it lies under it, else an absolute file URI; percent-encoded.
nlohmann::json artifactLocation(const std::string& file, const std::string& sourceRoot) {
    namespace fs = std::filesystem;
    fs::path path(file);
    if (!sourceRoot.empty() && path.is_absolute()) {
        fs::path rel = path.lexically_normal().lexically_relative(fs::path(sourceRoot));
        if (!rel.empty() && *rel.begin() != "..")
            return {{"uri", uriPath(rel.generic_string())}, {"uriBaseId", "SRCROOT"}};
    }
    if (path.is_absolute()) return {{"uri", "file://" + uriPath(path.generic_string())}};
    return {{"uri", uriPath(path.generic_string())}, {"uriBaseId", "SRCROOT"}};
}

// The finding kinds of incidents other than mixed tensors (findingKindOf).
bool isFailureFinding(FindingKind kind) {
    for (const IncidentKindInfo& k : kIncidentKinds)
        if (k.kind != IncidentKind::MixedTensor && findingKindOf(k.kind) == kind) return true;
    return false;
}

// One result for a group of failures (no strategy, DTensor error, collective
// failure or hang): its kind's rule, always an error; the message says what
// raised or waited, the error and the fix.
template <typename Location>
nlohmann::json failureResult(const IncidentGroup& g, const std::map<std::string, int>& ruleIndex,
                             const Location& location) {
    const IncidentKindInfo& kind = incidentKindInfo(g.kind);
    std::string id(kind.sarifRule);
    const IncidentExplanation e = explainIncident(g.example, &g);
    std::string text = fmt::format(
        "{}: {} ({} time(s) on rank(s) {}). Fix: {}", kind.title, e.summary, g.count,
        perRankCounts(g.perRank, [](int r) { return fmt::format("rank {}:", r); }), g.fix.summary);
    nlohmann::json result = {{"ruleId", id},
                             {"ruleIndex", ruleIndex.at(id)},
                             {"level", "error"},
                             {"message", {{"text", text}}},
                             {"partialFingerprints",
                              {{"meshscopeCallSite/v1", fmt::format("{}:{}:{}:{}", g.site.file,
                                                                    g.site.line, g.op, kind.key)}}},
                             {"properties",
                              {{"count", g.count},
                               {"kind", kind.key},
                               {"error", g.example.error},
                               {"placements", e.placements},
                               {"fix_code", g.fix.code}}}};
    if (!g.site.file.empty()) result["locations"] = {location(g.site)};
    return result;
}

}  // namespace

std::string sarifRuleId(OriginClass origin) {
    return fmt::format("{}/{}", incidentKindInfo(IncidentKind::MixedTensor).sarifRule,
                       originText(origin));
}

nlohmann::json sarifLog(const RunAnalysis& a, const ReportOptions& options) {
    nlohmann::json rules = nlohmann::json::array();
    std::map<std::string, int> ruleIndex;
    auto addRule = [&](nlohmann::json rule) {
        ruleIndex[rule["id"].get<std::string>()] = int(rules.size());
        rules.push_back(std::move(rule));
    };
    for (const OriginInfo& o : kOrigins) {
        FixSuggestion fix = suggestFix(o.origin);
        addRule(sarifRule(
            sarifRuleId(o.origin), o.sarifName,
            fmt::format("{}: {}", incidentKindInfo(IncidentKind::MixedTensor).title, o.description),
            fixSentence(fix), "error"));
    }
    for (const FindingKindInfo& k : kFindingKinds)
        if (!k.sarifRule.empty() && !ruleIndex.count(std::string(k.sarifRule)))
            addRule(sarifRule(k.sarifRule, k.sarifName, k.sarifBrief, k.sarifHelp, k.sarifLevel));
    for (const IncidentKindInfo& k : kIncidentKinds)  // a kind no finding kind covers
        if (k.kind != IncidentKind::MixedTensor && !ruleIndex.count(std::string(k.sarifRule)))
            addRule(sarifRule(k.sarifRule, k.key, k.title, k.fixSummary, "error"));

    auto location = [&](const SourceFrame& site) {
        nlohmann::json physical = {
            {"artifactLocation", artifactLocation(site.file, options.sourceRoot)}};
        if (site.line > 0) physical["region"] = {{"startLine", site.line}};
        nlohmann::json loc = {{"physicalLocation", physical}};
        if (!site.function.empty())
            loc["logicalLocations"] = {{{"name", site.function}, {"kind", "function"}}};
        return loc;
    };
    nlohmann::json results = nlohmann::json::array();
    for (const IncidentGroup& g : a.groups) {
        if (g.kind != IncidentKind::MixedTensor) {
            results.push_back(failureResult(g, ruleIndex, location));
            continue;
        }
        std::string id = sarifRuleId(g.origin);
        nlohmann::json result = {
            {"ruleId", id},
            {"ruleIndex", ruleIndex.at(id)},
            {"level", g.unreconciled > 0 ? "error" : "warning"},
            {"message",
             {{"text",
               fmt::format(
                   "{} mixed a plain tensor ({}) with DTensors {} time(s) on "
                   "rank(s) {}; {} unreconciled. Evidence: {}. Fix: {}",
                   g.op, describeOrigin(g.origin), g.count,
                   perRankCounts(g.perRank, [](int r) { return fmt::format("rank {}:", r); }),
                   g.unreconciled, g.evidence.empty() ? "-" : g.evidence.front(), g.fix.summary)}}},
            {"partialFingerprints",
             {{"meshscopeCallSite/v1",
               fmt::format("{}:{}:{}:{}", g.site.file, g.site.line, g.op, originText(g.origin))}}},
            {"properties",
             {{"count", g.count},
              {"origin", originText(g.origin)},
              {"unreconciled", g.unreconciled},
              {"fix_code", g.fix.code}}}};
        if (!g.site.file.empty()) result["locations"] = {location(g.site)};
        results.push_back(std::move(result));
        if (g.invalid > 0) {
            std::string id(findingKindInfo(FindingKind::Invalid).sarifRule);
            nlohmann::json invalid = {
                {"ruleId", id},
                {"ruleIndex", ruleIndex.at(id)},
                {"level", "error"},
                {"message",
                 {{"text", fmt::format("{}: {} Replicate/scalar promotion(s) of a tensor that "
                                       "differs across ranks: the result is silently wrong",
                                       g.op, g.invalid)}}}};
            if (!g.site.file.empty()) invalid["locations"] = {location(g.site)};
            results.push_back(std::move(invalid));
        }
    }
    for (const Finding& f : a.findings) {
        // unreconciled, invalid and failure findings were reported per incident group above
        if (f.kind == FindingKind::Unreconciled || f.kind == FindingKind::Invalid) continue;
        if (f.group >= 0 && isFailureFinding(f.kind)) continue;
        const FindingKindInfo& k = findingKindInfo(f.kind);
        std::string id(k.sarifRule);
        results.push_back({{"ruleId", id},
                           {"ruleIndex", ruleIndex.at(id)},
                           {"level", k.sarifLevel},
                           {"message", {{"text", f.message}}}});
    }
    nlohmann::json run = {{"tool",
                           {{"driver",
                             {{"name", "meshscope"},
                              {"semanticVersion", kVersion},
                              {"fullName", options.generator},
                              {"rules", rules}}}}},
                          {"results", results},
                          {"columnKind", "unicodeCodePoints"}};
    if (!options.sourceRoot.empty()) {
        std::string root = std::filesystem::path(options.sourceRoot).generic_string();
        if (root.back() != '/') root += '/';
        run["originalUriBaseIds"] = {{"SRCROOT", {{"uri", "file://" + uriPath(root)}}}};
    }
    return {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
            {"version", "2.1.0"},
            {"runs", {run}}};
}

void writeSarifReport(const RunReader&, const RunAnalysis& analysis, std::ostream& out,
                      const ReportOptions& options) {
    out << sarifLog(analysis, options).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
}

}  // namespace meshscope
