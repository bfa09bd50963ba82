#pragma once

// What a rank tells `meshscope record` about its recording, through the
// datagram socket record names in MESHSCOPE_STATUS_SOCKET: that it
// records into its file or cannot (and why), and at its end what it wrote
// and dropped by reason. It needs no disk: record can say what a rank lost
// even where the disk could not take the counts. Best effort: without the
// variable, or with record gone, nothing is sent and nothing waits.

#include <cstdint>
#include <string>

#include "core/store/rank_writer.h"

namespace meshscope {

// {"event": "attached"|"not_recording", "rank", "pid", "file", "why"}
void tellLauncherAttached(int rank, const std::string& file, const std::string& notRecording);
// {"event": "closed", "rank", "pid", "submitted", "written", "drops": {reason: n}}
void tellLauncherClosed(int rank, const WriterStats& stats);

}  // namespace meshscope
