#pragma once

// Export of a run as Chrome trace event JSON (the "Trace Event Format" that
// Perfetto and chrome://tracing open): one process per rank, one track per
// recorded thread, properly nested X events for ops, collectives and
// optimizer steps on their own tracks, instant events for incidents, flow
// arrows from each incident to the op that reconciled it, and a counter of
// collective bytes per step. Streams: a run of millions of ops is written
// page by page. Ranks are aligned by wall clock.

#include <cstdint>
#include <functional>
#include <iosfwd>

#include "core/store/run_reader.h"

namespace meshscope {

struct TraceExportStats {
    int64_t ops = 0, collectives = 0, incidents = 0, flows = 0, clamped = 0;
};

TraceExportStats writeChromeTrace(
    const RunReader& run, std::ostream& out,
    const std::function<void(int64_t done, int64_t total)>& progress = {});

}  // namespace meshscope
