#pragma once

// The writer's queue: records in fixed-size blocks, so a push never moves
// earlier records (a growing vector would copy megabytes on the producer's
// thread) and drained blocks are reused instead of reallocated. The operand
// lists of written op records are kept too, emptied, and handed back to the
// producers for their next op records: recording then allocates nothing per
// op, and memory a training thread allocated is never freed on the writer
// thread (glibc then trims and regrows the training thread's heap, and the
// tensors allocated from it page-fault again every step). Not synchronized:
// RankWriter guards it with its mutex.

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
    using OperandLists = std::vector<std::vector<OperandRecord>>;
    // Emptied operand lists kept for the producers, at most (a few times
    // the op records of one batch; beyond it they are freed).
    static constexpr size_t kMaxSpareOperandLists = size_t(1) << 14;

    size_t size() const { return m_size; }
    void push(Record&& record);
    // Moves every queued record out, in order.
    Blocks takeAll();
    // Destroys the records of drained blocks, moving the operand lists of
    // their op records, emptied, to `lists`; call outside the lock.
    static void clearBlocks(Blocks& blocks, OperandLists& lists);
    // Takes back cleared blocks and operand lists for reuse (keeps at most a
    // few spare blocks and kMaxSpareOperandLists lists; the rest stay in
    // `lists`, for the caller to free outside the lock).
    void recycle(Blocks&& blocks, OperandLists& lists);
    // Moves a spare operand list into `list` when it has no storage.
    void reuseOperandList(std::vector<OperandRecord>& list);

  private:
    Blocks m_blocks;
    Blocks m_spareList;  // an emptied list of blocks, its storage kept for m_blocks
    Blocks m_spare;
    OperandLists m_spareOperands;
    size_t m_size = 0;
};

}  // namespace meshscope
