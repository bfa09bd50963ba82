#pragma once

// Per-rank summary of a run, shared by the CLI's `summary` and the GUI.

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

RunSummary summarize(const RunReader& run);
// "closed", "closed (its end marker was lost to the disk)" (launch.json says
// the rank closed its recording; its file could not take the marker), or
// "open or killed".
std::string rankStatusText(const RunReader& run, const RankInfo& info);
std::string formatSummaryText(const RunSummary& summary);
nlohmann::json summaryToJson(const RunSummary& summary);

}  // namespace meshscope
