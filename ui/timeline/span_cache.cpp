#include "ui/timeline/span_cache.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "core/store/rank_reader.h"
#include "core/util/content_hash.h"

namespace meshscope::ui {

namespace fs = std::filesystem;

namespace {

// The file: the lanes' full blocks in slots of SpillStore::kBlockBytes, as
// the lanes spilled them while the rank was read; then the index (format,
// the rank file's identity, the op part of the rank's timeline, each lane's
// slots, tail and summaries); then a trailer that says where the index is
// and its digest. Host byte order: a cache never leaves the machine that
// wrote it.
constexpr char kMagic[8] = {'M', 'S', 'S', 'P', 'I', 'D', 'X', '1'};
constexpr char kEnd[8] = {'M', 'S', 'S', 'P', 'E', 'N', 'D', '1'};
constexpr uint32_t kByteOrder = 0x01020304;
constexpr uint32_t kFormat = 1;
constexpr uint64_t kDefaultMaxMb = 2048;
// Bounds a damaged file's sizes before anything is sized by them.
constexpr uint64_t kMaxIndexBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxCount = uint64_t(1) << 26;

struct Trailer {
    uint64_t indexOffset = 0, indexBytes = 0, digest = 0;
    char end[8] = {};
};

// What identifies the rank file's content: it changed if any of these did.
// A finished rank's writer is gone, so nothing is left in its WAL; its size
// is part of the key all the same.
struct FileKey {
    uint64_t size = 0, mtimeNs = 0, inode = 0, device = 0, walSize = 0;
    bool operator==(const FileKey&) const = default;
};

bool keyOf(const fs::path& file, FileKey& key, std::string& why) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
        why = file.string() + ": " + std::strerror(errno);
        return false;
    }
    key.size = uint64_t(st.st_size);
    key.mtimeNs = uint64_t(st.st_mtim.tv_sec) * 1000000000ull + uint64_t(st.st_mtim.tv_nsec);
    key.inode = uint64_t(st.st_ino);
    key.device = uint64_t(st.st_dev);
    struct stat wal {};
    key.walSize = ::stat((file.string() + "-wal").c_str(), &wal) == 0 ? uint64_t(wal.st_size) : 0;
    return true;
}

std::string canonicalText(const fs::path& file) {
    std::error_code ec;
    fs::path absolute = fs::absolute(file, ec);
    fs::path canonical = fs::weakly_canonical(absolute, ec);
    return (ec ? absolute : canonical).string();
}

std::string envText(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
}

// Unique to this process and this begin(): a run opened again before its
// first load ended (cancelled) caches into a file of its own.
fs::path tempFileOf(const fs::path& file) {
    static std::atomic<uint64_t> next{0};
    fs::path temp = file;
    temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++next);
    return temp;
}

// The index, built in memory and written at once.
class Out {
  public:
    void bytes(const void* data, size_t n) {
        const char* b = static_cast<const char*>(data);
        m_buf.insert(m_buf.end(), b, b + n);
    }
    template <typename T>
    void value(const T& v) {
        bytes(&v, sizeof v);
    }
    template <typename T>
    void array(const std::vector<T>& v) {
        value(uint64_t(v.size()));
        bytes(v.data(), v.size() * sizeof(T));
    }
    void text(const std::string& s) {
        value(uint64_t(s.size()));
        bytes(s.data(), s.size());
    }
    const std::vector<char>& buffer() const { return m_buf; }

  private:
    std::vector<char> m_buf;
};

// Reads the index back; every read is bounded by what is left of it.
class In {
  public:
    explicit In(const std::vector<char>& buf) : m_buf(buf) {}
    bool bytes(void* data, size_t n) {
        if (n > m_buf.size() - m_at) return false;
        std::memcpy(data, m_buf.data() + m_at, n);
        m_at += n;
        return true;
    }
    template <typename T>
    bool value(T& v) {
        return bytes(&v, sizeof v);
    }
    bool count(uint64_t& n, size_t elementBytes) {
        return value(n) && n <= kMaxCount && n * elementBytes <= m_buf.size() - m_at;
    }
    template <typename T>
    bool array(std::vector<T>& v) {
        uint64_t n = 0;
        if (!count(n, sizeof(T))) return false;
        v.resize(size_t(n));
        return bytes(v.data(), v.size() * sizeof(T));
    }
    bool text(std::string& s) {
        uint64_t n = 0;
        if (!count(n, 1) || n > RankReader::kMaxStringBytes + 64) return false;
        s.resize(size_t(n));
        return bytes(s.data(), s.size());
    }
    bool done() const { return m_at == m_buf.size(); }

