// The agent's own memory (agent_memory.h): huge-page regions apart from the
// heap, reused when handed back, so an agent attached and detached again and
// again does not grow the process.

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "capture/agent/agent_memory.h"

namespace {

using meshscope::capture::agentMemory;

constexpr uintptr_t kHugePage = uintptr_t(2) << 20;

// The "THPeligible" line of the mapping that holds `p` in /proc/self/smaps:
// 1 when the kernel may back it with huge pages (advised, or always on).
int thpEligible(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    auto at = reinterpret_cast<uintptr_t>(p);
    while (std::getline(smaps, line)) {
        uintptr_t from = 0, to = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> from >> dash >> to && dash == '-') {
            inside = from <= at && at < to;
            continue;
        }
        if (inside && line.starts_with("THPeligible:")) return std::stoi(line.substr(12));
    }
    return -1;
}

TEST(AgentMemory, LargeBlocksAreWholeHugePageRegions) {
    std::pmr::memory_resource* memory = agentMemory();
    void* big = memory->allocate(size_t(1) << 20, 64);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % kHugePage, 0u);
    // "always" or "madvise" makes an advised region eligible; "never" none
    std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes((std::istreambuf_iterator<char>(enabled)), {});
    if (!modes.empty() && modes.find("[never]") == std::string::npos) {
        EXPECT_EQ(thpEligible(big), 1) << modes;
    }
    memory->deallocate(big, size_t(1) << 20, 64);
}

TEST(AgentMemory, BlocksHandedBackAreReused) {
    std::pmr::memory_resource* memory = agentMemory();
    // the sizes of cache nodes and bucket arrays, over and over: what an
    // agent attached again and again asks for
    std::set<void*> seen;
    for (int round = 0; round < 50; ++round) {
        std::vector<std::pair<void*, size_t>> blocks;
        for (size_t size : {48, 64, 96, 200, 1024, 8192, 65536, 200000})
            for (int i = 0; i < 20; ++i)
                blocks.emplace_back(memory->allocate(size, 16), size);
        for (auto [p, size] : blocks) {
            seen.insert(p);
            memory->deallocate(p, size, 16);
        }
    }
    // 160 blocks a round: the same addresses every round, not 50 times as many
    EXPECT_LE(seen.size(), 2u * 160u);
}

}  // namespace
