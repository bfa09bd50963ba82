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

const FindingKindInfo& findingKindInfo(FindingKind kind) {
    size_t index = size_t(kind);
    return index < kFindingKinds.size() ? kFindingKinds[index] : kFindingKinds.front();
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
