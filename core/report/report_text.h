#pragma once

// Helpers the report writers share (core/report/*_report.cpp): how a
// fingerprint and a count map read in every format, and when a report
// shows where each rank stopped.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/analysis/run_analysis.h"

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

// "#795548": an incident kind's colour (vocabulary.h).
inline std::string kindColour(IncidentKind kind) {
    return fmt::format("#{:06x}", incidentKindInfo(kind).rgb);
}

}  // namespace meshscope::report_text
