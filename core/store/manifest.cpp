#include "core/store/manifest.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/store/regular_file.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"

namespace meshscope {
namespace {

constexpr const char* kFormat = "meshscope-run";
// A manifest lists its ranks; even a million of them fit in a few MiB.
constexpr size_t kMaxManifestBytes = size_t(64) << 20;

// Holds an exclusive flock on a lock file for its lifetime.
class DirLock {
  public:
    explicit DirLock(const std::filesystem::path& file) {
        m_fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (m_fd < 0) throw StoreError(file.string(), "cannot create lock file");
        while (::flock(m_fd, LOCK_EX) != 0 && errno == EINTR) {
        }
    }
    ~DirLock() { ::close(m_fd); }
    DirLock(const DirLock&) = delete;
    DirLock& operator=(const DirLock&) = delete;

  private:
    int m_fd = -1;
};

template <typename T>
T require(const nlohmann::json& j, const char* key, const std::filesystem::path& file) {
    if (!j.contains(key))
        throw StoreError(file.string(), std::string("missing field '") + key + "'");
    try {
        return j.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
        throw StoreError(file.string(), std::string("field '") + key + "' has the wrong type");
    }
}

// A JSON integer in [lo, hi]: a float (1e30), a value beyond int (2**32+2)
// or one out of range is refused by name, never wrapped or truncated.
int64_t integerIn(const nlohmann::json& v, const char* key, int64_t lo, int64_t hi,
                  const std::filesystem::path& file) {
    std::string range = std::to_string(lo) + ".." + std::to_string(hi);
    std::string shown =
        v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 40);
    if (!v.is_number_integer())
        throw StoreError(file.string(), std::string("field '") + key + "' is " + shown +
                                            ", not an integer in " + range);
    // Parsed non-negative integers are unsigned, up to 2^64-1.
    bool inRange = v.is_number_unsigned()
                       ? v.get<uint64_t>() <= uint64_t(hi) && int64_t(v.get<uint64_t>()) >= lo
                       : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    if (!inRange)
        throw StoreError(file.string(), std::string("field '") + key + "' is " + shown +
                                            ", out of range " + range);
    return v.get<int64_t>();
}

int64_t requireInteger(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                       const std::filesystem::path& file) {
    if (!j.contains(key))
        throw StoreError(file.string(), std::string("missing field '") + key + "'");
    return integerIn(j.at(key), key, lo, hi, file);
}

}  // namespace

Manifest Manifest::read(const std::filesystem::path& file) {
    std::string text = readRegularFile(file, kMaxManifestBytes);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw StoreError(file.string(), std::string("not valid JSON (") + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
        throw StoreError(file.string(),
                         "not a meshscope run manifest (no \"format\": \"meshscope-run\")");
    Manifest m;
    m.runId = require<std::string>(j, "run_id", file);
    m.created = require<std::string>(j, "created", file);
    m.worldSize = int(requireInteger(j, "world_size", 1, kMaxWorldSize, file));
    if (!j.contains("ranks") || !j["ranks"].is_array())
        throw StoreError(file.string(), j.contains("ranks")
                                            ? "field 'ranks' has the wrong type (not a list)"
                                            : "missing field 'ranks'");
    for (const nlohmann::json& rank : j["ranks"])
        m.ranks.push_back(int(integerIn(rank, "ranks", 0, m.worldSize - 1, file)));
    if (m.ranks.size() > size_t(m.worldSize))
        throw StoreError(file.string(), "field 'ranks' lists " + std::to_string(m.ranks.size()) +
                                            " ranks, more than world size " +
                                            std::to_string(m.worldSize));
    m.schemaVersion = int(requireInteger(j, "schema_version", 0, INT32_MAX, file));
    try {
        m.command = j.value("command", std::vector<std::string>{});
        m.torchVersion = j.value("torch_version", "");
        m.job = j.value("job", "");
    } catch (const nlohmann::json::exception&) {
        throw StoreError(file.string(), "field 'command' or 'torch_version' has the wrong type");
    }
    return m;
}

void Manifest::write(const std::filesystem::path& file) const {
    nlohmann::json j = {
        {"format", kFormat},  {"run_id", runId},
        {"created", created}, {"world_size", worldSize},
        {"ranks", ranks},     {"schema_version", schemaVersion},
        {"command", command}, {"torch_version", torchVersion},
    };
    if (!job.empty()) j["job"] = job;
    writeFileAtomically(file,
                        j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

Manifest registerRank(const std::filesystem::path& runDir, const Manifest& initial, int rank) {
    createRunDirectories(runDir);
    DirLock lock(runDir / ".manifest.lock");
    std::string holder;
    if (!initial.job.empty() && !claimRunDirectory(runDir, initial.job, &holder))
        throw RunTaken(runDir.string(), "is the run folder of another job (" + holder +
                                            "); this job is " + initial.job);
    auto file = runDir / schema::kManifestName;
    Manifest m = std::filesystem::exists(file) ? Manifest::read(file) : initial;
    if (m.schemaVersion == 0) m.schemaVersion = schema::kSchemaVersion;
    if (m.created.empty()) m.created = isoTimestampUtc();
    if (m.runId.empty()) m.runId = newRunId();
    if (std::find(m.ranks.begin(), m.ranks.end(), rank) == m.ranks.end()) {
        m.ranks.push_back(rank);
        std::sort(m.ranks.begin(), m.ranks.end());
    }
    m.worldSize = std::max({m.worldSize, initial.worldSize, rank + 1});
    m.write(file);
    return m;
}

bool claimRunDirectory(const std::filesystem::path& runDir, const std::string& job,
                       std::string* holder) {
    auto claim = runDir / kJobClaimName;
    // Written whole beside it, then linked to its name: link() fails when
    // the name exists, and another job never reads half a claim.
    std::filesystem::path tmp = claim;
    tmp += ".tmp" + std::to_string(::getpid());
    try {
        writeFileAtomically(tmp, job + "\n");
    } catch (const StoreError&) {
        return true;  // nothing can be written here: the rank file's creation says why
    }
    int linked = ::link(tmp.c_str(), claim.c_str());
    int error = errno;
    ::unlink(tmp.c_str());
    if (linked == 0) return true;
    if (error != EEXIST) return true;
    std::string text = readRegularFile(claim, 4096);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
        text.pop_back();
    if (text == job) return true;
    if (holder) *holder = text;
    return false;
}

void createRunDirectories(const std::filesystem::path& dir) {
    std::error_code ec;
    if (dir.empty() || std::filesystem::is_directory(dir, ec)) return;
    std::filesystem::path parent = dir.parent_path();
    if (!parent.empty() && parent != dir && !std::filesystem::exists(parent, ec))
        createRunDirectories(parent);
    if (::mkdir(dir.c_str(), modeWithUmask(0750)) != 0 && errno != EEXIST)
        throw StoreError(dir.string(),
                         std::string("cannot create run directory: ") + std::strerror(errno));
}

std::string newRunId() {
    std::random_device rd;
    std::ostringstream out;
    out << std::hex << std::chrono::system_clock::now().time_since_epoch().count() << "-" << rd();
    return out.str();
}

std::string isoTimestampUtc() {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buffer;
}

}  // namespace meshscope
