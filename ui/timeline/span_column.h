#pragma once

// A lane's op spans, in 20 bytes each (Span), held the way a long run can
// afford: spans are appended to an in-memory tail; each full block of
// kSpansPerBlock spans is written to a spill file and mapped from there:
// the process's (an unnamed file in the user's cache folder, gone when the
// process ends), or the file a finished rank's spans are cached in
// (span_cache.h), which a later session maps again instead of reading the
// ops. What the view reads is paged in by the kernel and can be dropped by
// it again, so the GUI's own memory follows what it shows, not the run's
// length. Where no spill file can be made or written (no cache folder, a
// full disk), blocks stay in memory as before: nothing is lost. Qt-free.

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/store/records.h"

namespace meshscope::ui {

// An op on the timeline, in 20 bytes: what a run of millions of ops holds
// per op. The duration is exact to 2^30 ns (1.07 s); longer ones are kept
// in microseconds, milliseconds or seconds, rounded up so a parent still
// covers its children. The op's seq (36 bits: 68 billion ops a rank), its
// name as an index into the rank's strings (24 bits; past that, names show
// as none), its phase and whether it reconciled an incident share 8 bytes;
// out-of-range values of a damaged file are clamped, never wrapped.
#pragma pack(push, 4)
class Span {
  public:
    static constexpr uint32_t kMaxName = (1u << 24) - 1;
    static constexpr int64_t kMaxSeq = (int64_t(1) << 36) - 1;

    Span() = default;
    Span(int64_t start, int64_t end, int64_t seq, uint32_t name, Phase phase, bool reconciles)
        : start(start),
          m_packed(uint64_t(std::clamp<int64_t>(seq, 0, kMaxSeq)) << 28 |
                   uint64_t(uint8_t(phase) < 8 ? uint8_t(phase) : 0) << 25 |
                   uint64_t(reconciles) << 24 | (name <= kMaxName ? name : 0)),
          m_duration(encodeDuration(end > start ? uint64_t(end) - uint64_t(start) : 0)) {}

    int64_t start = 0;  // rank-local monotonic ns

    int64_t seq() const { return int64_t(m_packed >> 28); }  // OpSeq value
    int64_t duration() const { return decodeDuration(m_duration); }
    int64_t end() const {  // saturated: a hostile file's times near the limit
        int64_t e;
        return __builtin_add_overflow(start, duration(), &e) ? INT64_MAX : e;
    }
    uint32_t name() const { return uint32_t(m_packed) & kMaxName; }  // into RankTimeline::strings
    Phase phase() const { return Phase((m_packed >> 25) & 7); }
    bool reconciles() const { return (m_packed >> 24) & 1; }  // the promoted op that reconciled

    // Top two bits: the unit (ns, us, ms, s); the rest: the count.
    static uint32_t encodeDuration(uint64_t ns);
    static int64_t decodeDuration(uint32_t code);

  private:
    uint64_t m_packed = 0;  // seq << 28 | phase << 25 | reconciles << 24 | name
    uint32_t m_duration = 0;
};
#pragma pack(pop)
static_assert(sizeof(Span) == 20);

struct SpillStatus;

// A file of equal slots, each holding one full block of spans, mapped by
// the columns that spilled there. The process's spill file reuses the slots
// columns give back and returns their space; a named file (a rank's cache)
// only grows, and stays when its columns are gone.
class SpillStore {
  public:
    // The process's unnamed spill file, in spillDirectory().
    static SpillStore& process();
    // A new named file at `path` (replaced if there), or null with `why`.
    static std::shared_ptr<SpillStore> create(const std::filesystem::path& path, std::string& why);
    // An existing named file, to map its slots (map()), or null with `why`.
    static std::shared_ptr<SpillStore> open(const std::filesystem::path& path, std::string& why);
    ~SpillStore();
    SpillStore(const SpillStore&) = delete;
    SpillStore& operator=(const SpillStore&) = delete;

