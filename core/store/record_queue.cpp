#include "core/store/record_queue.h"

#include <utility>

namespace meshscope {

void RecordQueue::push(Record&& record) {
    if (m_blocks.empty() || m_blocks.back()->size() == kBlockSize) {
        if (!m_spare.empty()) {
            m_blocks.push_back(std::move(m_spare.back()));
            m_spare.pop_back();
        } else {
            m_blocks.push_back(std::make_unique<Block>());
            m_blocks.back()->reserve(kBlockSize);
        }
    }
    m_blocks.back()->push_back(std::move(record));
    ++m_size;
}

RecordQueue::Blocks RecordQueue::takeAll() {
    m_size = 0;
    return std::exchange(m_blocks, std::move(m_spareList));
}

void RecordQueue::clearBlocks(Blocks& blocks, OperandLists& lists) {
    for (auto& block : blocks) {
        for (Record& record : *block) {
            auto* op = std::get_if<OpRecord>(&record);
            if (!op || op->operands.capacity() == 0) continue;
            op->operands.clear();
            lists.push_back(std::move(op->operands));
        }
        block->clear();
    }
}

void RecordQueue::recycle(Blocks&& blocks, OperandLists& lists) {
    constexpr size_t kMaxSpare = 64;
    for (auto& block : blocks) {
        if (m_spare.size() >= kMaxSpare) break;
        m_spare.push_back(std::move(block));
    }
    blocks.clear();
    if (blocks.capacity() > m_spareList.capacity()) m_spareList = std::move(blocks);
    while (!lists.empty() && m_spareOperands.size() < kMaxSpareOperandLists) {
        m_spareOperands.push_back(std::move(lists.back()));
        lists.pop_back();
    }
}

void RecordQueue::reuseOperandList(std::vector<OperandRecord>& list) {
    if (list.capacity() == 0 && !m_spareOperands.empty()) {
        list = std::move(m_spareOperands.back());
        m_spareOperands.pop_back();
    }
}

}  // namespace meshscope
