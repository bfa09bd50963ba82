#pragma once

// The writer's queue: records in fixed-size blocks, so a push never moves
// earlier records (a growing vector would copy megabytes on the producer's
// thread) and drained blocks are reused instead of reallocated. Not
// synchronized: RankWriter guards it with its mutex.

#include <cstddef>
#include <memory>
#include <vector>

#include "core/store/records.h"

namespace meshscope {

class RecordQueue {
  public:
    static constexpr size_t kBlockSize = 1024;
    using Block = std::vector<Record>;
    using Blocks = std::vector<std::unique_ptr<Block>>;

    size_t size() const { return m_size; }
    void push(Record&& record);
    // Moves every queued record out, in order.
    Blocks takeAll();
    // Destroys the records of drained blocks; call outside the lock.
    static void clearBlocks(Blocks& blocks);
    // Returns cleared blocks for reuse (keeps at most a few spare).
    void recycle(Blocks&& blocks);

  private:
    Blocks m_blocks;
    Blocks m_spare;
    size_t m_size = 0;
};

}  // namespace meshscope
