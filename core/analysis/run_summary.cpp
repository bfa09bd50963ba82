#include "core/analysis/run_summary.h"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/util/parallel.h"
#include "core/util/terminal_text.h"

namespace meshscope {
namespace {

// Items of a rank list spelled out; the rest are counted.
constexpr size_t kRankItemsListed = 16;

std::string humanBytes(int64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1024 && u < 4)
        v /= 1024, ++u;
    return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string joinCounts(const auto& counts, auto label) {
    std::string out;
    for (const auto& [key, n] : counts) {
        if (!out.empty()) out += ", ";
        out += fmt::format("{} {}", label(key), n);
    }
    return out.empty() ? "-" : out;
}

}  // namespace

std::string formatRankList(const std::vector<int>& ranks) {
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::string out;
    size_t items = 0, i = 0;
    for (; i < sorted.size() && items < kRankItemsListed; ++items) {
        size_t j = i;
        while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1)
            ++j;
        std::string sep = out.empty() ? "" : ",";
        if (j - i >= 2) {
            out += fmt::format("{}{}-{}", sep, sorted[i], sorted[j]);
            i = j + 1;
        } else {
            out += fmt::format("{}{}", sep, sorted[i]);
            ++i;
        }
    }
    if (i < sorted.size())
        out += fmt::format(" and {} more rank(s) ({} in all)", sorted.size() - i, sorted.size());
    return out;
}

std::string rankStatusText(const RunReader& run, const RankInfo& info) {
    if (info.endedNs) return "closed";
    auto it = run.launchRecording().find(info.rank);
    if (it != run.launchRecording().end() && it->second.closed)
        return "closed (its end marker was lost to the disk)";
    return "open or killed";
}

std::vector<RankSummary> rankSummaries(const RunReader& run) {
    const std::vector<RankReader>& ranks = run.ranks();
    std::vector<RankSummary> out(ranks.size());
    // each reader has its own connection; one thread reads one rank at a time
    forEachInParallel(ranks.size(), [&](size_t i) { out[i] = ranks[i].summary(); });
    return out;
}

RunSummary summarize(const RunReader& run) {
    return summarize(run, rankSummaries(run));
}

RunSummary summarize(const RunReader& run, std::vector<RankSummary> counted) {
    RunSummary s;
    s.worldSize = run.worldSize();
    if (run.manifest()) s.runId = run.manifest()->runId;
    for (size_t i = 0; i < run.ranks().size(); ++i) {
        const RankReader& rank = run.ranks()[i];
        if (s.runId.empty()) s.runId = rank.info().runId;
        RankSummary summary = std::move(counted.at(i));
        // the counts the rank told `record`, where its file could not take them
        if (auto it = run.launchRecording().find(rank.info().rank);
            it != run.launchRecording().end())
            for (const auto& [reason, count] : it->second.drops)
                summary.drops[reason] = std::max(summary.drops[reason], count);
        s.ranks.push_back(
            {rank.info().rank, rank.info(), std::move(summary), rankStatusText(run, rank.info())});
    }
    for (const StoreError& p : run.problems())
        s.problems.push_back(p.what());
    return s;
}

namespace {

bool needsALook(const RankSummaryRow& r) {
    const RankSummary& m = r.summary;
    bool onlyMixed = m.incidentsByKind.empty() ||
                     (m.incidentsByKind.size() == 1 &&
                      m.incidentsByKind.begin()->first == IncidentKind::MixedTensor);
    return r.status != "closed" || !m.drops.empty() || !onlyMixed;
}

// "1008 more rank(s) (16-1023): ops 10216, steps 303, ... each; closed 1008":
// each column's value, or its range where the ranks differ.
std::string othersLine(const std::vector<const RankSummaryRow*>& others) {
    RanksSummedUp sum = sumUp(others);
    auto number = [](int64_t v) { return std::to_string(v); };
    return fmt::format(
        "  ... {} more rank(s) ({}): ops {}, steps {}, collectives {}, {}, incidents {}; {} "
        "(summary --all lists every rank)\n",
        others.size(), formatRankList(sum.ranks), sum.ops.text(number), sum.steps.text(number),
        sum.collectives.text(number), sum.bytes.text(humanBytes), sum.incidents.text(number),
        joinCounts(sum.statuses, [](const std::string& k) { return terminalSafe(k); }));
}

}  // namespace

TableRanks tableRanks(const RunSummary& s, size_t maxRanks) {
    std::vector<bool> listed(s.ranks.size(), maxRanks == 0 || s.ranks.size() <= maxRanks);
    if (!listed.empty() && !listed.front()) {
        size_t n = 0;
        for (size_t i = 0; i < s.ranks.size() && n < maxRanks; ++i)
            if (needsALook(s.ranks[i])) listed[i] = true, ++n;
        for (size_t i = 0; i < s.ranks.size() && n < maxRanks; ++i)
            if (!listed[i]) listed[i] = true, ++n;
    }
    TableRanks out;
    for (size_t i = 0; i < s.ranks.size(); ++i)
        (listed[i] ? out.listed : out.others).push_back(&s.ranks[i]);
    return out;
}

