#include "core/store/records.h"

#include <array>

namespace meshscope {
namespace {

template <typename Enum, size_t N>
std::string_view nameOf(const std::array<StoreName<Enum>, N>& names, size_t index) {
    return index < N ? names[index].key : "invalid";
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
    return nameOf(kDropReasonNames, size_t(reason));
}

}  // namespace meshscope
