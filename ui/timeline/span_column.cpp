#include "ui/timeline/span_column.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>

namespace meshscope::ui {

uint32_t Span::encodeDuration(uint64_t ns) {
    constexpr uint64_t kCount = (uint64_t(1) << 30) - 1;
    uint64_t unit = 1;
    for (uint32_t code = 0; code < 3; ++code, unit *= 1000) {
        uint64_t count = ns / unit + (ns % unit != 0);  // rounded up
        if (count <= kCount) return code << 30 | uint32_t(count);
    }
    uint64_t seconds = ns / unit + (ns % unit != 0);
    return 3u << 30 | uint32_t(std::min(seconds, kCount));
}

int64_t Span::decodeDuration(uint32_t code) {
    static constexpr int64_t kUnit[] = {1, 1000, 1000000, 1000000000};
    return int64_t(code & ((1u << 30) - 1)) * kUnit[code >> 30];
}

std::string spillDirectory() {
    auto env = [](const char* name) -> std::string {
        const char* v = std::getenv(name);
        return v && *v ? v : "";
    };
    if (std::string dir = env("MESHSCOPE_GUI_SPILL_DIR"); !dir.empty()) return dir;
    if (std::string dir = env("XDG_CACHE_HOME"); !dir.empty()) return dir + "/meshscope";
    if (std::string dir = env("HOME"); !dir.empty()) return dir + "/.cache/meshscope";
    std::error_code ec;
    return std::filesystem::temp_directory_path(ec).string();
}

namespace {

constexpr size_t kBlockBytes = SpanColumn::kSpansPerBlock * sizeof(Span);

// One unnamed file for the process, in equal slots of kBlockBytes: a slot
// freed by a column (another run opened) is used again. Columns fill on
// several threads (one rank each), so slots are taken under a lock; the
// writes and mappings run outside it.
class SpillFile {
  public:
    static SpillFile& instance() {
        static SpillFile file;
        return file;
    }

