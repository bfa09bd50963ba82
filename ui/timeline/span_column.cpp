#include "ui/timeline/span_column.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

constexpr size_t kBlockBytes = SpillStore::kBlockBytes;

// What every spill file holds, for spillStatus().
struct Totals {
    std::mutex mutex;
    uint64_t blocks = 0, inMemory = 0;
    void add(int64_t moreBlocks, int64_t moreInMemory) {
        std::lock_guard lock(mutex);
        blocks = uint64_t(int64_t(blocks) + moreBlocks);
        inMemory = uint64_t(int64_t(inMemory) + moreInMemory);
    }
};
Totals& totals() {
    static Totals* t = new Totals;  // columns may outlive static destruction
    return *t;
}

// All of `size` bytes at `offset` through io(pointer, count, offset), which
// is pread or pwrite; false at an error or the end of the file.
template <typename Byte, typename Io>
bool whole(Io io, Byte* data, size_t size, uint64_t offset) {
    for (size_t done = 0; done < size;) {
        ssize_t n = io(data + done, size - done, off_t(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += size_t(n);
    }
    return true;
}

}  // namespace

SpillStore& SpillStore::process() {
    static SpillStore* file = new SpillStore;  // columns may outlive static destruction
    return *file;
}

std::shared_ptr<SpillStore> SpillStore::create(const std::filesystem::path& path,
                                               std::string& why) {
    std::shared_ptr<SpillStore> s(new SpillStore);
    s->m_named = true;
    s->m_path = path;
    s->m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (s->m_fd < 0) {
        why = path.string() + ": " + std::strerror(errno);
        return nullptr;
    }
    return s;
}

std::shared_ptr<SpillStore> SpillStore::open(const std::filesystem::path& path, std::string& why) {
    std::shared_ptr<SpillStore> s(new SpillStore);
    s->m_named = true;
    s->m_path = path;
    s->m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (s->m_fd < 0) {
        why = path.string() + ": " + std::strerror(errno);
        return nullptr;
    }
    s->m_readOnly = true;
    s->m_next = int64_t(s->bytes() / kBlockBytes);
    return s;
}

SpillStore::~SpillStore() {
    if (m_fd >= 0) ::close(m_fd);
}

std::pair<Span*, int64_t> SpillStore::store(const Span* spans) {
    int64_t slot = take();
    if (slot < 0) return {nullptr, -1};
    off_t offset = off_t(slot) * off_t(kBlockBytes);
    if (!writeAt(spans, kBlockBytes, uint64_t(offset)))
        return fail(slot, std::string("cannot write: ") + std::strerror(errno));
    void* map = ::mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE, MAP_SHARED, m_fd, offset);
    if (map == MAP_FAILED) return fail(slot, std::string("cannot map: ") + std::strerror(errno));
    return {static_cast<Span*>(map), slot};
}

Span* SpillStore::map(int64_t slot) {
    if (slot < 0 || slot >= slotCount()) return nullptr;
    // Private: sorting a lane in place (never one of a finished rank) would
    // not change the file.
    void* map = ::mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, m_fd,
                       off_t(slot) * off_t(kBlockBytes));
    if (map == MAP_FAILED) return nullptr;
    std::lock_guard lock(m_mutex);
    ++m_blocks;
    totals().add(1, 0);
    return static_cast<Span*>(map);
}

void SpillStore::release(Span* spans, int64_t slot) {
    ::munmap(spans, kBlockBytes);
    std::lock_guard lock(m_mutex);
    --m_blocks;
    totals().add(-1, 0);
    if (m_named) return;  // a cache keeps its blocks
    m_free.push_back(slot);
    // Gives the slot's disk space back; it is written again before use.
    (void)::fallocate(m_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      off_t(slot) * off_t(kBlockBytes), off_t(kBlockBytes));
}

uint64_t SpillStore::bytes() const {
    struct stat st {};
    return ::fstat(m_fd, &st) == 0 ? uint64_t(st.st_size) : 0;
}

bool SpillStore::writeAt(const void* data, size_t size, uint64_t offset) {
    auto io = [fd = m_fd](const char* p, size_t n, off_t at) { return ::pwrite(fd, p, n, at); };
    return whole(io, static_cast<const char*>(data), size, offset);
}

bool SpillStore::readAt(void* data, size_t size, uint64_t offset) const {
    auto io = [fd = m_fd](char* p, size_t n, off_t at) { return ::pread(fd, p, n, at); };
    return whole(io, static_cast<char*>(data), size, offset);
}

