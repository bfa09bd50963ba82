#pragma once

// How far each rank's recording holds everything the rank did, so that
// ranks are compared only as far as every rank's recording reaches. A rank
// killed (SIGKILL: its last ~200 ms never committed), a rank still
// recording, a file that lost records (a full queue, a write error) ends
// early or has gaps; the end of such a recording is no divergence and
// predicts no hang. A rank whose writer closed, or that died of a fatal
// signal after its last words (crash_guard), recorded everything.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/store/run_reader.h"

namespace meshscope {

struct RecordingReach {
    enum class End : uint8_t {
        Closed,   // its writer closed the file
        Aborted,  // died of a fatal signal; its last words were written
        Killed,   // launch.json says how it ended; the file was not closed
        Live,     // not closed, and its process still runs on this host
        Open,     // not closed, nothing says why (killed, or on another host)
    };
    int rank = 0;
    End end = End::Closed;
    // What happened, in words: "killed by SIGKILL", "died of SIGABRT ...".
    std::string how;
    // Entries at or after this rank-local ns, or of this step or later, are
    // left out of cross-rank comparisons.
    int64_t untilNs = std::numeric_limits<int64_t>::max();
    int64_t belowStep = std::numeric_limits<int64_t>::max();
    // The recording ends before the rank did (or has gaps): running out of
    // entries there is no divergence.
    bool truncated = false;
    std::string note{};  // for `check` and the reports; "" when nothing is left out

    bool includes(int64_t timeNs, int64_t step) const {
        return timeNs < untilNs && step < belowStep;
    }
};

// One per readable rank, in the run's rank order.
std::vector<RecordingReach> recordingReach(const RunReader& run);
// The same from the ranks' own counts (rankSummaries(run), run_summary.h).
std::vector<RecordingReach> recordingReach(const RunReader& run,
                                           const std::vector<RankSummary>& counted);

// "killed", "live", ...: how reports and JSON name an end.
std::string_view toString(RecordingReach::End end);

}  // namespace meshscope
