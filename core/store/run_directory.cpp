#include "core/store/run_directory.h"

#include <cstdio>
#include <ctime>
#include <stdexcept>
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

std::string defaultRunName(std::time_t when, std::string_view prefix,
                           std::optional<std::string_view> job) {
    std::tm local{};
    if (!localtime_r(&when, &local)) throw std::runtime_error("cannot convert the time to a date");
    char stamp[32];
    std::strftime(stamp, sizeof stamp, job ? "%Y%m%d" : "%Y%m%d-%H%M%S", &local);
    std::string name = prefix.empty() ? std::string() : std::string(prefix) + "-";
    name += stamp;
    if (job) name += "-" + std::string(*job);
    return name;
}

std::filesystem::path defaultRunDirectory(const std::filesystem::path& workingDir,
                                          std::string_view name) {
    return workingDir / kRunsFolder / name;
}

std::string defaultRunJob(std::optional<std::string_view> elasticRunId,
                          std::optional<std::string_view> masterPort) {
    if (elasticRunId && *elasticRunId != "none") return std::string(*elasticRunId);
    return "port" + std::string(masterPort.value_or("0"));
}

}  // namespace meshscope
