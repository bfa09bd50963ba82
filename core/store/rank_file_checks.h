#pragma once

// The checks that come before a rank file's first query (RankReader::open):
// its header, how it can be read without writing beside it, and its schema.

#include <filesystem>

#include "core/store/sqlite.h"

namespace meshscope {

// How a rank file can be read without writing anything beside it. SQLite
// reads a WAL file through its -shm, which it creates or writes: that needs
// a folder and a -shm this process may write. Where it may not (a folder of
// another user, a read-only mount, a run copied without its -shm), a file
// with no -wal opens immutable, and one with a -wal is read from a private
// copy of both, so the committed rows in the -wal are read too.
enum class ReadVia { Shared, Immutable, PrivateCopy };

ReadVia readVia(const std::filesystem::path& file);

// Whether the file's -wal holds anything (rows committed but not yet in the
// file itself).
bool hasWalContent(const std::filesystem::path& file);

// Checks the 100-byte SQLite header so that empty, truncated and non-SQLite
// files get a precise message before SQLite sees them; FIFOs, devices and
// unreadable files are refused before SQLite would block on them. Throws
// StoreError naming the file.
void checkHeader(const std::filesystem::path& file);

// The tables, columns and indexes a meshscope writer makes, and nothing
// else (schema::tableShapes, schema::kIndexNames), or StoreError naming
// `path` and what it holds instead.
void checkRankSchema(sql::Db& db, const std::filesystem::path& path);

}  // namespace meshscope
