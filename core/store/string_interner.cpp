#include "core/store/string_interner.h"

#include <utility>
#include "core/util/hot_path.h"

namespace meshscope {

StringInterner::StringInterner(size_t maxBytes) : m_maxBytes(maxBytes) {
    m_limitMarker = intern("<meshscope: string table full>");
}

StringId StringInterner::intern(std::string_view text) {
    std::lock_guard lock(m_mutex);
    if (auto it = m_strings.find(text); it != m_strings.end()) return it->second;
    if (m_limitMarker.valid() && m_bytes + text.size() > m_maxBytes) {
        m_limitDrops.fetch_add(1, std::memory_order_relaxed);
        return m_limitMarker;
    }
    StringId id{int64_t(m_strings.size()) + 1};
    m_strings.emplace(std::string(text), id);
    m_pending.strings.push_back({id, std::string(text)});
    m_bytes += text.size() + sizeof(PendingString);
    return id;
}

size_t StringInterner::StackHash::operator()(const std::vector<Frame>& frames) const noexcept {
    size_t h = frames.size();
    for (const Frame& f : frames) {
        h = h * 1000003u ^ size_t(f.file.value());
        h = h * 1000003u ^ size_t(f.line);
        h = h * 1000003u ^ size_t(f.function.value());
    }
    return h;
}

MESHSCOPE_HOT StackId StringInterner::internStack(std::span<const Frame> frames) {
    if (frames.empty()) return StackId{};
    std::vector<Frame> key(frames.begin(), frames.end());
    std::lock_guard lock(m_mutex);
    if (auto it = m_stacks.find(key); it != m_stacks.end()) return it->second;
    StackId id{int64_t(m_stacks.size()) + 1};
    m_pending.stacks.push_back({id, key});
    m_stacks.emplace(std::move(key), id);
    m_bytes += frames.size() * sizeof(Frame) * 2;
    return id;
}

StringInterner::Pending StringInterner::takePending() {
    std::lock_guard lock(m_mutex);
    return std::exchange(m_pending, Pending{});
}

void StringInterner::restorePending(Pending&& pending) {
    std::lock_guard lock(m_mutex);
    auto prepend = [](auto& older, auto& newer) {
        older.insert(older.end(), std::make_move_iterator(newer.begin()),
                     std::make_move_iterator(newer.end()));
        newer = std::move(older);
    };
    prepend(pending.strings, m_pending.strings);
    prepend(pending.stacks, m_pending.stacks);
}

}  // namespace meshscope
