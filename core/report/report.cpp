#include "core/report/report.h"

#include <algorithm>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/report/html_writer.h"
#include "core/util/utf8.h"

namespace meshscope {
namespace {

constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

std::string fingerprintText(const std::optional<uint64_t>& fp) {
    return fp ? fmt::format("{:016x}", *fp) : "";
}

nlohmann::json frameToJson(const SourceFrame& f) {
    return {{"file", f.file}, {"line", f.line}, {"function", f.function}};
}

template <typename Map, typename Key>
nlohmann::json countsToJson(const Map& counts, Key key) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, n] : counts)
        out[key(k)] = n;
    return out;
}

nlohmann::json groupToJson(const IncidentGroup& g) {
    return {
        {"id", g.id},
        {"op", g.op},
        {"origin", originText(g.origin)},
        {"origin_description", describeOrigin(g.origin)},
        {"site", frameToJson(g.site)},
        {"count", g.count},
        {"per_rank", countsToJson(g.perRank, [](int r) { return std::to_string(r); })},
        {"per_step", countsToJson(g.perStep, [](int64_t s) { return std::to_string(s); })},
        {"first_step", g.firstStep},
        {"last_step", g.lastStep},
        {"actions", countsToJson(g.actions, [](Action a) { return std::string(toString(a)); })},
        {"outcomes", countsToJson(g.outcomes, [](Outcome o) { return std::string(toString(o)); })},
        {"unreconciled", g.unreconciled},
        {"verification",
         {{"verified", g.verified}, {"invalid", g.invalid}, {"unverified", g.unverified}}},
        {"evidence", g.evidence},
        {"distinct_evidence", g.distinctEvidence},
        {"fix", {{"summary", g.fix.summary}, {"code", g.fix.code}}},
        {"example", incidentDetailToJson(g.example)},
    };
}

nlohmann::json divergenceToJson(const Divergence& d) {
    return {{"kind", d.kind == Divergence::Kind::Ops ? "ops" : "incidents"},
            {"rank", d.rank},
            {"thread", d.thread},
            {"index", d.index},
            {"step", d.step},
            {"expected", d.expected},
            {"actual", d.actual},
            {"others", d.others},
            {"site", frameToJson(d.site)}};
}

// ---- Markdown ----

