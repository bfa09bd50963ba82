#include "core/store/run_directory.h"

#include <cstdio>
#include <string>

#include "core/store/schema.h"

namespace meshscope {

std::filesystem::path rankFilePath(const std::filesystem::path& runDir, int rank) {
    char name[32];
    std::snprintf(name, sizeof name, "%05d", rank);
    return runDir /
           (std::string(schema::kRankFilePrefix) + name + std::string(schema::kRankFileSuffix));
}

std::optional<int> rankFromFileName(const std::filesystem::path& file) {
    std::string name = file.filename().string();
    auto prefix = schema::kRankFilePrefix, suffix = schema::kRankFileSuffix;
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(suffix))
        return std::nullopt;
    std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    return std::stoi(digits);
}

std::unique_ptr<RankWriter> createRankWriter(const std::filesystem::path& runDir,
                                             const Manifest& initial, int rank,
                                             WriterOptions options) {
    Manifest m = registerRank(runDir, initial, rank);
    RankIdentity identity{rank, m.worldSize, m.runId};
    return RankWriter::create(rankFilePath(runDir, rank), identity, std::move(options));
}

}  // namespace meshscope
