#include "core/model/vocabulary.h"

namespace meshscope {

const OriginInfo& originInfo(OriginClass origin) {
    size_t index = size_t(char(origin) - 'A');
    return kOrigins[index < kOrigins.size() ? index : size_t(char(OriginClass::Unknown) - 'A')];
}

std::optional<OriginClass> originFromChar(char c) {
    if (c >= 'A' && c < char(OriginClass::End)) return static_cast<OriginClass>(c);
    return std::nullopt;
}

std::string originLetterRange() {
    return std::string(1, char(kOrigins.front().origin)) + "-" +
           std::string(1, char(kOrigins.back().origin));
}

const IncidentKindInfo& incidentKindInfo(IncidentKind kind) {
    size_t index = size_t(kind);
    return index < kIncidentKinds.size() ? kIncidentKinds[index] : kIncidentKinds.front();
}

std::optional<IncidentKind> incidentKindFromString(std::string_view key) {
    for (const IncidentKindInfo& k : kIncidentKinds)
        if (k.key == key) return k.kind;
    return std::nullopt;
}

std::optional<IncidentKind> incidentKindFromIndex(int64_t value) {
    if (value < 0 || value >= int64_t(IncidentKind::End)) return std::nullopt;
    return IncidentKind(value);
}

const FindingKindInfo& findingKindInfo(FindingKind kind) {
    size_t index = size_t(kind);
    return index < kFindingKinds.size() ? kFindingKinds[index] : kFindingKinds.front();
}

FindingKind findingKindOf(IncidentKind kind) {
    switch (kind) {
        case IncidentKind::NoShardingStrategy:
            return FindingKind::NoStrategy;
        case IncidentKind::DTensorError:
            return FindingKind::DTensorError;
        case IncidentKind::CollectiveError:
            return FindingKind::CollectiveError;
        case IncidentKind::CollectiveHang:
            return FindingKind::Hang;
        case IncidentKind::PartialRead:
            return FindingKind::PartialRead;
        case IncidentKind::MixedTensor:
        case IncidentKind::End:
            break;
    }
    return FindingKind::Unreconciled;
}

std::string_view toString(FindingKind kind) {
    return size_t(kind) < kFindingKinds.size() ? kFindingKinds[size_t(kind)].name : "?";
}

std::optional<FindingKind> findingKindFromString(std::string_view text) {
    for (const FindingKindInfo& k : kFindingKinds)
        if (k.name == text) return k.kind;
    return std::nullopt;
}

}  // namespace meshscope
