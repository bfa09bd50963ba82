#pragma once

// Helpers the report writers share (core/report/*_report.cpp): how a
// fingerprint and a count map read in every format.

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

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

}  // namespace meshscope::report_text
