#pragma once

// The writer's queue: records in fixed-size blocks, so a push never moves
// earlier records (a growing vector would copy megabytes on the producer's
// thread) and drained blocks are reused instead of reallocated.
//
// An op record's operands are copied into its block's own operand array and
// its list goes straight back to the producer, emptied, for the next op.
// Recording then allocates nothing per op, and no list a training thread
// allocated waits in the queue: thousands of small lists held for a commit
// interval (200 ms) and handed back in bulk kept the training thread's heap
// fragmented, and glibc trimmed and regrew it every step (200-400 page
// faults a step on the tensors allocated from it). Not synchronized:
// RankWriter guards it with its mutex.

#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "core/store/records.h"

namespace meshscope {

class RecordQueue {
  public:
    static constexpr size_t kBlockSize = 1024;

    class Block {
      public:
        size_t size() const { return m_records.size(); }
        const Record& operator[](size_t i) const { return m_records[i]; }
        // The operands of record i when it is an op record (its own list is
        // empty in the queue).
        std::span<const OperandRecord> operandsOf(size_t i) const;

      private:
        friend class RecordQueue;
        void clear();
        std::vector<Record> m_records;
        std::vector<OperandRecord> m_operands;
        std::vector<uint32_t> m_operandEnd;  // per record: its operands end there
    };
    using Blocks = std::vector<std::unique_ptr<Block>>;

    size_t size() const { return m_size; }
    // Queues `record`. An op record's operand list comes back in `list`,
    // emptied, its storage kept (any list `list` held is freed); without
    // `list` it is freed here.
    void push(Record&& record, std::vector<OperandRecord>* list = nullptr);
    // The same for an op record, built in its block in place.
    void push(OpRecord&& record, std::vector<OperandRecord>* list);
    // Moves every queued record out, in order.
    Blocks takeAll();
    // Where the next op record and its operands will be copied to: hints,
    // read by any thread without the lock (a stale one fetches a line for
    // nothing); null when not known (the next push takes a new block).
    struct NextOp {
        const char* record;
        const char* operands;
    };
    NextOp nextOp() const {
        return {m_nextRecord.load(std::memory_order_relaxed),
                m_nextOperands.load(std::memory_order_relaxed)};
    }
    // Asks the core to fetch that memory for writing.
    void prefetchNextOp() const;
    // Empties drained blocks, keeping their storage; call outside the lock.
    static void clearBlocks(Blocks& blocks);
    // Takes back cleared blocks for reuse (a few spare blocks at most; the
    // rest are freed).
    void recycle(Blocks&& blocks);

  private:
    Block& blockWithRoom();
    void updateHints(const Block& block);

    Blocks m_blocks;
    Blocks m_spareList;  // an emptied list of blocks, its storage kept for m_blocks
    Blocks m_spare;
    size_t m_size = 0;
    // Where the next op record and its operands go (prefetchNextOp()).
    std::atomic<const char*> m_nextRecord{nullptr}, m_nextOperands{nullptr};
};

}  // namespace meshscope
