#include "core/store/records.h"

#include <array>

namespace meshscope {
namespace {

constexpr std::array kPhaseNames{"other", "forward", "backward", "optimizer", "data"};
constexpr std::array kActionNames{"observed", "replicated", "sharded_from_local", "scalarized",
                                  "strict_error"};
constexpr std::array kOutcomeNames{"raised", "reconciled", "failed"};
constexpr std::array kDropNames{"queue_full", "write_error", "forked_child", "closed",
                                "string_limit"};

template <typename Enum, size_t N>
std::optional<Enum> lookup(const std::array<const char*, N>& names, std::string_view text) {
    for (size_t i = 0; i < N; ++i)
        if (text == names[i]) return static_cast<Enum>(i);
    return std::nullopt;
}

template <size_t N>
std::string_view nameOf(const std::array<const char*, N>& names, size_t index) {
    return index < N ? names[index] : "invalid";
}

}  // namespace

std::string_view toString(Phase phase) {
    return nameOf(kPhaseNames, size_t(phase));
}
std::string_view toString(Action action) {
    return nameOf(kActionNames, size_t(action));
}
std::string_view toString(Outcome outcome) {
    return nameOf(kOutcomeNames, size_t(outcome));
}
std::string_view toString(DropReason reason) {
    return nameOf(kDropNames, size_t(reason));
}

std::optional<Phase> phaseFromString(std::string_view text) {
    return lookup<Phase>(kPhaseNames, text);
}
std::optional<Action> actionFromString(std::string_view text) {
    return lookup<Action>(kActionNames, text);
}
std::optional<Outcome> outcomeFromString(std::string_view text) {
    return lookup<Outcome>(kOutcomeNames, text);
}

}  // namespace meshscope