  private:
    const std::vector<char>& m_buf;
    size_t m_at = 0;
};

struct LaneHeader {
    uint32_t thread = 0;
    uint32_t depth = 0;
    int64_t maxDuration = 0;
    uint64_t endsSorted = 0;
};

// The op part of a rank's timeline read from an index, in its own objects:
// `track` changes only once all of it was read and checked.
struct Loaded {
    std::vector<Lane> lanes;
    std::vector<std::string> strings;
    std::unordered_map<int64_t, uint32_t> stringIndex;
    std::map<int64_t, int64_t> stepStarts;
    int64_t firstNs = 0, lastNs = 0, opCount = 0, lastOpSeq = 0;
};

bool readIndex(const std::vector<char>& index, const std::string& rankPath, const FileKey& key,
               int64_t blockSlots, const std::shared_ptr<SpillStore>& store, Loaded& out,
               std::string& why) {
    In in(index);
    char magic[8];
    uint32_t format = 0, order = 0, spanBytes = 0, perBucket = 0;
    uint64_t blockBytes = 0;
    if (!in.bytes(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0 ||
        !in.value(format) || !in.value(order) || !in.value(spanBytes) || !in.value(perBucket) ||
        !in.value(blockBytes)) {
        why = "damaged (header)";
        return false;
    }
    if (format != kFormat || order != kByteOrder || spanBytes != sizeof(Span) ||
        perBucket != SpanColumn::kSpansPerBucket || blockBytes != SpillStore::kBlockBytes) {
        why = "written by another version";
        return false;
    }
    FileKey stored;
    std::string path;
    if (!in.value(stored) || !in.text(path)) {
        why = "damaged (header)";
        return false;
    }
    if (path != rankPath || !(stored == key)) {
        why = "the rank file changed since";
        return false;
    }
    uint64_t strings = 0;
    if (!in.value(out.firstNs) || !in.value(out.lastNs) || !in.value(out.opCount) ||
        !in.value(out.lastOpSeq) || !in.count(strings, sizeof(uint64_t))) {
        why = "damaged (header)";
        return false;
    }
    out.strings.resize(size_t(strings));
    for (std::string& s : out.strings)
        if (!in.text(s)) {
            why = "damaged (strings)";
            return false;
        }
    std::vector<std::pair<int64_t, int64_t>> pairs;
    if (!in.array(pairs)) {
        why = "damaged (string index)";
        return false;
    }
    for (auto [id, at] : pairs) {
        if (at < 0 || uint64_t(at) >= strings) {
            why = "damaged (string index)";
            return false;
        }
        out.stringIndex.emplace(id, uint32_t(at));
    }
    if (!in.array(pairs)) {
        why = "damaged (steps)";
        return false;
    }
    out.stepStarts.insert(pairs.begin(), pairs.end());
    uint64_t lanes = 0;
    if (!in.count(lanes, sizeof(LaneHeader))) {
        why = "damaged (lanes)";
        return false;
    }
    std::vector<bool> used(size_t(blockSlots), false);
    int64_t spans = 0;
    out.lanes.resize(size_t(lanes));
    for (Lane& lane : out.lanes) {
        LaneHeader h;
        std::vector<int64_t> slots;
        std::vector<Span> tail;
        std::vector<SpanColumn::Bucket> buckets;
        if (!in.value(h) || h.depth > std::numeric_limits<uint16_t>::max() || !in.array(slots) ||
            !in.array(tail) || !in.array(buckets)) {
            why = "damaged (lanes)";
            return false;
        }
        for (int64_t slot : slots) {  // each block of the file belongs to one lane
            if (slot < 0 || slot >= blockSlots || used[size_t(slot)]) {
                why = "damaged (block slots)";
                return false;
            }
            used[size_t(slot)] = true;
        }
        lane.thread = h.thread;
        lane.depth = uint16_t(h.depth);
        lane.maxDuration = h.maxDuration;
        lane.endsSorted = h.endsSorted != 0;
        if (!lane.spans.adopt(store, slots, std::move(tail), std::move(buckets))) {
            why = "damaged (lane layout)";
            return false;
        }
        spans += int64_t(lane.spans.size());
    }
    if (!in.done() || spans != out.opCount) {
        why = "damaged (op count)";
        return false;
    }
    return true;
}

}  // namespace

