#pragma once

// Producer-side interning of strings and stacks for one rank file. Ids are
// handed out at once so records can reference them; the text reaches the file
// with the writer's next batch. Interned rows are never dropped: a batch that
// fails to commit keeps them pending for the next one.

#include <atomic>
#include <cstddef>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/store/records.h"

namespace meshscope {

class StringInterner {
  public:
    struct PendingString {
        StringId id;
        std::string text;
    };
    struct PendingStack {
        StackId id;
        std::vector<Frame> frames;
    };
    struct Pending {
        std::vector<PendingString> strings;
        std::vector<PendingStack> stacks;
        bool empty() const { return strings.empty() && stacks.empty(); }
    };

    // maxBytes bounds the memory of interned text; past it intern() returns
    // the id of a fixed marker string and counts a StringLimit drop.
    explicit StringInterner(size_t maxBytes = size_t(256) << 20);

    StringId intern(std::string_view text);
    StackId internStack(std::span<const Frame> frames);

    // Moves out what has not been written yet.
    Pending takePending();
    // Puts back rows whose batch failed, ahead of newer ones.
    void restorePending(Pending&& pending);

    uint64_t limitDrops() const { return m_limitDrops.load(std::memory_order_relaxed); }

  private:
    struct TextHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept {
            return std::hash<std::string_view>{}(s);
        }
    };
    struct StackHash {
        size_t operator()(const std::vector<Frame>& frames) const noexcept;
    };

    std::mutex m_mutex;
    std::unordered_map<std::string, StringId, TextHash, std::equal_to<>> m_strings;
    std::unordered_map<std::vector<Frame>, StackId, StackHash> m_stacks;
    Pending m_pending;
    size_t m_bytes = 0;
    size_t m_maxBytes;
    StringId m_limitMarker;
    std::atomic<uint64_t> m_limitDrops{0};
};

}  // namespace meshscope
