#include "core/store/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "core/store/store_error.h"

namespace meshscope {
namespace {

// What a non-regular file is, for the message.
std::string kindOf(mode_t mode) {
    if (S_ISDIR(mode)) return "is a directory, not a regular file";
    if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
    if (S_ISSOCK(mode)) return "is a socket, not a regular file";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a regular file";
    return "not a regular file";
}

[[noreturn]] void failOpen(const std::filesystem::path& file, int error) {
    if (error == ENOENT) throw StoreError(file.string(), "no such file");
    if (error == EACCES || error == EPERM)
        throw StoreError(file.string(), "permission denied (cannot read it)");
    if (error == ELOOP) throw StoreError(file.string(), "too many levels of symbolic links");
    if (error == EMFILE || error == ENFILE)
        throw StoreError(file.string(),
                         std::string("cannot open: ") + std::strerror(error) +
                             " (each rank holds its file open, 3 files while it is written: raise "
                             "the limit, `ulimit -Hn` and `ulimit -n`, to 3 per rank or more)");
    throw StoreError(file.string(), std::string("cannot open: ") + std::strerror(error));
}

class Fd {
  public:
    explicit Fd(int fd) : m_fd(fd) {}
    ~Fd() {
        if (m_fd >= 0) ::close(m_fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return m_fd; }

  private:
    int m_fd;
};

}  // namespace

void refuseIfNotRegular(const std::filesystem::path& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        throw StoreError(file.string(), kindOf(st.st_mode));
}

namespace {

// An open descriptor of `file` and its status, refused unless regular.
// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
std::pair<std::unique_ptr<Fd>, struct stat> openRegular(const std::filesystem::path& file) {
    auto fd =
        std::make_unique<Fd>(::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (fd->get() < 0) failOpen(file, errno);
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0) failOpen(file, errno);
    if (!S_ISREG(st.st_mode)) throw StoreError(file.string(), kindOf(st.st_mode));
    return {std::move(fd), st};
}

std::string readUpTo(const std::filesystem::path& file, const Fd& fd, size_t n) {
    std::string bytes(n, '\0');
    size_t got = 0;
    while (got < bytes.size()) {
        ssize_t r = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            throw StoreError(file.string(), std::string("read failed: ") + std::strerror(errno));
        if (r == 0) break;  // shorter, or shrank while being read
        got += size_t(r);
    }
    bytes.resize(got);
    return bytes;
}

}  // namespace

std::string readRegularFile(const std::filesystem::path& file, size_t maxBytes) {
    auto [fd, st] = openRegular(file);
    if (uint64_t(st.st_size) > maxBytes)
        throw StoreError(file.string(), "too large (" + std::to_string(st.st_size) +
                                            " bytes, at most " + std::to_string(maxBytes) + ")");
    return readUpTo(file, *fd, size_t(st.st_size));
}

FileHead readRegularFileHead(const std::filesystem::path& file, size_t n) {
    auto [fd, st] = openRegular(file);
    return {readUpTo(file, *fd, n), uint64_t(st.st_size)};
}

unsigned modeWithUmask(unsigned mode) {
    // /proc/self/status says the umask without changing it (umask() would,
    // for a moment, for every thread of the training).
    unsigned mask = 022;
    try {
        std::string status = readRegularFile("/proc/self/status", 1 << 16);
        if (auto at = status.find("Umask:"); at != std::string::npos)
            mask = unsigned(std::stoul(status.substr(at + 6), nullptr, 8));
    } catch (const std::exception&) {
    }
    return mode & ~mask & 07777;
}

void writeFileAtomically(const std::filesystem::path& file, const std::string& text) {
    std::filesystem::path tmp = file;
    tmp += ".tmp" + std::to_string(::getpid());
    ::unlink(tmp.c_str());  // this process's own leftover (never another's name)
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    modeWithUmask(0640));
    if (fd < 0)
        throw StoreError(file.string(), std::string("cannot write: ") + std::strerror(errno));
    size_t done = 0;
    int error = 0;
    while (done < text.size()) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error = n < 0 ? errno : EIO;
            break;
        }
        done += size_t(n);
    }
    if (::close(fd) != 0 && !error) error = errno;
    if (!error && ::rename(tmp.c_str(), file.c_str()) != 0) error = errno;
    if (error) {
        ::unlink(tmp.c_str());
        throw StoreError(file.string(), std::string("cannot write: ") + std::strerror(error));
    }
}

}  // namespace meshscope