    // A mapping of a slot now holding `spans` (kSpansPerBlock of them), or
    // {nullptr, -1} when the file cannot take it: the caller keeps the block.
    std::pair<Span*, int64_t> store(const Span* spans) {
        int64_t slot = take();
        if (slot < 0) return {nullptr, -1};
        const char* data = reinterpret_cast<const char*>(spans);
        off_t offset = off_t(slot) * off_t(kBlockBytes);
        for (size_t done = 0; done < kBlockBytes;) {
            ssize_t n = ::pwrite(m_fd, data + done, kBlockBytes - done, offset + off_t(done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return fail(slot, std::string("cannot write: ") + std::strerror(errno));
            done += size_t(n);
        }
        void* map = ::mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE, MAP_SHARED, m_fd, offset);
        if (map == MAP_FAILED)
            return fail(slot, std::string("cannot map: ") + std::strerror(errno));
        return {static_cast<Span*>(map), slot};
    }

    void release(Span* spans, int64_t slot) {
        ::munmap(spans, kBlockBytes);
        std::lock_guard lock(m_mutex);
        m_free.push_back(slot);
        --m_status.blocks;
        // Gives the slot's disk space back; it is written again before use.
        (void)::fallocate(m_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                          off_t(slot) * off_t(kBlockBytes), off_t(kBlockBytes));
    }

    void heldInMemory(int64_t change) {
        std::lock_guard lock(m_mutex);
        m_status.inMemory = uint64_t(int64_t(m_status.inMemory) + change);
    }

    SpillStatus status() {
        std::lock_guard lock(m_mutex);
        return m_status;
    }

  private:
    int64_t take() {
        std::lock_guard lock(m_mutex);
        if (m_status.blocks == 0 && spillDirectory() != m_status.path) {
            // Nothing in the file, and the folder was changed: start over there.
            if (m_fd >= 0) ::close(m_fd);
            m_fd = -1;
            m_next = 0;
            m_free.clear();
            m_status.why.clear();
        }
        if (!m_status.why.empty()) return -1;
        if (m_fd < 0 && !open()) return -1;
        ++m_status.blocks;
        if (!m_free.empty()) {
            int64_t slot = m_free.back();
            m_free.pop_back();
            return slot;
        }
        return m_next++;
    }

    std::pair<Span*, int64_t> fail(int64_t slot, std::string why) {
        std::lock_guard lock(m_mutex);
        m_free.push_back(slot);
        --m_status.blocks;
        if (m_status.why.empty()) giveUp(m_status.path + ": " + why);
        return {nullptr, -1};
    }

    // The first failure is said once; later blocks stay in memory. Under m_mutex.
    void giveUp(std::string why) {
        m_status.why = std::move(why);
        std::fprintf(stderr, "meshscope-gui: the timeline keeps its spans in memory: %s\n",
                     m_status.why.c_str());
    }

    bool open() {
        std::string dir = spillDirectory();
        m_status.path = dir;
        if (dir == "off") {
            m_status.why = "MESHSCOPE_GUI_SPILL_DIR=off";
            return false;
        }
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        // Unnamed where the file system can: nothing is left behind, even
        // when the process is killed.
        m_fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (m_fd < 0) {
            std::string name = dir + "/timeline-spill-XXXXXX";
            m_fd = ::mkostemp(name.data(), O_CLOEXEC);
            if (m_fd >= 0) ::unlink(name.c_str());
        }
        if (m_fd < 0) giveUp(dir + ": cannot create the spill file: " + std::strerror(errno));
        return m_fd >= 0;
    }

    std::mutex m_mutex;
    int m_fd = -1;
    int64_t m_next = 0;
    std::vector<int64_t> m_free;
    SpillStatus m_status;
};

}  // namespace

SpillStatus spillStatus() {
    return SpillFile::instance().status();
}

SpanColumn::SpanColumn(const SpanColumn& other) {
    for (const Span& s : other)
        push_back(s);
}

SpanColumn::SpanColumn(SpanColumn&& other) noexcept
    : m_blocks(std::move(other.m_blocks)),
      m_tail(std::move(other.m_tail)),
      m_buckets(std::move(other.m_buckets)) {
    other.m_blocks.clear();
    other.m_tail.clear();
    other.m_buckets.clear();
}

SpanColumn& SpanColumn::operator=(SpanColumn other) noexcept {
    std::swap(m_blocks, other.m_blocks);
    std::swap(m_tail, other.m_tail);
    std::swap(m_buckets, other.m_buckets);
    return *this;
}

SpanColumn::~SpanColumn() {
    release();
}

void SpanColumn::release() noexcept {
    for (Block& b : m_blocks) {
        if (b.slot >= 0) {
            SpillFile::instance().release(b.spans, b.slot);
        } else {
            delete[] b.spans;
            SpillFile::instance().heldInMemory(-1);
        }
    }
    m_blocks.clear();
}

void SpanColumn::resummarize() {
    m_buckets.clear();
    for (size_t i = 0; i < size(); ++i)
        summarize(i, (*this)[i]);
}

size_t SpanColumn::firstStartIn(size_t lo, size_t hi, int64_t t) const {
    auto it = std::lower_bound(begin() + std::ptrdiff_t(lo), begin() + std::ptrdiff_t(hi), t,
                               [](const Span& s, int64_t v) { return s.start < v; });
    return size_t(it - begin());
}

size_t SpanColumn::firstStartingAt(size_t from, int64_t t) const {
    const size_t n = size();
    if (from >= n) return n;
    // the first bucket after from's whose spans all start at or after t
    auto next =
        std::partition_point(m_buckets.begin() + int64_t(from / kSpansPerBucket) + 1,
                             m_buckets.end(), [t](const Bucket& b) { return b.minStart < t; });
    size_t hi = std::min(size_t(next - m_buckets.begin()) * kSpansPerBucket, n);
    return firstStartIn(std::max(from, hi - std::min(hi, kSpansPerBucket)), hi, t);
}

size_t SpanColumn::firstEndingAt(int64_t t) const {
    auto b = std::partition_point(m_buckets.begin(), m_buckets.end(),
                                  [t](const Bucket& k) { return k.maxEnd < t; });
    if (b == m_buckets.end()) return size();
    size_t lo = size_t(b - m_buckets.begin()) * kSpansPerBucket;
    size_t hi = std::min(lo + kSpansPerBucket, size());
    auto it = std::lower_bound(begin() + std::ptrdiff_t(lo), begin() + std::ptrdiff_t(hi), t,
                               [](const Span& s, int64_t v) { return s.end() < v; });
    return size_t(it - begin());
}

double SpanColumn::startsBefore(int64_t t) const {
    auto next = std::partition_point(m_buckets.begin(), m_buckets.end(),
                                     [t](const Bucket& b) { return b.minStart < t; });
    size_t k = size_t(next - m_buckets.begin());
    if (k == 0) return 0;
    size_t lo = (k - 1) * kSpansPerBucket, hi = std::min(lo + kSpansPerBucket, size());
    if (lo >= m_blocks.size() * kSpansPerBlock)  // in the tail: counted exactly
        return double(firstStartIn(lo, hi, t));
    const Bucket& b = m_buckets[k - 1];
    int64_t until = next != m_buckets.end() ? next->minStart : b.maxEnd;
    double part = until > b.minStart ? double(t - b.minStart) / double(until - b.minStart) : 1.0;
    return double(lo) + std::clamp(part, 0.0, 1.0) * double(hi - lo);
}

void SpanColumn::seal() {
    auto [mapped, slot] = SpillFile::instance().store(m_tail.data());
    if (!mapped) {  // the file could not take it: held in memory
        mapped = new Span[kSpansPerBlock];
        std::copy(m_tail.begin(), m_tail.end(), mapped);
        SpillFile::instance().heldInMemory(1);
    }
    m_blocks.push_back({mapped, slot});
    m_tail.clear();
    m_tail.shrink_to_fit();  // the next block grows again from a few spans
}

size_t SpanColumn::spilledBlocks() const {
    return size_t(std::count_if(m_blocks.begin(), m_blocks.end(),
                                [](const Block& b) { return b.slot >= 0; }));
}

}  // namespace meshscope::ui
