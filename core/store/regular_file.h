#pragma once

// Run files are opened only when they are regular files: a FIFO, a device
// or a directory named manifest.json or rank-00000.msdb would block a read
// forever or fail deep inside a parser. Each check is one StoreError naming
// the file and saying what it is instead.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace meshscope {

// Throws StoreError when `file` exists (symlinks followed) and is not a
// regular file: SQLite opens a rank file's -wal and -shm by name.
void refuseIfNotRegular(const std::filesystem::path& file);

// The whole of a regular file of at most `maxBytes`, opened without blocking
// and checked on the open descriptor (a file swapped for a FIFO after a
// check is still refused). Throws StoreError naming the file: "no such
// file", "is a directory, not a regular file", "is a FIFO, not a regular
// file", "permission denied (cannot read it)", or "too large".
std::string readRegularFile(const std::filesystem::path& file, size_t maxBytes);

// The first `n` bytes (fewer for a shorter file) of a regular file, and its
// size, checked the same way.
struct FileHead {
    std::string bytes;
    uint64_t size = 0;
};
FileHead readRegularFileHead(const std::filesystem::path& file, size_t n);

// Mode bits the process's umask leaves of `mode` (files meshscope creates
// are 0640, folders 0750: the owner's and the group's).
unsigned modeWithUmask(unsigned mode);

// Replaces `file` with `text` atomically: written to a new temporary file
// beside it (created exclusively, never through a symlink, mode 0640 less
// the umask), then renamed over it (a symlink named `file` is replaced, not
// followed). Throws StoreError naming the file and the system's reason
// ("No space left on device"); a failure leaves no temporary file.
void writeFileAtomically(const std::filesystem::path& file, const std::string& text);

}  // namespace meshscope
