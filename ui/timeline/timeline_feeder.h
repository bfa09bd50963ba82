#pragma once

// Reads what a rank file holds beyond what a RankTimeline already has: the
// one path by which the timeline is filled, for a finished run (call until
// nothing is added) and for a live one (call again on a timer). A reader
// error (a writer that died mid-page, a file being replaced) is reported,
// never thrown, and leaves the timeline as it was.

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/store/rank_reader.h"
#include "ui/timeline/timeline_data.h"

namespace meshscope::ui {

struct FeedResult {
    int64_t ops = 0, incidents = 0, collectives = 0, steps = 0;
    std::string error;  // one line when the reader failed; rows added before it are kept
    bool grew() const { return ops + incidents + collectives + steps > 0; }
};

// Rank identity, host and thread names from the rank's meta.
void initRank(const RankInfo& info, RankTimeline& track);
inline void initRank(const RankReader& reader, RankTimeline& track) {
    initRank(reader.info(), track);
}

// Adds at most `maxOps` new ops (and every new incident, collective and
// optimizer step) to `track`.
FeedResult feedRank(const RankReader& reader, RankTimeline& track, int64_t maxOps);

// A live run is followed in two halves (RunSession): a worker thread reads a
// rank's new rows after the timeline's cursor (readRows, its own reader),
// and the GUI thread adds them (applyRows), so the GUI thread reads no file
// while following. The rows carry the texts of the strings they name.
struct FeedCursor {
    int rank = 0;
    int64_t lastOpSeq = 0, lastIncidentSeq = 0, lastCollectiveSeq = 0;
    int64_t lastStep = std::numeric_limits<int64_t>::min();
};
FeedCursor cursorOf(const RankTimeline& track);

struct OpRow {  // what the timeline keeps of an op
    int64_t seq = 0, startNs = 0, endNs = 0;
    uint32_t thread = 0;
    uint16_t depth = 0;
    StringId name;
    Phase phase = Phase::Other;
    bool incident = false;
    int64_t step = -1;
};
struct RankRows {
    int rank = 0;
    std::vector<OpRow> ops;
    std::vector<IncidentRecord> incidents;
    std::vector<CollectiveRecord> collectives;
    std::vector<OptimizerStepRecord> steps;
    std::unordered_map<int64_t, std::string> strings;  // StringId -> text, of those named
    std::map<std::string, std::string> meta;           // the rank's meta, read again
    bool ended = false;                                // its writer closed the file
    std::string error;                                 // as FeedResult::error
};
RankRows readRows(const RankReader& reader, const FeedCursor& cursor, int64_t maxOps);
FeedResult applyRows(const RankRows& rows, RankTimeline& track);

}  // namespace meshscope::ui