    static constexpr size_t kBlockBytes = (size_t(1) << 16) * sizeof(Span);  // a full block
    // A mapping of a slot now holding `spans` (a full block), or {nullptr,
    // -1} when the file cannot take it: the caller keeps the block.
    std::pair<Span*, int64_t> store(const Span* spans);
    // A mapping of a slot written before (a named file), or null.
    Span* map(int64_t slot);
    void release(Span* spans, int64_t slot);
    // Full blocks a column holds in memory because the file failed.
    void heldInMemory(int64_t change);
    // Slots written so far (a named file: where the next one goes), and
    // why blocks are no longer written ("" while they are).
    int64_t slotCount() const;
    std::string failure() const;
    // Whole reads and writes at `offset` of the file (a cache's index), and
    // its size.
    bool writeAt(const void* data, size_t size, uint64_t offset);
    bool readAt(void* data, size_t size, uint64_t offset) const;
    uint64_t bytes() const;
    // A named file's path; empty for the process's.
    const std::filesystem::path& path() const { return m_path; }

  private:
    SpillStore() = default;
    int64_t take();
    std::pair<Span*, int64_t> fail(int64_t slot, std::string why);
    void giveUp(std::string why);  // under m_mutex
    bool openProcessFile();        // under m_mutex

    friend SpillStatus spillStatus();
    mutable std::mutex m_mutex;
    bool m_named = false;
    bool m_readOnly = false;  // opened to map its slots: takes no new blocks
    int64_t m_blocks = 0;     // mapped now
    int m_fd = -1;
    int64_t m_next = 0;
    std::vector<int64_t> m_free;
    std::string m_folder;          // the process file's folder
    std::filesystem::path m_path;  // a named file's
    std::string m_why;
};

class SpanColumn {
  public:
    // 64Ki spans (1.25 MiB, a whole number of pages): about 30 blocks for a
    // rank of 2M ops; lanes shorter than a block never touch the file.
    static constexpr size_t kSpansPerBlock = size_t(1) << 16;

    SpanColumn() = default;
    SpanColumn(const SpanColumn& other);
    SpanColumn(SpanColumn&& other) noexcept;
    SpanColumn& operator=(SpanColumn other) noexcept;
    ~SpanColumn();

    template <bool Const>
    class Iterator;
    using iterator = Iterator<false>;
    using const_iterator = Iterator<true>;

    size_t size() const { return m_blocks.size() * kSpansPerBlock + m_tail.size(); }
    bool empty() const { return m_blocks.empty() && m_tail.empty(); }
    Span& operator[](size_t i) {
        size_t b = i / kSpansPerBlock;
        return b < m_blocks.size() ? m_blocks[b].spans[i % kSpansPerBlock]
                                   : m_tail[i % kSpansPerBlock];
    }
    const Span& operator[](size_t i) const { return const_cast<SpanColumn&>(*this)[i]; }
    const Span& front() const { return (*this)[0]; }
    const Span& back() const { return (*this)[size() - 1]; }
    void push_back(const Span& s) {
        if (m_tail.size() == kSpansPerBlock) seal();
        summarize(size(), s);
        m_tail.push_back(s);
    }

    iterator begin();
    iterator end();
    const_iterator begin() const;
    const_iterator end() const;

    // Blocks of this column in the spill file (the rest are in memory).
    size_t spilledBlocks() const;
    // Where the full blocks of this column go from now on: `store` (a
    // rank's cache file), not the process's spill file. Before the first.
    void spillTo(std::shared_ptr<SpillStore> store) { m_store = std::move(store); }
    // The level of detail the view reads when zoomed out: every
    // kSpansPerBucket consecutive spans summed up by their earliest start
    // and latest end, held in memory (16 bytes per 512 spans).
    static constexpr size_t kSpansPerBucket = 512;
    struct Bucket {
        int64_t minStart = 0, maxEnd = 0;
    };
    size_t buckets() const { return m_buckets.size(); }
    const Bucket& bucket(size_t b) const { return m_buckets[b]; }
    // Takes a column cached before: its full blocks at slots `at` of `store`
    // (mapped, not read), its tail and its summaries. False (the column
    // stays empty) when a slot cannot be mapped or the parts do not fit.
    bool adopt(std::shared_ptr<SpillStore> store, const std::vector<int64_t>& at,
               std::vector<Span> tail, std::vector<Bucket> buckets);
    // What a cache of this column keeps: the slots of its full blocks in its
    // store (-1 for a block held in memory), its tail, its summaries.
    std::vector<int64_t> blockSlots() const;
    const std::vector<Span>& tail() const { return m_tail; }
    const std::vector<Bucket>& bucketList() const { return m_buckets; }
    // After spans were changed in place (the feeder's sort of a lane that
    // got one out of order).
    void resummarize();

