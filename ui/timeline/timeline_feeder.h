#pragma once

// Reads what a rank file holds beyond what a RankTimeline already has: the
// one path by which the timeline is filled, for a finished run (call until
// nothing is added) and for a live one (call again on a timer). A reader
// error (a writer that died mid-page, a file being replaced) is reported,
// never thrown, and leaves the timeline as it was.

#include <cstdint>
#include <string>

#include "core/store/rank_reader.h"
#include "ui/timeline/timeline_data.h"

namespace meshscope::ui {

struct FeedResult {
    int64_t ops = 0, incidents = 0, collectives = 0, steps = 0;
    std::string error;  // one line when the reader failed; rows added before it are kept
    bool grew() const { return ops + incidents + collectives + steps > 0; }
};

// Rank identity, host and thread names from the rank's meta.
void initRank(const RankReader& reader, RankTimeline& track);

// Adds at most `maxOps` new ops (and every new incident, collective and
// optimizer step) to `track`.
FeedResult feedRank(const RankReader& reader, RankTimeline& track, int64_t maxOps);

}  // namespace meshscope::ui
