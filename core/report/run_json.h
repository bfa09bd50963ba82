#pragma once

// A recorded run as one JSON document with every string and stack resolved:
// the shape `meshscope.load_run()` returns to Python (the raw records per
// rank; the JSON report, json_report.cpp, is the analysis instead). Strings
// from the run are untrusted; nlohmann-json escapes them and replaces invalid
// UTF-8.

#include <nlohmann/json_fwd.hpp>

#include "core/store/run_reader.h"

namespace meshscope {

struct RunJsonOptions {
    bool opNameCounts = true;  // per-rank histogram of op names (reads every op)
};

nlohmann::json incidentToJson(const RankReader& rank, const IncidentRecord& incident);
nlohmann::json runToJson(const RunReader& run, const RunJsonOptions& options = {});

}  // namespace meshscope
