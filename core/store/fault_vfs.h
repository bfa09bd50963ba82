#pragma once

// Disk faults on purpose, for the fault-injection tests: an SQLite VFS over
// the default one whose writes fail after a number of bytes, or from the
// moment a trigger file exists, as a full disk (SQLITE_FULL) or a file
// system remounted read-only (an I/O error) fails them. Every rank file this process writes
// afterwards goes through it; reads are untouched. Off unless installed.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace meshscope {

struct DiskFault {
    enum class Kind { Full, ReadOnly };
    Kind kind = Kind::Full;
    uint64_t afterBytes = 0;  // writes succeed until this many bytes were written
    // Full only: after this many failed writes the space is free again (0:
    // never), as when a user deletes files while the job runs.
    uint64_t freeAfterFails = 0;
    // When set, writes succeed until this file exists instead (afterBytes is
    // not used): a test fails the disk at a point of the job it chose, after
    // what it flushed, whatever the writer's batches were.
    std::string whenExists{};
};

// "full-after=BYTES[,free-after=FAILS]", "readonly-after=BYTES", or
// "full-when=PATH[,free-after=FAILS]", "readonly-when=PATH" (PATH without
// commas); nullopt and `error` set for anything else.
std::optional<DiskFault> parseDiskFault(std::string_view text, std::string* error = nullptr);

// Makes the faulty VFS the default for connections opened from now on (the
// counters start at zero). Idempotent for the same fault.
void installDiskFault(const DiskFault& fault);
// Installs the fault MESHSCOPE_FAULT_DISK names, once per process; throws
// std::invalid_argument naming the variable for a malformed value.
void installDiskFaultFromEnvironment();

// Writes the fault failed so far (0 when none is installed).
uint64_t diskFaultFailures();

}  // namespace meshscope