// Text for a Markdown paragraph or table cell: CommonMark backslash escapes
// for the characters that can start inline markup, raw HTML, an entity or a
// table cell; newlines folded. Our own text starts every line, so block
// markers (#, -, +) never lead.
std::string md(std::string_view raw) {
    std::string text = validUtf8(raw);
    std::string out;
    for (char c : text) {
        if (c == '\n' || c == '\r') {
            out += ' ';
            continue;
        }
        if (std::string_view("\\`*_{}[]<>|&~").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

// An inline code span that no content can close: fenced with one backtick
// more than the longest run inside.
std::string mdCode(std::string_view raw) {
    std::string text = validUtf8(raw);
    size_t longest = 0, run = 0;
    std::string flat;
    for (char c : text) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
        flat += (c == '\n' || c == '\r') ? ' ' : c;
    }
    std::string fence(longest + 1, '`');
    return fence + " " + flat + " " + fence;
}

std::string mdFence(std::string_view raw, std::string_view lang) {
    std::string text = validUtf8(raw);
    size_t longest = 0, run = 0;
    for (char c : text) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    std::string fence(std::max<size_t>(3, longest + 1), '`');
    while (!text.empty() && text.back() == '\n')
        text.pop_back();
    return fmt::format("{}{}\n{}\n{}\n", fence, lang, text, fence);
}

std::string joinCounts(const auto& counts, auto label) {
    std::string out;
    for (const auto& [k, n] : counts)
        out += fmt::format("{}{} {}", out.empty() ? "" : ", ", label(k), n);
    return out.empty() ? "-" : out;
}

// ---- CSV ----

// RFC 4180 field; cells a spreadsheet would run as a formula get a quote
// prefix (recorded strings are untrusted).
std::string csv(std::string_view text) {
    std::string cell = validUtf8(text);
    if (!cell.empty() && std::string_view("=+-@\t\r").find(cell[0]) != std::string_view::npos)
        cell.insert(cell.begin(), '\'');
    if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
    std::string out = "\"";
    for (char c : cell)
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

// ---- SARIF ----

nlohmann::json sarifRule(std::string_view id, std::string_view name, std::string_view brief,
                         std::string_view help, std::string_view level) {
    return {{"id", id},
            {"name", name},
            {"shortDescription", {{"text", brief}}},
            {"fullDescription", {{"text", brief}}},
            {"help", {{"text", help}}},
            {"defaultConfiguration", {{"level", level}}}};
}

// A recorded path as a SARIF artifact location: relative to the source root
// when it lies under it, else an absolute file URI.
nlohmann::json artifactLocation(const std::string& file, const std::string& sourceRoot) {
    namespace fs = std::filesystem;
    fs::path path(file);
    if (!sourceRoot.empty() && path.is_absolute()) {
        fs::path rel = path.lexically_normal().lexically_relative(fs::path(sourceRoot));
        if (!rel.empty() && *rel.begin() != "..")
            return {{"uri", rel.generic_string()}, {"uriBaseId", "SRCROOT"}};
    }
    if (path.is_absolute()) return {{"uri", "file://" + path.generic_string()}};
    return {{"uri", path.generic_string()}, {"uriBaseId", "SRCROOT"}};
}

}  // namespace

std::optional<ReportFormat> reportFormatFromString(std::string_view text) {
    for (ReportFormat f : {ReportFormat::Html, ReportFormat::Markdown, ReportFormat::Json,
                           ReportFormat::Csv, ReportFormat::Sarif})
        if (toString(f) == text) return f;
    return std::nullopt;
}

std::string_view toString(ReportFormat format) {
    switch (format) {
        case ReportFormat::Html:
            return "html";
        case ReportFormat::Markdown:
            return "md";
        case ReportFormat::Json:
            return "json";
        case ReportFormat::Csv:
            return "csv";
        case ReportFormat::Sarif:
            return "sarif";
    }
    return "?";
}

std::string sarifRuleId(OriginClass origin) {
    return fmt::format("{}/{}", incidentKindInfo(IncidentKind::MixedTensor).sarifRule,
                       originText(origin));
}

nlohmann::json incidentDetailToJson(const IncidentDetail& d) {
    nlohmann::json stack = nlohmann::json::array();
    for (const SourceFrame& f : d.stack)
        stack.push_back(frameToJson(f));
    nlohmann::json operands = nlohmann::json::array();
    for (const OperandDetail& o : d.operands) {
        nlohmann::json j = {
            {"index", o.index}, {"role", o.output ? "output" : "input"}, {"plain", o.plain}};
        if (o.scalar) {
            j["scalar"] = o.scalarValue;
        } else {
            j.update({{"dtype", o.dtype},
                      {"shape", o.shape},
                      {"local_shape", o.localShape},
                      {"device", o.device},
                      {"placements", o.placements},
                      {"label", o.label},
                      {"numel", o.numel}});
        }
        operands.push_back(std::move(j));
    }
    nlohmann::json mesh = nullptr;
    if (d.mesh)
        mesh = {{"device_type", d.mesh->deviceType},
                {"shape", d.mesh->shape},
                {"dim_names", d.mesh->dimNames},
                {"ranks", d.mesh->ranks}};
    return {{"rank", d.rank},
            {"seq", d.seq.value()},
            {"step", d.step},
            {"op", d.op},
            {"origin", originText(d.origin)},
            {"evidence", d.evidence},
            {"policy_rule", d.policyRule},
            {"action", toString(d.action)},
            {"outcome", toString(d.outcome)},
            {"error", d.error},
            {"promoted_placements", d.promotedPlacements},
            {"fingerprint", d.fingerprint ? nlohmann::json(fingerprintText(d.fingerprint))
                                          : nlohmann::json(nullptr)},
            {"plain_operand", d.operandIndex},
            {"created_at", d.createdAt},
            {"stack", stack},
            {"operands", operands},
            {"mesh", mesh}};
}

nlohmann::json reportToJson(const RunAnalysis& a, const ReportOptions& options) {
    nlohmann::json findings = nlohmann::json::array();
    for (const Finding& f : a.findings)
        findings.push_back({{"kind", toString(f.kind)},
                            {"message", f.message},
                            {"group", f.group},
                            {"rank", f.rank}});
    nlohmann::json groups = nlohmann::json::array();
    for (const IncidentGroup& g : a.groups)
        groups.push_back(groupToJson(g));
    int64_t verified = 0, invalid = 0, unverified = 0;
    nlohmann::json invalidChecks = nlohmann::json::array();
    for (const PromotionCheck& c : a.promotionChecks) {
        verified += c.verdict == Verdict::Verified;
        unverified += c.verdict == Verdict::Unverified;
        if (c.verdict != Verdict::Invalid) continue;
        ++invalid;
        nlohmann::json fps = nlohmann::json::object();
        for (const auto& [rank, fp] : c.fingerprints)
            fps[std::to_string(rank)] = fp ? nlohmann::json(fingerprintText(fp)) : nullptr;
        invalidChecks.push_back({{"group", c.group},
                                 {"step", c.step},
                                 {"occurrence", c.occurrence},
                                 {"action", toString(c.action)},
                                 {"fingerprints", fps}});
    }
    nlohmann::json divergences = nlohmann::json::array();
    for (const Divergence& d : a.divergences)
        divergences.push_back(divergenceToJson(d));
    return {{"meshscope_report", 1},
            {"generator", options.generator},
            {"run", summaryToJson(a.summary)},
            {"findings", findings},
            {"groups", groups},
            {"promotions",
             {{"checked", int64_t(a.promotionChecks.size())},
              {"verified", verified},
              {"invalid", invalid},
              {"unverified", unverified},
              {"invalid_checks", invalidChecks}}},
            {"divergences", divergences},
            {"missing_ranks", a.missingRanks},
            {"ops_compared", a.opsCompared}};
}

void writeMarkdownReport(const RunAnalysis& a, std::ostream& out, const ReportOptions& options) {
    const RunSummary& s = a.summary;
    out << fmt::format("# meshscope report: run {}\n\n", mdCode(s.runId));
    out << fmt::format(
        "World size {}, {} rank(s) readable; {} incident(s) in {} group(s); "
        "{} finding(s). Written by {}.\n\n",
        s.worldSize, s.ranks.size(), a.incidents.size(), a.groups.size(), a.findings.size(),
        md(options.generator));
    out << "## Findings\n\n";
    if (a.findings.empty()) out << "None.\n";
    for (const Finding& f : a.findings)
        out << fmt::format("- **{}** {}\n", toString(f.kind), md(f.message));
    out << "\n## Ranks\n\n| rank | ops | steps | collectives | bytes | incidents | dropped | "
           "status |\n|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const RankSummaryRow& r : s.ranks) {
        int64_t dropped = 0;
        for (const auto& [reason, n] : r.summary.drops)
            dropped += int64_t(n);
        out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", r.rank, r.summary.ops,
                           r.summary.steps, r.summary.collectives, r.summary.collectiveBytes,
                           r.summary.incidents, dropped,
                           r.info.endedNs ? "closed" : "open or killed");
    }
    for (const std::string& p : s.problems)
        out << fmt::format("\nProblem: {}\n", md(p));
    out << "\n## Incident groups\n\n";
    if (a.groups.empty()) out << "No mixed-tensor incidents.\n";
    int shown = 0;
    for (const IncidentGroup& g : a.groups) {
        if (shown++ == options.maxGroupsInDetail) {
            out << fmt::format("\n{} more group(s) are in the JSON report.\n",
                               a.groups.size() - size_t(options.maxGroupsInDetail));
            break;
        }
        out << fmt::format("### {}. {} at {}: origin {} ({})\n\n", g.id + 1, mdCode(g.op),
                           mdCode(formatLocation(g.site)), originText(g.origin),
                           describeOrigin(g.origin));
        out << fmt::format("- {} incident(s); per rank: {}; steps {} to {}\n", g.count,
                           joinCounts(g.perRank, [](int r) { return fmt::format("rank {}", r); }),
                           g.firstStep, g.lastStep);
        out << fmt::format("- actions: {}; outcomes: {}\n",
                           joinCounts(g.actions, [](Action x) { return toString(x); }),
                           joinCounts(g.outcomes, [](Outcome x) { return toString(x); }));
        if (g.verified + g.invalid + g.unverified > 0) {
            std::string verdicts;
            auto add = [&](int64_t n, std::string_view what) {
                if (n > 0)
                    verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", n, what);
            };
            add(g.verified, "verified");
            add(g.invalid, "**INVALID** (content differs across ranks)");
            add(g.unverified, "unverified (one rank or no fingerprint)");
            out << "- cross-rank verification: " << verdicts << "\n";
        }
        for (size_t i = 0; i < g.evidence.size(); ++i)
            out << fmt::format("- evidence: {}\n", md(g.evidence[i]));
        if (g.distinctEvidence > int64_t(g.evidence.size()))
            out << fmt::format("- ... {} distinct evidence texts in all\n", g.distinctEvidence);
        const IncidentDetail& ex = g.example;
        out << fmt::format("\nExample: rank {}, step {}, {}; policy rule {}\n\n", ex.rank, ex.step,
                           toString(ex.outcome),
                           ex.policyRule.empty() ? "-" : mdCode(ex.policyRule));
        out << "| operand | role | dtype | shape | local shape | placements | label |\n"
               "|---:|---|---|---|---|---|---|\n";
        for (const OperandDetail& o : ex.operands)
            out << fmt::format(
                "| {} | {} | {} | {} | {} | {} | {} |\n", o.index,
                o.output ? "output" : (o.plain ? "**plain input**" : "input"), md(o.dtype),
                md(o.shape), md(o.localShape),
                o.scalar ? md(fmt::format("scalar {}", o.scalarValue)) : md(o.placements),
                md(o.label));
        if (!ex.promotedPlacements.empty())
            out << fmt::format("\nPromoted to {} ({}).\n", mdCode(ex.promotedPlacements),
                               toString(ex.action));
        out << fmt::format("\n**Fix:** {}\n\n", md(g.fix.summary));
        if (!g.fix.code.empty()) out << mdFence(g.fix.code, "python");
        if (!ex.stack.empty()) {
            std::string frames;
            for (const SourceFrame& f : ex.stack)
                frames += fmt::format("{}  {}\n", formatLocation(f), f.function);
            out << "\nStack (innermost first):\n\n" << mdFence(frames, "");
        }
        out << "\n";
    }
    if (!a.divergences.empty()) {
        out << "## Divergent ranks\n\n| kind | rank | thread | index | step | this rank | others "
               "|\n|---|---:|---:|---:|---:|---|---|\n";
        for (const Divergence& d : a.divergences)
            out << fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n",
                               d.kind == Divergence::Kind::Ops ? "ops" : "incidents", d.rank,
                               d.thread, d.index, d.step,
                               d.actual.empty() ? "(ended)" : md(d.actual),
                               d.expected.empty() ? "(ended)" : md(d.expected));
    }
}

