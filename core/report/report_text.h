#pragma once

// Helpers the report writers share (core/report/*_report.cpp): how a
// fingerprint and a count map read in every format, and when a report
// shows where each rank stopped.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/analysis/run_analysis.h"
#include "core/analysis/run_summary.h"

namespace meshscope::report_text {

// JSON dumps replace invalid UTF-8 in recorded strings instead of throwing.
inline constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

inline std::string fingerprintText(const std::optional<uint64_t>& fp) {
    return fp ? fmt::format("{:016x}", *fp) : "";
}

// "rank 0: 3, rank 1: 2" (label(key) then the count), "-" when empty.
inline std::string joinCounts(const auto& counts, auto label) {
    std::string out;
    for (const auto& [k, n] : counts)
        out += fmt::format("{}{} {}", out.empty() ? "" : ", ", label(k), n);
    return out.empty() ? "-" : out;
}

// An incident group's count per rank: "rank 0: 3, rank 1: 2" (joinCounts)
// up to 8 ranks; past that the ranks are grouped by their count, so a
// 1,024-rank job's group stays one line: "3 on rank(s) 0-1023", "3 on
// rank(s) 0-511; 2 on rank(s) 512-1023", or with more than 4 different
// counts "1-9 on 1024 rank(s) (0-1023); most: 9 on rank 716".
inline std::string perRankCounts(const std::map<int, int64_t>& perRank, auto label) {
    constexpr size_t kListed = 8, kCountsListed = 4;
    if (perRank.size() <= kListed) return joinCounts(perRank, label);
    std::map<int64_t, std::vector<int>> byCount;
    for (const auto& [rank, n] : perRank)
        byCount[n].push_back(rank);
    std::string out;
    if (byCount.size() <= kCountsListed) {
        for (auto it = byCount.rbegin(); it != byCount.rend(); ++it)
            out += fmt::format("{}{} on rank(s) {}", out.empty() ? "" : "; ", it->first,
                               formatRankList(it->second));
        return out;
    }
    std::vector<int> ranks;
    for (const auto& [rank, n] : perRank)
        ranks.push_back(rank);
    const auto& [most, mostRanks] = *byCount.rbegin();
    return fmt::format("{}-{} on {} rank(s) ({}); most: {} on rank(s) {}", byCount.begin()->first,
                       most, perRank.size(), formatRankList(ranks), most,
                       formatRankList(mostRanks));
}

// Whether a report shows "Where each rank stopped": a rank ended in a
// collective incident, left its file open, or launch.json says it ended
// other than with exit code 0. A clean run's report does not change.
inline bool stopsWorthShowing(const std::vector<RankStop>& stops) {
    for (const RankStop& s : stops)
        if (s.stoppedIn || !s.closed || !s.exception.empty() || !s.stillPending.empty() ||
            (!s.ended.empty() && s.ended != "exited with 0"))
            return true;
    return false;
}

// The rows of "Where each rank stopped": a rank each, or past 16 ranks the
// ranks of each state together, in order of their first rank (a hang on
// 1,000 ranks is one row, not 1,000). `ranks`: "3" or "0-511,600".
struct StopRow {
    std::string ranks;
    const RankStop* stop = nullptr;  // the first of its ranks
};
inline std::vector<StopRow> stopRows(const std::vector<RankStop>& stops) {
    std::vector<StopRow> rows;
    if (stops.size() <= kSummaryRanksListed) {
        for (const RankStop& s : stops)
            rows.push_back({std::to_string(s.rank), &s});
        return rows;
    }
    for (const StopGroup& g : groupStops(stops))
        rows.push_back({formatRankList(g.ranks), g.stop});
    return rows;
}

// "#795548": an incident kind's colour (vocabulary.h).
inline std::string kindColour(IncidentKind kind) {
    return fmt::format("#{:06x}", incidentKindInfo(kind).rgb);
}

}  // namespace meshscope::report_text
