#include "app/cli/record/launcher.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/analysis/replica_drift.h"
#include "core/model/settings.h"
#include "core/policy/policy.h"
#include "core/store/manifest.h"
#include "core/store/regular_file.h"
#include "core/store/run_directory.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"

extern char** environ;

namespace meshscope::cli {
namespace {

std::atomic<pid_t> g_children[256];
std::atomic<int> g_childCount{0};
std::atomic<int> g_stopSignal{0};  // the SIGINT/SIGTERM that asked the job to stop

// A signal sent to this launcher goes on to every rank. One from the
// terminal (Ctrl-C: the kernel sends it to the whole foreground group, the
// ranks included) is not sent again, so each rank gets it once; the ranks
// stay in the terminal's group, so a breakpoint() in a rank still reads it.
// A second signal kills them at once.
void forwardSignal(int sig, siginfo_t* info, void*) {
    bool again = g_stopSignal.exchange(sig) != 0;
    if (!again && info && info->si_code == SI_KERNEL) return;  // the ranks got it too
    int send = again ? SIGKILL : sig;
    for (int i = 0; i < g_childCount.load(); ++i)
        if (pid_t pid = g_children[i].load(); pid > 0) kill(pid, send);
}

const char* signalName(int sig) {
    switch (sig) {
        case SIGINT:
            return "SIGINT";
        case SIGTERM:
            return "SIGTERM";
        case SIGKILL:
            return "SIGKILL";
        case SIGSEGV:
            return "SIGSEGV";
        case SIGABRT:
            return "SIGABRT";
        case SIGBUS:
            return "SIGBUS";
        default:
            return nullptr;
    }
}

// Binds a socket to `port` on the loopback (0: one the kernel picks) and
// closes it: the port it got, or 0 when the port is taken.
int bindLoopback(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(uint16_t(port));
    socklen_t len = sizeof addr;
    int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0
                    ? ntohs(addr.sin_port)
                    : 0;
    close(fd);
    return bound;
}

// The lowest port the kernel hands out for bind(0) and connect()
// (net.ipv4.ip_local_port_range), 32768 where it cannot be read.
int ephemeralLow() {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0, high = 0;
    return range >> low >> high && low > 1024 ? low : 32768;
}

// The rendezvous port of rank 0's store: a free one below the kernel's
// ephemeral range. Rank 0 listens on it a second or more after this check;
// a port the kernel hands out could be taken meanwhile by any process's
// connection or listener (gloo's pairs, another job's), one below the range
// only by another launcher's random pick. Falls back to the kernel's choice.
int freePort() {
    int low = std::min(ephemeralLow(), 65536);
    int first = std::max(1025, low - 12000);
    std::mt19937 pick(std::random_device{}());
    std::uniform_int_distribution<int> port(first, low - 1);
    for (int attempt = 0; low - 1 > first && attempt < 64; ++attempt)
        if (int p = bindLoopback(port(pick))) return p;
    int chosen = bindLoopback(0);
    return chosen ? chosen : 29500;
}

using Env = std::map<std::string, std::string>;

Env currentEnvironment() {
    Env env;
    for (char** e = environ; *e; ++e) {
        std::string entry = *e;
        auto eq = entry.find('=');
        if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    return env;
}

// `text` with each byte that is not part of valid UTF-8 written \\xNN, as the
// agent writes such bytes of file names and arguments.
std::string shownText(const std::string& text) {
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
        auto byte = static_cast<unsigned char>(text[i]);
        size_t length = byte < 0x80           ? 1
                        : (byte >> 5) == 0x6  ? 2
                        : (byte >> 4) == 0xE  ? 3
                        : (byte >> 3) == 0x1E ? 4
                                              : 0;
        bool valid = length > 0 && i + length <= text.size() && (length == 1 || byte >= 0xC2);
        for (size_t k = 1; valid && k < length; ++k)
            valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
        if (valid) {
            out.append(text, i, length);
            i += length;
        } else {
            out += fmt::format("\\x{:02x}", byte);
            ++i;
        }
    }
    return out;
}

// The file posix_spawnp would run for `name` (PATH searched when it has no
// '/'); empty when there is none.
std::string findExecutable(const std::string& name) {
    if (name.empty()) return {};
    if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
    const char* path = std::getenv("PATH");
    std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t begin = 0;
    while (begin <= dirs.size()) {
        size_t end = dirs.find(':', begin);
        if (end == std::string::npos) end = dirs.size();
        std::string dir = dirs.substr(begin, end - begin);
        std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
        std::error_code ec;
        if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0)
            return candidate.string();
        begin = end + 1;
    }
    return {};
}

int countRankFiles(const std::filesystem::path& dir) {
    int n = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
        if (entry.path().extension() == ".msdb") ++n;
    return n;
}

// A run directory that holds a run already is never recorded into: its
// ranks would refuse their files and the job would run unrecorded.
void refuseExistingRun(const std::filesystem::path& dir) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) return;
    if (!std::filesystem::is_directory(dir, ec))
        throw std::runtime_error(
            fmt::format("run directory {} exists and is not a directory", dir.string()));
    int ranks = countRankFiles(dir);
    bool manifest = std::filesystem::exists(dir / schema::kManifestName, ec);
    if (ranks == 0 && !manifest) return;
    std::string holds = manifest ? std::string(schema::kManifestName) : "";
    if (ranks) holds += fmt::format("{}{} rank file(s)", manifest ? ", " : "", ranks);
    throw std::runtime_error(fmt::format(
        "{} already holds a run ({}); record into a new directory (-o) or remove that one",
        dir.string(), holds));
}