uint64_t spanCacheMaxBytes() {
    std::string text = envText("MESHSCOPE_GUI_CACHE_MB");
    uint64_t mb = kDefaultMaxMb;
    if (text.empty()) return mb << 20;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mb);
    if (ec != std::errc() || end != text.data() + text.size() || mb > (uint64_t(1) << 40)) {
        static std::once_flag said;
        std::call_once(said, [&] {
            std::fprintf(stderr,
                         "meshscope-gui: MESHSCOPE_GUI_CACHE_MB=%s is not a number of "
                         "megabytes; using %llu\n",
                         text.c_str(), static_cast<unsigned long long>(kDefaultMaxMb));
        });
        mb = kDefaultMaxMb;
    }
    return mb << 20;
}

fs::path spanCacheDirectory() {
    std::string dir = envText("MESHSCOPE_GUI_CACHE_DIR");
    if (dir.empty()) {
        std::string spill = spillDirectory();
        if (spill == "off") return {};
        dir = (fs::path(spill) / "timelines").string();
    }
    return dir == "off" ? fs::path() : fs::path(dir);
}

fs::path spanCacheFile(const fs::path& dir, const fs::path& rankFile) {
    ContentHash h;
    h.update(canonicalText(rankFile));
    char name[40];
    std::snprintf(name, sizeof name, "%016llx.spans", static_cast<unsigned long long>(h.digest()));
    return dir / name;
}

bool loadSpanCache(const fs::path& rankFile, RankTimeline& track, std::string& why) {
    fs::path dir = spanCacheDirectory();
    if (dir.empty()) {
        why = "the cache is off";
        return false;
    }
    FileKey key;
    if (!keyOf(rankFile, key, why)) return false;
    fs::path file = spanCacheFile(dir, rankFile);
    if (!fs::exists(file)) {
        why = "no cache yet";
        return false;
    }
    std::shared_ptr<SpillStore> store = SpillStore::open(file, why);
    if (!store) return false;
    Loaded loaded;
    bool ok = [&] {
        uint64_t size = store->bytes();
        Trailer t;
        if (size < sizeof t || !store->readAt(&t, sizeof t, size - sizeof t) ||
            std::memcmp(t.end, kEnd, sizeof kEnd) != 0 || t.indexBytes > kMaxIndexBytes ||
            t.indexOffset % SpillStore::kBlockBytes != 0 ||
            t.indexOffset + t.indexBytes + sizeof t != size) {
            why = "not a finished timeline cache";
            return false;
        }
        std::vector<char> index(size_t(t.indexBytes));
        ContentHash digest;
        if (!store->readAt(index.data(), index.size(), t.indexOffset) ||
            (digest.update(index.data(), index.size()), digest.digest()) != t.digest) {
            why = "damaged (index digest)";
            return false;
        }
        return readIndex(index, canonicalText(rankFile), key,
                         int64_t(t.indexOffset / SpillStore::kBlockBytes), store, loaded, why);
    }();
    if (!ok) {
        why = file.string() + ": " + why;
        loaded.lanes.clear();  // their blocks unmapped before the file goes
        std::error_code ec;
        fs::remove(file, ec);  // written again once the rank is read from its file
        return false;
    }
    std::error_code ec;
    fs::last_write_time(file, fs::file_time_type::clock::now(), ec);  // recently used
    track.lanes = std::move(loaded.lanes);
    track.strings = std::move(loaded.strings);
    track.stringIndex = std::move(loaded.stringIndex);
    track.stepStarts = std::move(loaded.stepStarts);
    track.firstNs = std::min(track.firstNs, loaded.firstNs);
    track.lastNs = std::max(track.lastNs, loaded.lastNs);
    track.opCount = loaded.opCount;
    track.lastOpSeq = loaded.lastOpSeq;
    return true;
}