void writeCsvReport(const RunAnalysis& a, std::ostream& out) {
    out << "rank,seq,step,time_ns,thread,group,op,origin,action,outcome,verdict,file,line,"
           "function,evidence,fingerprint\r\n";
    for (const IncidentRef& r : a.incidents) {
        const IncidentGroup& g = a.groups[size_t(r.group)];
        out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", r.rank,
                           r.seq.value(), r.step, r.timeNs, r.thread, g.id, csv(g.op),
                           originText(g.origin), toString(r.action), toString(r.outcome),
                           toString(r.verdict), csv(g.site.file), g.site.line, csv(g.site.function),
                           csv(a.evidenceTexts[r.evidence]), fingerprintText(r.fingerprint));
    }
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
            fix.code.empty() ? fix.summary : fmt::format("{}, e.g. {}", fix.summary, fix.code),
            "error"));
    }
    for (const FindingKindInfo& k : kFindingKinds)
        if (!k.sarifRule.empty() && !ruleIndex.count(std::string(k.sarifRule)))
            addRule(sarifRule(k.sarifRule, k.sarifName, k.sarifBrief, k.sarifHelp, k.sarifLevel));

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
        std::string id = sarifRuleId(g.origin);
        nlohmann::json result = {
            {"ruleId", id},
            {"ruleIndex", ruleIndex.at(id)},
            {"level", g.unreconciled > 0 ? "error" : "warning"},
            {"message",
             {{"text",
               fmt::format("{} mixed a plain tensor ({}) with DTensors {} time(s) on "
                           "rank(s) {}; {} unreconciled. Evidence: {}. Fix: {}",
                           g.op, describeOrigin(g.origin), g.count,
                           joinCounts(g.perRank, [](int r) { return fmt::format("rank {}:", r); }),
                           g.unreconciled, g.evidence.empty() ? "-" : g.evidence.front(),
                           g.fix.summary)}}},
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
        // unreconciled and invalid findings were reported per incident group above
        if (f.kind == FindingKind::Unreconciled || f.kind == FindingKind::Invalid) continue;
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
        run["originalUriBaseIds"] = {{"SRCROOT", {{"uri", "file://" + root}}}};
    }
    return {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
            {"version", "2.1.0"},
            {"runs", {run}}};
}

void writeReport(ReportFormat format, const RunReader& run, const RunAnalysis& analysis,
                 std::ostream& out, const ReportOptions& options) {
    switch (format) {
        case ReportFormat::Html: {
            HtmlReportOptions html;
            html.maxGroupsInDetail = options.maxGroupsInDetail;
            html.generator = options.generator;
            writeHtmlReport(run, analysis, out, html);
            return;
        }
        case ReportFormat::Markdown:
            writeMarkdownReport(analysis, out, options);
            return;
        case ReportFormat::Json:
            out << reportToJson(analysis, options).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
            return;
        case ReportFormat::Csv:
            writeCsvReport(analysis, out);
            return;
        case ReportFormat::Sarif:
            out << sarifLog(analysis, options).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
            return;
    }
}

}  // namespace meshscope
