#include "core/store/record_queue.h"

#include <utility>
#include "core/util/hot_path.h"

namespace meshscope {

std::span<const OperandRecord> RecordQueue::Block::operandsOf(size_t i) const {
    uint32_t begin = i == 0 ? 0 : m_operandEnd[i - 1];
    return std::span<const OperandRecord>(m_operands).subspan(begin, m_operandEnd[i] - begin);
}

void RecordQueue::Block::clear() {
    m_records.clear();
    m_operands.clear();
    m_operandEnd.clear();
}

MESHSCOPE_HOT RecordQueue::Block& RecordQueue::blockWithRoom() {
    if (m_blocks.empty() || m_blocks.back()->size() == kBlockSize) {
        if (!m_spare.empty()) {
            m_blocks.push_back(std::move(m_spare.back()));
            m_spare.pop_back();
        } else {
            auto block = std::make_unique<Block>();
            block->m_records.reserve(kBlockSize);
            block->m_operandEnd.reserve(kBlockSize);
            block->m_operands.reserve(kBlockSize * 4);
            m_blocks.push_back(std::move(block));
        }
    }
    return *m_blocks.back();
}

void RecordQueue::push(Record&& record, std::vector<OperandRecord>* list) {
    if (auto* op = std::get_if<OpRecord>(&record)) return push(std::move(*op), list);
    Block& block = blockWithRoom();
    block.m_records.push_back(std::move(record));
    block.m_operandEnd.push_back(uint32_t(block.m_operands.size()));
    ++m_size;
    updateHints(block);
}

MESHSCOPE_HOT void RecordQueue::push(OpRecord&& op, std::vector<OperandRecord>* list) {
    Block& block = blockWithRoom();
    // The list never enters the queue: back to the caller, or freed here
    // (on the thread that allocated it).
    std::vector<OperandRecord> operands = std::exchange(op.operands, {});
    block.m_operands.insert(block.m_operands.end(), operands.begin(), operands.end());
    operands.clear();
    if (list) *list = std::move(operands);
    block.m_records.emplace_back(std::in_place_type<OpRecord>, std::move(op));
    block.m_operandEnd.push_back(uint32_t(block.m_operands.size()));
    ++m_size;
    updateHints(block);
}

MESHSCOPE_HOT void RecordQueue::updateHints(const Block& block) {
    const Block* next = &block;
    if (block.size() == kBlockSize) next = m_spare.empty() ? nullptr : m_spare.back().get();
    if (!next) {
        m_nextRecord.store(nullptr, std::memory_order_relaxed);
        return;
    }
    m_nextRecord.store(reinterpret_cast<const char*>(next->m_records.data() + next->size()),
                       std::memory_order_relaxed);
    m_nextOperands.store(
        reinterpret_cast<const char*>(next->m_operands.data() + next->m_operands.size()),
        std::memory_order_relaxed);
}

// The lines the next op record spans (a record of its size at any offset
// within a line) and those of four operands, the common count.
MESHSCOPE_HOT MESHSCOPE_PREFETCHES void RecordQueue::prefetchNextOp() const {
    auto [record, operands] = nextOp();
    if (!record) return;
    for (size_t offset = 0; offset < sizeof(Record) + 64; offset += 64)
        __builtin_prefetch(record + offset, 1, 3);
    for (size_t offset = 0; offset < 4 * sizeof(OperandRecord) + 64; offset += 64)
        __builtin_prefetch(operands + offset, 1, 3);
}

RecordQueue::Blocks RecordQueue::takeAll() {
    m_size = 0;
    m_nextRecord.store(nullptr, std::memory_order_relaxed);  // those blocks are the writer's now
    return std::exchange(m_blocks, std::move(m_spareList));
}

void RecordQueue::clearBlocks(Blocks& blocks) {
    for (auto& block : blocks)
        block->clear();
}

void RecordQueue::recycle(Blocks&& blocks) {
    constexpr size_t kMaxSpare = 64;
    for (auto& block : blocks) {
        if (m_spare.size() >= kMaxSpare) break;
        m_spare.push_back(std::move(block));
    }
    blocks.clear();
    if (blocks.capacity() > m_spareList.capacity()) m_spareList = std::move(blocks);
    if (m_blocks.empty() && !m_spare.empty()) updateHints(*m_spare.back());
}

}  // namespace meshscope