bool beginSpanCache(const fs::path& rankFile, RankTimeline& track, std::string& why) {
    fs::path dir = spanCacheDirectory();
    if (dir.empty()) {
        why = "the cache is off";
        return false;
    }
    if (!track.lanes.empty() || track.opCount != 0) {
        why = "the rank was read before";
        return false;
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::shared_ptr<SpillStore> store =
        SpillStore::create(tempFileOf(spanCacheFile(dir, rankFile)), why);
    if (!store) return false;
    track.spill = std::move(store);
    return true;
}

bool finishSpanCache(const fs::path& rankFile, RankTimeline& track, std::string& why) {
    fs::path dir = spanCacheDirectory();
    if (!track.spill || dir.empty()) {
        why = "no cache was begun";
        return false;
    }
    fs::path file = spanCacheFile(dir, rankFile), temp = track.spill->path();
    std::shared_ptr<SpillStore> store = track.spill;
    auto fail = [&](std::string reason) {
        why = temp.string() + ": " + reason;
        abandonSpanCache(track);
        return false;
    };
    if (std::string failure = store->failure(); !failure.empty()) return fail(failure);
    FileKey key;
    if (!keyOf(rankFile, key, why)) return fail(why);
    Out out;
    out.bytes(kMagic, sizeof kMagic);
    out.value(kFormat);
    out.value(kByteOrder);
    out.value(uint32_t(sizeof(Span)));
    out.value(uint32_t(SpanColumn::kSpansPerBucket));
    out.value(uint64_t(SpillStore::kBlockBytes));
    out.value(key);
    out.text(canonicalText(rankFile));
    out.value(track.firstNs);
    out.value(track.lastNs);
    out.value(track.opCount);
    out.value(track.lastOpSeq);
    out.value(uint64_t(track.strings.size()));
    for (const std::string& s : track.strings)
        out.text(s);
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (const auto& [id, at] : track.stringIndex)
        pairs.emplace_back(id, int64_t(at));
    out.array(pairs);
    pairs.assign(track.stepStarts.begin(), track.stepStarts.end());
    out.array(pairs);
    out.value(uint64_t(track.lanes.size()));
    for (const Lane& lane : track.lanes) {
        std::vector<int64_t> slots = lane.spans.blockSlots();
        if (std::any_of(slots.begin(), slots.end(), [](int64_t s) { return s < 0; }))
            return fail("a block is held in memory");
        out.value(LaneHeader{lane.thread, lane.depth, lane.maxDuration, lane.endsSorted});
        out.array(slots);
        out.array(lane.spans.tail());
        out.array(lane.spans.bucketList());
    }
    ContentHash digest;
    digest.update(out.buffer().data(), out.buffer().size());
    Trailer t{uint64_t(store->slotCount()) * SpillStore::kBlockBytes,
              out.buffer().size(),
              digest.digest(),
              {}};
    std::memcpy(t.end, kEnd, sizeof kEnd);
    if (!store->writeAt(out.buffer().data(), out.buffer().size(), t.indexOffset) ||
        !store->writeAt(&t, sizeof t, t.indexOffset + t.indexBytes))
        return fail(std::strerror(errno));
    std::error_code ec;
    fs::rename(temp, file, ec);
    if (ec) return fail(ec.message());
    track.spill.reset();  // lanes created from now on spill as any
    return true;
}

void abandonSpanCache(RankTimeline& track) {
    if (!track.spill) return;
    std::error_code ec;  // the lanes keep their mappings of it until they go
    fs::remove(track.spill->path(), ec);
    track.spill.reset();
}

void trimSpanCache(const fs::path& dir, uint64_t maxBytes) {
    struct Entry {
        fs::path path;
        fs::file_time_type used;
        uint64_t bytes;
    };
    std::vector<Entry> entries;
    uint64_t total = 0;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (size_t tmp = name.find(".spans.tmp."); tmp != std::string::npos) {
            // an unfinished cache of a process that is gone (killed while reading)
            long pid = std::strtol(name.c_str() + tmp + 11, nullptr, 10);
            std::error_code removed;
            if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
                fs::remove(it->path(), removed);
            continue;
        }
        if (it->path().extension() != ".spans") continue;
        std::error_code e;
        Entry entry{it->path(), it->last_write_time(e), 0};
        if (!e) entry.bytes = uint64_t(it->file_size(e));
        if (e) continue;
        total += entry.bytes;
        entries.push_back(std::move(entry));
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.used < b.used; });
    for (const Entry& e : entries) {
        if (total <= maxBytes) break;
        std::error_code removed;
        if (fs::remove(e.path, removed)) total -= e.bytes;
    }
}

}  // namespace meshscope::ui