RanksSummedUp sumUp(const std::vector<const RankSummaryRow*>& rows) {
    RanksSummedUp sum;
    auto add = [](RanksSummedUp::Range& range, int64_t v) {
        range.lo = std::min(range.lo, v);
        range.hi = std::max(range.hi, v);
    };
    for (const RankSummaryRow* r : rows) {
        const RankSummary& m = r->summary;
        sum.ranks.push_back(r->rank);
        add(sum.ops, m.ops);
        add(sum.steps, m.steps);
        add(sum.collectives, m.collectives);
        add(sum.bytes, m.collectiveBytes);
        add(sum.incidents, m.incidents);
        ++sum.statuses[r->status];
        for (const auto& [reason, n] : m.drops)
            sum.dropped += n;
    }
    return sum;
}

std::string formatSummaryText(const RunSummary& s, size_t maxRanks) {
    // recorded text (run id, drop reasons, problems) with its controls escaped
    std::string out = fmt::format("run {}  world size {}  ranks readable {}\n",
                                  terminalSafe(s.runId), s.worldSize, s.ranks.size());
    out += fmt::format("{:>5} {:>10} {:>6} {:>10} {:>12} {:>9}  {}\n", "rank", "ops", "steps",
                       "collect.", "bytes", "incidents", "status");
    TableRanks table = tableRanks(s, maxRanks);
    for (const RankSummaryRow* row : table.listed) {
        const RankSummaryRow& r = *row;
        const RankSummary& m = r.summary;
        const std::string& status = r.status;
        out += fmt::format("{:>5} {:>10} {:>6} {:>10} {:>12} {:>9}  {}\n", r.rank, m.ops, m.steps,
                           m.collectives, humanBytes(m.collectiveBytes), m.incidents, status);
        bool onlyMixed = m.incidentsByKind.size() == 1 &&
                         m.incidentsByKind.begin()->first == IncidentKind::MixedTensor;
        if (m.incidents && !onlyMixed)
            out += "      by kind: " +
                   joinCounts(m.incidentsByKind,
                              [](IncidentKind k) { return std::string(toString(k)); }) +
                   "\n";
        if (!m.incidentsByOrigin.empty()) {
            out += "      by origin: " +
                   joinCounts(m.incidentsByOrigin, [](OriginClass o) { return originText(o); }) +
                   "\n";
            out +=
                "      by action: " +
                joinCounts(m.incidentsByAction, [](Action a) { return std::string(toString(a)); }) +
                "\n";
        }
        if (!m.drops.empty())
            out += "      dropped: " +
                   joinCounts(m.drops, [](const std::string& k) { return terminalSafe(k); }) + "\n";
    }
    if (!table.others.empty()) out += othersLine(table.others);
    for (const auto& p : s.problems)
        out += "problem: " + terminalSafe(p) + "\n";
    return out;
}

nlohmann::json summaryToJson(const RunSummary& s) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : s.ranks) {
        const RankSummary& m = r.summary;
        nlohmann::json byKind = nlohmann::json::object(), byOrigin = nlohmann::json::object(),
                       byAction = nlohmann::json::object(), byOutcome = nlohmann::json::object();
        for (auto [k, n] : m.incidentsByKind)
            byKind[std::string(toString(k))] = n;
        for (auto [k, n] : m.incidentsByOrigin)
            byOrigin[std::string(1, char(k))] = n;
        for (auto [k, n] : m.incidentsByAction)
            byAction[std::string(toString(k))] = n;
        for (auto [k, n] : m.incidentsByOutcome)
            byOutcome[std::string(toString(k))] = n;
        ranks.push_back({{"rank", r.rank},
                         {"hostname", r.info.hostname},
                         {"closed", r.info.endedNs.has_value()},
                         {"status", r.status},
                         {"ops", m.ops},
                         {"first_ns", m.firstNs},
                         {"last_ns", m.lastNs},
                         {"steps", m.steps},
                         {"collectives", m.collectives},
                         {"collective_bytes", m.collectiveBytes},
                         {"incidents", m.incidents},
                         {"incidents_by_kind", byKind},
                         {"incidents_by_origin", byOrigin},
                         {"incidents_by_action", byAction},
                         {"incidents_by_outcome", byOutcome},
                         {"drops", m.drops}});
    }
    return {{"run_id", s.runId},
            {"world_size", s.worldSize},
            {"ranks", ranks},
            {"problems", s.problems}};
}

}  // namespace meshscope