    // Searches that read one bucket of spans, found by the summaries:
    // the first index at or after `from` that starts at or after t (spans
    // sorted by start), and the first index that ends at or after t (ends
    // sorted too). size() when none.
    size_t firstStartingAt(size_t from, int64_t t) const;
    size_t firstEndingAt(int64_t t) const;
    // How many spans start before t (sorted by start): exact in the tail,
    // else estimated within its bucket from the bucket's time extent, so a
    // minimap reads no span of a full block (the same whether it is spilled
    // or held).
    double startsBefore(int64_t t) const;

  private:
    struct Block {
        Span* spans = nullptr;
        int64_t slot = -1;  // in the spill file; -1: held in memory (new[])
    };
    void seal();
    void release() noexcept;
    // Adds span `i` (the next one) to its bucket's summary.
    void summarize(size_t i, const Span& s) {
        if (i % kSpansPerBucket == 0) {
            m_buckets.push_back({s.start, s.end()});
            return;
        }
        Bucket& b = m_buckets.back();
        b.minStart = std::min(b.minStart, s.start);
        b.maxEnd = std::max(b.maxEnd, s.end());
    }
    // The first index in [lo, hi) that starts at or after t, else hi.
    size_t firstStartIn(size_t lo, size_t hi, int64_t t) const;

    SpillStore& store() const { return m_store ? *m_store : SpillStore::process(); }

    std::shared_ptr<SpillStore> m_store;  // null: the process's spill file
    std::vector<Block> m_blocks;          // full blocks, in order
    std::vector<Span> m_tail;             // the spans after them (< kSpansPerBlock)
    std::vector<Bucket> m_buckets;        // one per kSpansPerBucket spans, the last maybe partial
};

template <bool Const>
class SpanColumn::Iterator {
  public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = Span;
    using difference_type = std::ptrdiff_t;
    using pointer = std::conditional_t<Const, const Span*, Span*>;
    using reference = std::conditional_t<Const, const Span&, Span&>;
    using Column = std::conditional_t<Const, const SpanColumn, SpanColumn>;

    Iterator() = default;
    Iterator(Column* column, difference_type i) : m_column(column), m_i(i) {}
    operator Iterator<true>() const { return {m_column, m_i}; }

    reference operator*() const { return (*m_column)[size_t(m_i)]; }
    pointer operator->() const { return &**this; }
    reference operator[](difference_type n) const { return (*m_column)[size_t(m_i + n)]; }
    Iterator& operator++() { return ++m_i, *this; }
    Iterator operator++(int) { return {m_column, m_i++}; }
    Iterator& operator--() { return --m_i, *this; }
    Iterator operator--(int) { return {m_column, m_i--}; }
    Iterator& operator+=(difference_type n) { return m_i += n, *this; }
    Iterator& operator-=(difference_type n) { return m_i -= n, *this; }
    friend Iterator operator+(Iterator it, difference_type n) { return it += n; }
    friend Iterator operator+(difference_type n, Iterator it) { return it += n; }
    friend Iterator operator-(Iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const Iterator& a, const Iterator& b) { return a.m_i - b.m_i; }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.m_i == b.m_i; }
    friend auto operator<=>(const Iterator& a, const Iterator& b) { return a.m_i <=> b.m_i; }

  private:
    Column* m_column = nullptr;
    difference_type m_i = 0;
};

inline SpanColumn::iterator SpanColumn::begin() {
    return {this, 0};
}
inline SpanColumn::iterator SpanColumn::end() {
    return {this, std::ptrdiff_t(size())};
}
inline SpanColumn::const_iterator SpanColumn::begin() const {
    return {this, 0};
}
inline SpanColumn::const_iterator SpanColumn::end() const {
    return {this, std::ptrdiff_t(size())};
}

static_assert(SpillStore::kBlockBytes == SpanColumn::kSpansPerBlock * sizeof(Span));

// The spill files, for what the GUI says of them: the process's folder and
// trouble, and the blocks of every file (cache files included).
struct SpillStatus {
    std::string path;       // the folder it is in; "" before the first block
    std::string why;        // why blocks stay in memory; "" when they do not
    uint64_t blocks = 0;    // blocks in the file now
    uint64_t inMemory = 0;  // full blocks held in memory because the file failed
};
SpillStatus spillStatus();

// Where the spill file goes: $MESHSCOPE_GUI_SPILL_DIR, else
// $XDG_CACHE_HOME/meshscope, else ~/.cache/meshscope, else the temp folder.
// "off" keeps every block in memory.
std::string spillDirectory();

}  // namespace meshscope::ui