pid_t spawn(const std::vector<std::string>& command, const Env& env) {
    std::vector<char*> argv, envp;
    for (const auto& a : command)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> entries;
    for (const auto& [k, v] : env)
        entries.push_back(k + "=" + v);
    for (auto& e : entries)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0)
        throw std::runtime_error(fmt::format("cannot start '{}': {}", command[0], strerror(rc)));
    return pid;
}

int exitCodeOf(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// Why a rank ended: "exited with 0", "killed by SIGKILL from meshscope
// after the 10 s grace", ...
std::string endOf(int status, bool killedByUs, int graceSeconds) {
    if (WIFEXITED(status)) return fmt::format("exited with {}", WEXITSTATUS(status));
    if (!WIFSIGNALED(status)) return "ended";
    int sig = WTERMSIG(status);
    const char* name = signalName(sig);
    std::string text =
        name ? fmt::format("killed by {}", name) : fmt::format("killed by signal {}", sig);
    if (killedByUs) text += fmt::format(" from meshscope after the {} s grace", graceSeconds);
    return text;
}

// Waits for every child. After the first failure, or a SIGINT/SIGTERM to
// this launcher (forwarded once by forwardSignal), the ranks still running
// get SIGTERM, then SIGKILL after the grace period: a rank blocked in a
// collective (inside C++, where Python cannot act on a signal) would
// otherwise wait forever for one that is gone.
int waitAll(std::vector<pid_t> pids, int graceSeconds, std::ostream& log,
            std::vector<std::string>& ends, const std::function<void()>& tick) {
    constexpr auto kTickEvery = std::chrono::seconds(5);
    auto nextTick = std::chrono::steady_clock::now() + kTickEvery;
    int firstFailure = 0;
    auto killAt = std::chrono::steady_clock::time_point::max();
    bool termSent = false, stopNoted = false, killed = false;
    size_t alive = pids.size();
    ends.assign(pids.size(), "");
    while (alive > 0) {
        int status = 0;
        pid_t done = waitpid(-1, &status, WNOHANG);
        if (done > 0) {
            for (size_t i = 0; i < pids.size(); ++i) {
                if (pids[i] != done) continue;
                pids[i] = -1;
                g_children[i].store(-1);
                --alive;
                ends[i] =
                    endOf(status, killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                          graceSeconds);
                int code = exitCodeOf(status);
                if (code != 0 && firstFailure == 0 && !g_stopSignal.load()) {
                    firstFailure = code;
                    if (pids.size() > 1)
                        log << fmt::format("meshscope: rank {} {}; stopping the others\n", i,
                                           ends[i]);
                }
            }
            continue;
        }
        if (int sig = g_stopSignal.load(); sig && !stopNoted) {
            stopNoted = termSent = true;  // forwardSignal sent it
            if (firstFailure == 0) firstFailure = 128 + sig;
            log << fmt::format("meshscope: got {}; stopping the ranks (SIGKILL after {} s)\n",
                               signalName(sig) ? signalName(sig) : "a signal", graceSeconds);
            killAt = std::chrono::steady_clock::now() + std::chrono::seconds(graceSeconds);
        }
        if (firstFailure != 0 && !termSent && alive > 0) {
            for (pid_t p : pids)
                if (p > 0) kill(p, SIGTERM);
            termSent = true;
            killAt = std::chrono::steady_clock::now() + std::chrono::seconds(graceSeconds);
        }
        if (std::chrono::steady_clock::now() > killAt) {
            for (pid_t p : pids)
                if (p > 0) kill(p, SIGKILL);
            killed = true;
            killAt = std::chrono::steady_clock::time_point::max();
        }
        if (tick && std::chrono::steady_clock::now() > nextTick) {
            tick();
            nextTick = std::chrono::steady_clock::now() + kTickEvery;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return firstFailure;
}

// How each rank ended, beside its rank file: the one thing a rank cannot
// write itself when it is killed.
void writeEnds(const std::filesystem::path& runDir, const std::vector<pid_t>& pids,
               const std::vector<std::string>& ends, int stopSignal,
               const std::vector<RankStatus>& ranks) {
    nlohmann::json out;
    out["stop_signal"] =
        stopSignal ? nlohmann::json(signalName(stopSignal) ? signalName(stopSignal) : "signal")
                   : nlohmann::json(nullptr);
    for (size_t i = 0; i < pids.size(); ++i)
        out["ranks"].push_back({{"rank", i}, {"pid", pids[i]}, {"ended", ends[i]}});
    // What each rank said about its recording: its final drop counts reach
    // readers even where its own file could not take them.
    out["recording"] = nlohmann::json::array();
    for (const RankStatus& r : ranks) {
        nlohmann::json entry = {{"rank", r.rank},       {"pid", r.pid},
                                {"closed", r.closed},   {"submitted", r.submitted},
                                {"written", r.written}, {"drops", r.drops}};
        if (!r.notRecording.empty()) entry["not_recording"] = r.notRecording;
        out["recording"].push_back(std::move(entry));
    }
    writeFileAtomically(runDir / "launch.json", out.dump(1) + "\n");  // throws StoreError
}

std::string joinPath(const std::vector<std::string>& dirs, const std::string& rest) {
    std::string out;
    for (const auto& d : dirs)
        out += (out.empty() ? "" : ":") + d;
    if (!rest.empty()) out += (out.empty() ? "" : ":") + rest;
    return out;
}

// The ranks' status datagrams (capture/agent/interop/launcher_status.h),
// on an abstract Unix socket: no file, so a full disk or a deleted run
// folder does not silence them. Only this user's processes are heard.
class StatusInbox {
  public:
    StatusInbox() {
        std::random_device random;
        m_name = fmt::format("meshscope-status-{}-{:08x}", getpid(), random());
        m_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int on = 1;
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::memcpy(address.sun_path + 1, m_name.data(), m_name.size());
        if (m_fd < 0 || setsockopt(m_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0 ||
            bind(m_fd, reinterpret_cast<sockaddr*>(&address),
                 socklen_t(offsetof(sockaddr_un, sun_path) + 1 + m_name.size())) != 0) {
            if (m_fd >= 0) close(m_fd);
            m_fd = -1;
            m_name.clear();  // the ranks then say nothing; the run files still tell
        }
    }
    ~StatusInbox() {
        if (m_fd >= 0) close(m_fd);
    }
    StatusInbox(const StatusInbox&) = delete;
    StatusInbox& operator=(const StatusInbox&) = delete;
    const std::string& name() const { return m_name; }

    void drain() {
        if (m_fd < 0) return;
        for (;;) {
            char text[65536];
            alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
            iovec io{text, sizeof text};
            msghdr message{};
            message.msg_iov = &io;
            message.msg_iovlen = 1;
            message.msg_control = control;
            message.msg_controllen = sizeof control;
            ssize_t n = recvmsg(m_fd, &message, MSG_DONTWAIT);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;
            cmsghdr* c = CMSG_FIRSTHDR(&message);
            if (!c || c->cmsg_type != SCM_CREDENTIALS) continue;
            ucred sender{};
            std::memcpy(&sender, CMSG_DATA(c), sizeof sender);
            if (sender.uid != getuid()) continue;
            take(nlohmann::json::parse(text, text + n, nullptr, false), sender.pid);
        }
    }
    std::vector<RankStatus> ranks() const {
        std::vector<RankStatus> out;
        for (const auto& [pid, status] : m_byPid)
            out.push_back(status);
        std::sort(out.begin(), out.end(),
                  [](const RankStatus& a, const RankStatus& b) { return a.rank < b.rank; });
        return out;
    }

  private:
    void take(const nlohmann::json& m, pid_t sender) {
        if (!m.is_object() || !m.contains("event") || !m.contains("rank")) return;
        try {
            RankStatus& status = m_byPid[sender];
            status.pid = sender;
            status.rank = m.at("rank").get<int>();
            std::string event = m.at("event").get<std::string>();
            if (event == "attached" || event == "not_recording") {
                status.file = m.value("file", "");
                status.notRecording = m.value("why", "");
            } else if (event == "closed") {
                status.closed = true;
                status.submitted = m.value("submitted", uint64_t(0));
                status.written = m.value("written", uint64_t(0));
                const nlohmann::json drops = m.value("drops", nlohmann::json::object());
                for (const auto& [reason, count] : drops.items())
                    if (count.is_number_unsigned()) status.drops[reason] = count.get<uint64_t>();
            }
        } catch (const nlohmann::json::exception&) {
            // a malformed datagram is not the job's trouble
        }
    }

    int m_fd = -1;
    std::string m_name;
    std::map<pid_t, RankStatus> m_byPid;
};

// Records lost to the disk (not by choice, as a file cap or a full queue).
constexpr std::string_view kDiskLosses[] = {"disk_full", "io_error", "write_error",
                                            "not_recording"};

// What the ranks said about their recording, one line for each that lost
// records; true when any did.
bool sayLosses(const std::vector<RankStatus>& ranks, std::ostream& log) {
    bool lost = false;
    for (const RankStatus& r : ranks) {
        if (!r.notRecording.empty()) {
            log << fmt::format(
                "meshscope: rank {} recorded nothing: {}; its policy ran as on the other ranks\n",
                r.rank, r.notRecording);
            lost = true;
            continue;
        }
        uint64_t n = 0;
        std::string reasons;
        for (std::string_view reason : kDiskLosses)
            if (auto it = r.drops.find(std::string(reason)); it != r.drops.end() && it->second) {
                n += it->second;
                reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", it->second, reason);
            }
        if (n == 0) continue;
        lost = true;
        log << fmt::format(
            "meshscope: rank {} lost {} of {} record(s) to its disk ({}); {} were written: {} "
            "holds what was committed\n",
            r.rank, n, r.submitted, reasons, r.written, r.file.empty() ? "its file" : r.file);
    }
    return lost;
}

// Makes result.runDir this job's: created (0750) and claimed for `job`
// (core/store/manifest.h), so a second job never records into it. A taken
// default folder (two jobs started in the same second) gives way to
// NAME-2, NAME-3, ...; a folder given with -o that holds a run or another
// job's claim is refused. Throws std::runtime_error.
void claimRunDir(RecordResult& result, bool defaultName, const std::string& job,
                 std::ostream& log) {
    std::filesystem::path base = result.runDir;
    for (int attempt = 1;; ++attempt) {
        if (attempt > 1) result.runDir = base.string() + "-" + std::to_string(attempt);
        std::string taken;
        try {
            refuseExistingRun(result.runDir);
        } catch (const std::runtime_error& e) {
            if (!defaultName || attempt >= 100) throw;
            taken = result.runDir.string() + " holds another run";
        }
        std::error_code ec;
        if (taken.empty()) {
            result.createdDir = !std::filesystem::exists(result.runDir, ec);
            try {
                createRunDirectories(result.runDir);
            } catch (const StoreError& e) {
                throw std::runtime_error(e.what());
            }
            if (access(result.runDir.c_str(), W_OK | X_OK) != 0) {
                std::string why = std::strerror(errno);
                if (result.createdDir) std::filesystem::remove(result.runDir, ec);
                throw std::runtime_error(fmt::format("cannot write into run directory {}: {}",
                                                     result.runDir.string(), why));
            }
            std::string holder;
            bool claimed = false;
            try {
                claimed = claimRunDirectory(result.runDir, job, &holder);
            } catch (const StoreError& e) {
                throw std::runtime_error(e.what());
            }
            if (claimed) return;
            taken = fmt::format("{} is being recorded into by another job ({})",
                                result.runDir.string(), holder);
            if (!defaultName)
                throw std::runtime_error(taken + "; record into a new directory (-o)");
        }
        log << fmt::format("meshscope: {}; trying {}-{}\n", taken, base.string(), attempt + 1);
    }
}

}  // namespace

std::filesystem::path defaultRunDir() {
    return defaultRunDirectory(std::filesystem::current_path(), defaultRunName(std::time(nullptr)));
}

bool isTorchrunCommand(const std::vector<std::string>& command) {
    for (size_t i = 0; i < command.size() && i < 4; ++i) {
        std::string base = std::filesystem::path(command[i]).filename().string();
        if (base == "torchrun" || command[i] == "torch.distributed.run" ||
            command[i] == "torch.distributed.launch")
            return true;
    }
    return false;
}

std::string runIdProblem(std::string_view id) {
    if (id.empty() || id.size() > 64) return "must be 1 to 64 characters";
    for (char c : id)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
            return "may hold only letters, digits, '.', '_' and '-'";
    return {};
}

RecordResult record(const RecordOptions& options, std::ostream& log) {
    if (options.command.empty()) throw std::runtime_error("no command to record (after --)");
    if (!options.runId.empty())
        if (std::string why = runIdProblem(options.runId); !why.empty())
            throw std::runtime_error(fmt::format("run id '{}' {}", options.runId, why));
    RecordResult result;
    result.runDir =
        std::filesystem::absolute(options.runDir.empty() ? defaultRunDir() : options.runDir);
    std::string policy = options.policy;
    if (!policyModeFromString(policy)) {  // a policy file: check it before starting anything
        policy = std::filesystem::absolute(policy).string();
        Policy::fromFile(policy);  // throws PolicyError naming file:line
    }
    if (options.level != "dtensor" && options.level != "all")
        throw std::runtime_error("--level must be dtensor or all (got '" + options.level + "')");
    std::string executable = findExecutable(options.command.front());
    if (executable.empty())
        throw CommandNotFound(fmt::format(
            "cannot start '{}': command not found{}", options.command.front(),
            options.command.front().find('/') == std::string::npos ? " (not on PATH)" : ""));
    std::string runId = options.runId.empty() ? newRunId() : options.runId;
    claimRunDir(result, options.runDir.empty(), "run " + runId, log);

    Env env = currentEnvironment();
    env["PYTHONPATH"] = joinPath(options.pythonPath, env["PYTHONPATH"]);
    auto var = [](std::string_view key) { return std::string(key); };
    env[var(setting("run_dir").env)] = result.runDir.string();
    env[var(setting("run_id").env)] = runId;
    StatusInbox inbox;
    env[var(setting("status_socket").env)] = inbox.name();
    std::vector<std::string> shown;  // the manifest's command: as typed, torchrun included
    for (const std::string& argument : options.command)
        shown.push_back(shownText(argument));
    env[var(setting("command").env)] = nlohmann::json(shown).dump();
    env[var(setting("policy").env)] = policy;
    env[var(setting("level").env)] = options.level;
    if (options.watchdogSeconds)
        env[var(setting("watchdog_s").env)] = fmt::format("{:g}", *options.watchdogSeconds);
    env[var(setting("attach").env)] =
        options.nproc == 0 && isTorchrunCommand(options.command) ? "rank-env" : "always";
    env.erase(var(setting("attached_pid").env));
    log << "meshscope: recording into " << result.runDir.string() << "\n";

    env[var(setting("launcher_pid").env)] =
        std::to_string(getpid());  // ranks die with the launcher
    g_stopSignal.store(0);
    struct sigaction forward {};
    forward.sa_sigaction = forwardSignal;
    forward.sa_flags = SA_SIGINFO;
    sigaction(SIGTERM, &forward, nullptr);
    sigaction(SIGINT, &forward, nullptr);

    std::vector<pid_t> pids;
    int ranks = std::max(1, options.nproc);
    if (options.nproc > 0) {
        env["MASTER_ADDR"] = "127.0.0.1";
        env["MASTER_PORT"] = std::to_string(freePort());
        env["WORLD_SIZE"] = env["LOCAL_WORLD_SIZE"] = std::to_string(ranks);
        env["GROUP_RANK"] = "0";
    }
    g_childCount.store(0);
    for (int r = 0; r < ranks && r < 256; ++r) {
        if (options.nproc > 0) env["RANK"] = env["LOCAL_RANK"] = std::to_string(r);
        pid_t pid = spawn(options.command, env);
        pids.push_back(pid);
        g_children[r].store(pid);
        g_childCount.store(r + 1);
    }
    std::vector<std::string> ends;
    // Replicas found drifting while the job runs: said now, not after a day.
    ReplicaWatch drifts(result.runDir);
    bool watching = true;
    auto watch = [&] {
        inbox.drain();
        if (!watching) return;
        try {
            for (const ReplicaDrift& d : drifts.poll())
                log << fmt::format(
                    "meshscope: replica drift (the job goes on, silently wrong): {}{} differs "
                    "across ranks {} from step {} ({} first): {}; fix: {} (meshscope check)\n",
                    d.name, d.key.empty() ? "" : " [" + d.key + "]", formatRankGroups(d.groups),
                    d.firstStep, d.firstRole, d.causeText, d.fix.code);
        } catch (const std::exception& e) {  // the watch is a courtesy: never the job's trouble
            log << "meshscope: replica watch stopped: " << e.what() << "\n";
            watching = false;
        }
    };
    result.exitCode = waitAll(pids, options.killGraceSeconds, log, ends, watch);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    int stop = g_stopSignal.load();
    inbox.drain();
    result.ranks = inbox.ranks();
    std::error_code ec;
    result.dirDeleted = !std::filesystem::is_directory(result.runDir, ec);
    bool endsWritten = false;
    if (result.dirDeleted) {
        log << fmt::format(
            "meshscope: the run directory {} was deleted while the job ran; {} rank(s) had "
            "recorded into it, and what they recorded is gone\n",
            result.runDir.string(), result.ranks.size());
    } else {
        try {
            writeEnds(result.runDir, pids, ends, stop, result.ranks);
            endsWritten = true;
        } catch (const StoreError& e) {
            log << "meshscope: " << e.what() << ": how each process of the job ended is only "
                << "in this log\n";
        }
    }
    if (stop || result.exitCode != 0 || !endsWritten)
        for (size_t i = 0; i < ends.size(); ++i)
            log << fmt::format("meshscope: rank {} {}\n", i, ends[i]);
    result.lostRecords = sayLosses(result.ranks, log);
    result.rankFiles = result.dirDeleted ? 0 : countRankFiles(result.runDir);
    return result;
}

}  // namespace meshscope::cli
