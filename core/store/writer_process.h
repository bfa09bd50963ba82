#pragma once

// Whether a rank file's writer is still at work: its process (the pid in
// the file's meta) still runs on this host. A process on another host is
// not known to run. Used by the recording reach (a live rank is compared
// only as far as its complete steps) and by `merge` (a live run is warned
// about).

#include "core/store/rank_reader.h"

namespace meshscope {

bool writerProcessRuns(const RankInfo& info);

}  // namespace meshscope
