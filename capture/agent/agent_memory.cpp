#include "capture/agent/agent_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>

namespace meshscope::capture {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

size_t roundUp(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

// Whole 2 MiB-aligned regions from mmap, advised as huge pages.
class HugeRegions final : public std::pmr::memory_resource {
    void* do_allocate(size_t bytes, size_t) override {
        size_t size = roundUp(bytes, kHugePage);
        void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) throw std::bad_alloc();
        auto start = reinterpret_cast<uintptr_t>(raw);
        uintptr_t aligned = roundUp(start, kHugePage);
        if (aligned > start) munmap(raw, aligned - start);  // the unaligned head
        uintptr_t end = start + size + kHugePage;
        if (end > aligned + size)
            munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
        madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // refused: small pages
        return reinterpret_cast<void*>(aligned);
    }
    void do_deallocate(void* p, size_t bytes, size_t) override {
        munmap(p, roundUp(bytes, kHugePage));
    }
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
        return this == &other;
    }
};

// Pools of the sizes the caches ask for, carved from the regions and
// reused, behind one lock (allocations are a cache's new entries, not
// every op's).
class LockedPools final : public std::pmr::memory_resource {
  public:
    explicit LockedPools(std::pmr::memory_resource* regions)
        : m_regions(regions),
          m_buffer(kHugePage, regions),
          m_pools(std::pmr::pool_options{0, kLargestPooled}, &m_buffer) {}

  private:
    void* do_allocate(size_t bytes, size_t align) override {
        if (bytes > kLargestPooled) return m_regions->allocate(bytes, align);
        std::lock_guard lock(m_mutex);
        return m_pools.allocate(bytes, align);
    }
    void do_deallocate(void* p, size_t bytes, size_t align) override {
        if (bytes > kLargestPooled) return m_regions->deallocate(p, bytes, align);
        std::lock_guard lock(m_mutex);
        m_pools.deallocate(p, bytes, align);
    }
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
        return this == &other;
    }
    // Larger blocks (a big cache's bucket array, a pool's largest chunks)
    // are regions of their own, returned when freed: the buffer never frees.
    static constexpr size_t kLargestPooled = size_t(256) << 10;
    std::pmr::memory_resource* m_regions;
    std::mutex m_mutex;
    std::pmr::monotonic_buffer_resource m_buffer;  // never frees: the pools reuse
    std::pmr::unsynchronized_pool_resource m_pools;
};

}  // namespace

std::pmr::memory_resource* agentMemory() {
    // Never destroyed: an Agent or a cache may be freed during exit.
    static auto* pools = new LockedPools(new HugeRegions);
    return pools;
}

}  // namespace meshscope::capture