void SpillStore::heldInMemory(int64_t change) {
    totals().add(0, change);
}

int64_t SpillStore::slotCount() const {
    std::lock_guard lock(m_mutex);
    return m_next;
}

std::string SpillStore::failure() const {
    std::lock_guard lock(m_mutex);
    return m_why;
}

int64_t SpillStore::take() {
    std::lock_guard lock(m_mutex);
    if (!m_named && m_blocks == 0 && spillDirectory() != m_folder) {
        // Nothing in the file, and the folder was changed: start over there.
        if (m_fd >= 0) ::close(m_fd);
        m_fd = -1;
        m_next = 0;
        m_free.clear();
        m_why.clear();
    }
    if (!m_why.empty() || m_readOnly) return -1;
    if (m_fd < 0 && (m_named || !openProcessFile())) return -1;
    ++m_blocks;
    totals().add(1, 0);
    if (!m_free.empty()) {
        int64_t slot = m_free.back();
        m_free.pop_back();
        return slot;
    }
    return m_next++;
}

std::pair<Span*, int64_t> SpillStore::fail(int64_t slot, std::string why) {
    std::lock_guard lock(m_mutex);
    if (m_named) {
        if (slot == m_next - 1) --m_next;  // a cache's slots stay contiguous
    } else {
        m_free.push_back(slot);
    }
    --m_blocks;
    totals().add(-1, 0);
    if (m_why.empty()) giveUp((m_named ? m_path.string() : m_folder) + ": " + why);
    return {nullptr, -1};
}

// The first failure is said once; later blocks stay in memory. Under m_mutex.
void SpillStore::giveUp(std::string why) {
    m_why = std::move(why);
    if (!m_named)  // a cache's failure is its rank's (span_cache.h)
        std::fprintf(stderr, "meshscope-gui: the timeline keeps its spans in memory: %s\n",
                     m_why.c_str());
}

bool SpillStore::openProcessFile() {
    std::string dir = spillDirectory();
    m_folder = dir;
    if (dir == "off") {
        m_why = "MESHSCOPE_GUI_SPILL_DIR=off";
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

SpillStatus spillStatus() {
    SpillStatus status;
    {
        SpillStore& process = SpillStore::process();
        std::lock_guard lock(process.m_mutex);
        status.path = process.m_folder;
        status.why = process.m_why;
    }
    std::lock_guard lock(totals().mutex);
    status.blocks = totals().blocks;
    status.inMemory = totals().inMemory;
    return status;
}

SpanColumn::SpanColumn(const SpanColumn& other) {
    for (const Span& s : other)
        push_back(s);
}

SpanColumn::SpanColumn(SpanColumn&& other) noexcept
    : m_store(std::move(other.m_store)),
      m_blocks(std::move(other.m_blocks)),
      m_tail(std::move(other.m_tail)),
      m_buckets(std::move(other.m_buckets)) {
    other.m_blocks.clear();
    other.m_tail.clear();
    other.m_buckets.clear();
}

SpanColumn& SpanColumn::operator=(SpanColumn other) noexcept {
    std::swap(m_store, other.m_store);
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
            store().release(b.spans, b.slot);
        } else {
            delete[] b.spans;
            store().heldInMemory(-1);
        }
    }
    m_blocks.clear();
}

bool SpanColumn::adopt(std::shared_ptr<SpillStore> from, const std::vector<int64_t>& at,
                       std::vector<Span> tail, std::vector<Bucket> buckets) {
    size_t spans = at.size() * kSpansPerBlock + tail.size();
    if (!empty() || !from || tail.size() >= kSpansPerBlock ||
        buckets.size() != (spans + kSpansPerBucket - 1) / kSpansPerBucket)
        return false;
    m_store = std::move(from);
    for (int64_t slot : at) {
        Span* mapped = m_store->map(slot);
        if (!mapped) {
            release();
            return false;
        }
        m_blocks.push_back({mapped, slot});
    }
    m_tail = std::move(tail);
    m_buckets = std::move(buckets);
    return true;
}

std::vector<int64_t> SpanColumn::blockSlots() const {
    std::vector<int64_t> out;
    for (const Block& b : m_blocks)
        out.push_back(b.slot);
    return out;
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
    auto [mapped, slot] = store().store(m_tail.data());
    if (!mapped) {  // the file could not take it: held in memory
        mapped = new Span[kSpansPerBlock];
        std::copy(m_tail.begin(), m_tail.end(), mapped);
        store().heldInMemory(1);
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
