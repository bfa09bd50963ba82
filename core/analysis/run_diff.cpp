#include "core/analysis/run_diff.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/analysis/sequence_compare.h"
#include "core/util/terminal_text.h"

namespace meshscope {
namespace {

using GroupKey = std::tuple<std::string, int, std::string, char>;  // file, line, op, origin

GroupKey keyOf(const IncidentGroup& g) {
    return {g.site.file, g.site.line, g.op, originLetter(g.origin)};
}

// For the terminal (formatDiffText): recorded text with its controls escaped.
std::string describe(const GroupChange& c) {
    return terminalSafe(fmt::format("{} {} origin {} ({})", formatLocation(c.site), c.op,
                                    originText(c.origin), describeOrigin(c.origin)));
}

nlohmann::json changeToJson(const GroupChange& c) {
    return {{"op", c.op},
            {"origin", originText(c.origin)},
            {"site", {{"file", c.site.file}, {"line", c.site.line}, {"function", c.site.function}}},
            {"count_a", c.countA},
            {"count_b", c.countB},
            {"unreconciled_a", c.unreconciledA},
            {"unreconciled_b", c.unreconciledB}};
}

// A rank's collectives, by (kind, call site): count and bytes.
using CollectiveKey = std::pair<std::string, std::string>;
std::map<CollectiveKey, std::pair<int64_t, int64_t>> collectivesOf(const RankReader& rank) {
    std::map<CollectiveKey, std::pair<int64_t, int64_t>> out;
    std::map<int64_t, std::string> sites;  // stack id -> its innermost frame
    for (const CollectiveRecord& c : rank.collectivesAfter(CollectiveSeq{})) {
        auto [at, fresh] = sites.try_emplace(c.stack.valid() ? c.stack.value() : 0);
        if (fresh && c.stack.valid())
            if (std::vector<Frame> frames = rank.stack(c.stack); !frames.empty())
                at->second =
                    fmt::format("{}:{}", rank.string(frames.front().file), frames.front().line);
        auto& [count, bytes] = out[{rank.string(c.kind), at->second}];
        ++count;
        bytes += c.bytes;
    }
    return out;
}

void diffCollectives(int rank, const RankReader& a, const RankReader& b, RunDiff& diff) {
    auto inA = collectivesOf(a), inB = collectivesOf(b);
    std::map<CollectiveKey, CollectiveChange> changes;
    for (const auto& [key, totals] : inA) {
        CollectiveChange& c = changes[key];
        c.countA = totals.first, c.bytesA = totals.second;
    }
    for (const auto& [key, totals] : inB) {
        CollectiveChange& c = changes[key];
        c.countB = totals.first, c.bytesB = totals.second;
    }
    for (auto& [key, c] : changes) {
        if (c.countA == c.countB && c.bytesA == c.bytesB) continue;
        c.rank = rank;
        c.kind = key.first;
        c.site = key.second;
        diff.collectiveChanges.push_back(std::move(c));
    }
}

}  // namespace

RunDiff diffRuns(const RunReader& a, const RunAnalysis& analysisA, const RunReader& b,
                 const RunAnalysis& analysisB, bool compareOps) {
    RunDiff diff;
    std::map<GroupKey, GroupChange> changes;
    for (const IncidentGroup& g : analysisA.groups) {
        GroupChange& c = changes[keyOf(g)];
        c.op = g.op, c.origin = g.origin, c.site = g.site;
        c.countA = g.count, c.unreconciledA = g.unreconciled;
    }
    for (const IncidentGroup& g : analysisB.groups) {
        GroupChange& c = changes[keyOf(g)];
        c.op = g.op, c.origin = g.origin, c.site = g.site;
        c.countB = g.count, c.unreconciledB = g.unreconciled;
    }
    for (auto& [key, c] : changes) {
        if (c.countA == 0)
            diff.appeared.push_back(c);
        else if (c.countB == 0)
            diff.disappeared.push_back(c);
        else if (c.countA != c.countB || c.unreconciledA != c.unreconciledB)
            diff.changed.push_back(c);
    }

    std::map<int, const RankReader*> ranksA, ranksB;
    for (const RankReader& r : a.ranks())
        ranksA[r.info().rank] = &r;
    for (const RankReader& r : b.ranks())
        ranksB[r.info().rank] = &r;
    for (const auto& [rank, reader] : ranksA) {
        auto other = ranksB.find(rank);
        if (other == ranksB.end()) {
            diff.ranksOnlyInA.push_back(rank);
            continue;
        }
        diffCollectives(rank, *reader, *other->second, diff);
        if (!compareOps) continue;
        // The two runs' copies of one rank, compared as streams 0 (A) and 1 (B).
        std::vector<Divergence> found;
        diff.opsCompared += compareOpSequences({{reader, 0}, {other->second, 1}}, found);
        for (const Divergence& d : found) {
            OpSequenceChange c;
            c.rank = rank;
            c.thread = d.thread;
            c.index = d.index;
            c.step = d.step;
            c.a = d.rank == 0 ? d.actual : d.expected;
            c.b = d.rank == 0 ? d.expected : d.actual;
            diff.opChanges.push_back(std::move(c));
        }
    }
    for (const auto& [rank, reader] : ranksB)
        if (!ranksA.count(rank)) diff.ranksOnlyInB.push_back(rank);
    return diff;
}

std::string formatDiffText(const RunDiff& diff) {
    std::string out;
    for (const GroupChange& c : diff.disappeared)
        out += fmt::format("- gone     {}  ({} incident(s) in A)\n", describe(c), c.countA);
    for (const GroupChange& c : diff.appeared)
        out += fmt::format("+ new      {}  ({} incident(s) in B)\n", describe(c), c.countB);
    for (const GroupChange& c : diff.changed)
        out += fmt::format("~ changed  {}  ({} -> {} incident(s), {} -> {} unreconciled)\n",
                           describe(c), c.countA, c.countB, c.unreconciledA, c.unreconciledB);
    for (const OpSequenceChange& c : diff.opChanges)
        out += fmt::format(
            "ops: rank {} thread {} first differs at op #{} (step {}): A has {}, "
            "B has {}\n",
            c.rank, c.thread, c.index, c.step, c.a.empty() ? "nothing more" : terminalSafe(c.a),
            c.b.empty() ? "nothing more" : terminalSafe(c.b));
    for (const CollectiveChange& c : diff.collectiveChanges)
        out += fmt::format("collectives: rank {} {} at {}: {} -> {} call(s), {} -> {} bytes\n",
                           c.rank, terminalSafe(c.kind),
                           c.site.empty() ? "an unrecorded site" : terminalSafe(c.site), c.countA,
                           c.countB, c.bytesA, c.bytesB);
    for (int r : diff.ranksOnlyInA)
        out += fmt::format("rank {}: only in A\n", r);
    for (int r : diff.ranksOnlyInB)
        out += fmt::format("rank {}: only in B\n", r);
    if (diff.empty())
        out += fmt::format(
            "no differences in incidents, collectives or op sequences ({} ops compared)\n",
            diff.opsCompared);
    return out;
}

nlohmann::json diffToJson(const RunDiff& diff) {
    auto list = [](const std::vector<GroupChange>& changes) {
        nlohmann::json out = nlohmann::json::array();
        for (const GroupChange& c : changes)
            out.push_back(changeToJson(c));
        return out;
    };
    nlohmann::json ops = nlohmann::json::array();
    for (const OpSequenceChange& c : diff.opChanges)
        ops.push_back({{"rank", c.rank},
                       {"thread", c.thread},
                       {"index", c.index},
                       {"step", c.step},
                       {"a", c.a},
                       {"b", c.b}});
    nlohmann::json collectives = nlohmann::json::array();
    for (const CollectiveChange& c : diff.collectiveChanges)
        collectives.push_back({{"rank", c.rank},
                               {"kind", c.kind},
                               {"site", c.site},
                               {"count_a", c.countA},
                               {"count_b", c.countB},
                               {"bytes_a", c.bytesA},
                               {"bytes_b", c.bytesB}});
    return {{"appeared", list(diff.appeared)},      {"disappeared", list(diff.disappeared)},
            {"changed", list(diff.changed)},        {"op_changes", ops},
            {"collective_changes", collectives},    {"ranks_only_in_a", diff.ranksOnlyInA},
            {"ranks_only_in_b", diff.ranksOnlyInB}, {"ops_compared", diff.opsCompared}};
}

}  // namespace meshscope
