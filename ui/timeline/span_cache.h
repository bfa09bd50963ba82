#pragma once

// The op spans of a finished rank kept between sessions. The first open of
// a long finished rank reads its ops from the rank file as always, with its
// lanes spilling their full blocks into a cache file of their own instead of
// the process's unnamed spill file; once the rank is read, the lanes' layout
// (block slots, tails, the time-bucket summaries the zoomed-out view reads),
// names, step starts and op cursor are written after the blocks. The next
// open of the same, unchanged file maps those blocks back and reads only
// that index: no op is read, and the view pages in only the spans it shows.
// Incidents, collectives and steps are always read from the rank file, the
// only source of truth. A cache that is missing, damaged, of another format
// or of a rank file that changed since (size, modification time, file
// identity) is ignored, removed and written again; one that cannot be
// written (no folder, a full disk) costs nothing but the next open's speed.
// Qt-free.
//
// Where: $MESHSCOPE_GUI_CACHE_DIR, else spillDirectory()/timelines ("off"
// for either turns the cache off). What it may hold:
// $MESHSCOPE_GUI_CACHE_MB megabytes (default 2048); the least recently used
// files go first.

#include <cstdint>
#include <filesystem>
#include <string>

#include "ui/timeline/timeline_data.h"

namespace meshscope::ui {

// Ranks with fewer ops read fast from their file: not cached.
inline constexpr int64_t kMinCachedOps = int64_t(SpanColumn::kSpansPerBlock);

// The folder of the cache files; empty when the cache is off.
std::filesystem::path spanCacheDirectory();
// The cache file of `rankFile` in `dir`.
std::filesystem::path spanCacheFile(const std::filesystem::path& dir,
                                    const std::filesystem::path& rankFile);

// Before anything was fed to `track`: fills its op part (lanes, step starts,
// time range, op count and cursor, the rank's strings) from the cache of
// `rankFile`. False, with `why`, when there is no valid cache (a damaged or
// stale one is removed): `track` is then as it was.
bool loadSpanCache(const std::filesystem::path& rankFile, RankTimeline& track, std::string& why);

// Before the ops of a finished rank are fed: its lanes spill into a new
// cache file from now on. False, with `why`, when none can be made.
bool beginSpanCache(const std::filesystem::path& rankFile, RankTimeline& track, std::string& why);
// Once every op was fed: writes the index and makes the cache the one the
// next open finds. False, with `why`, when it cannot (a block held in
// memory, a full disk): the file is removed, the spans stay mapped.
bool finishSpanCache(const std::filesystem::path& rankFile, RankTimeline& track, std::string& why);
// A cache begun and not finished (the load was cancelled or failed): its
// file is removed; the lanes keep the blocks they mapped.
void abandonSpanCache(RankTimeline& track);

// Drops the least recently used cache files of `dir` until the rest hold
// at most `maxBytes`, and the unfinished ones of processes that are gone:
// after a run's ranks were cached.
void trimSpanCache(const std::filesystem::path& dir, uint64_t maxBytes);
// What the folder may hold: $MESHSCOPE_GUI_CACHE_MB megabytes (2048).
uint64_t spanCacheMaxBytes();

}  // namespace meshscope::ui
