#pragma once

// Per-rank summary of a run, shared by the CLI's `summary` and the GUI.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/store/run_reader.h"

namespace meshscope {

struct RankSummaryRow {
    int rank = 0;
    RankInfo info;
    RankSummary summary;  // drops: the larger of the file's and launch.json's counts
    std::string status;   // rankStatusText
};

struct RunSummary {
    std::string runId;
    int worldSize = 0;
    std::vector<RankSummaryRow> ranks;
    std::vector<std::string> problems;  // one line each
};

// Each rank's summary() as its file counts it, in the run's rank order,
// read side by side (a query per table of each rank file: on a 1,024-rank
// run the largest part of `summary`). A rank whose file fails to answer
// throws its StoreError, the first in rank order.
std::vector<RankSummary> rankSummaries(const RunReader& run);

RunSummary summarize(const RunReader& run);
// The same from rankSummaries(run), read once for all of `check`.
RunSummary summarize(const RunReader& run, std::vector<RankSummary> counted);

// "0,1" and "0-15,17": runs of three or more ranks as a range, at most 16
// items, the rest counted (" and 40 more rank(s) (57 in all)"), so a
// 4,096-rank job's finding stays one line.
std::string formatRankList(const std::vector<int>& ranks);

// "closed", "closed (its end marker was lost to the disk)" (launch.json says
// the rank closed its recording; its file could not take the marker), or
// "open or killed".
std::string rankStatusText(const RunReader& run, const RankInfo& info);
// Ranks a table leaves out, summed up for its one line: each column's
// smallest and largest value, their ranks, statuses counted, records lost.
struct RanksSummedUp {
    struct Range {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        // "303", or "90-100" where the ranks differ; `show` formats a value
        template <class Show>
        std::string text(Show show) const {
            return lo == hi ? show(lo) : show(lo) + "-" + show(hi);
        }
    };
    std::vector<int> ranks;
    Range ops, steps, collectives, bytes, incidents;
    std::map<std::string, int64_t> statuses;
    uint64_t dropped = 0;
};
RanksSummedUp sumUp(const std::vector<const RankSummaryRow*>& rows);

// The rows a table of at most `maxRanks` ranks lists (0: every rank), in
// rank order: the ranks that need a look (not closed, records lost,
// incidents other than mixed tensors), then the first ranks; and the others,
// for one summing line (sumUp).
struct TableRanks {
    std::vector<const RankSummaryRow*> listed, others;
};
TableRanks tableRanks(const RunSummary& summary, size_t maxRanks);

// The per-rank table. A job of more than `maxRanks` ranks (0: no limit)
// lists the ranks that need a look (not closed, records lost, incidents
// other than mixed tensors), then the first ranks, `maxRanks` in all, and
// sums up the others in one line: `record` of a 1,024-rank job prints a
// screen, not 3,000 lines.
inline constexpr size_t kSummaryRanksListed = 16;
std::string formatSummaryText(const RunSummary& summary, size_t maxRanks = kSummaryRanksListed);
nlohmann::json summaryToJson(const RunSummary& summary);

}  // namespace meshscope
