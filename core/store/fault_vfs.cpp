#include "core/store/fault_vfs.h"

#include <sqlite3.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "core/model/settings.h"

namespace meshscope {
namespace {

struct FaultState {
    DiskFault fault;
    std::atomic<uint64_t> written{0};
    std::atomic<uint64_t> failures{0};
    std::atomic<bool> triggered{false};  // whenExists was seen (it stays failed)
};

// Whether this write is past the fault's point: its byte count, or its
// trigger file (looked for at each write until it appears).
bool pastThePoint(FaultState& s, uint64_t before, int amount) {
    if (s.fault.whenExists.empty()) return before + uint64_t(amount) > s.fault.afterBytes;
    if (s.triggered.load()) return true;
    std::error_code ec;
    if (!std::filesystem::exists(s.fault.whenExists, ec)) return false;
    s.triggered = true;
    return true;
}

FaultState g_state;
sqlite3_vfs* g_base = nullptr;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;

// A file of the faulty VFS: the base VFS's file follows this header.
struct FaultFile {
    sqlite3_file base;  // pMethods = &g_methods
    sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};

int faultWrite(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset) {
    FaultState& s = g_state;
    uint64_t before = s.written.fetch_add(uint64_t(amount));
    bool freed = s.fault.kind == DiskFault::Kind::Full && s.fault.freeAfterFails > 0 &&
                 s.failures.load() >= s.fault.freeAfterFails;
    if (pastThePoint(s, before, amount) && !freed) {
        s.written.fetch_sub(uint64_t(amount));
        s.failures.fetch_add(1);
        return s.fault.kind == DiskFault::Kind::Full ? SQLITE_FULL : SQLITE_IOERR_WRITE;
    }
    sqlite3_file* real = reinterpret_cast<FaultFile*>(file)->real();
    return real->pMethods->xWrite(real, data, amount, offset);
}

// The other methods pass through to the base file.
template <auto Member, typename... Args>
int forward(sqlite3_file* file, Args... args) {
    sqlite3_file* real = reinterpret_cast<FaultFile*>(file)->real();
    return (real->pMethods->*Member)(real, args...);
}

int faultClose(sqlite3_file* file) {
    sqlite3_file* real = reinterpret_cast<FaultFile*>(file)->real();
    return real->pMethods ? real->pMethods->xClose(real) : SQLITE_OK;
}

int faultShmMap(sqlite3_file* file, int page, int size, int extend, void volatile** out) {
    return forward<&sqlite3_io_methods::xShmMap>(file, page, size, extend, out);
}

int faultOpen(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* outFlags) {
    auto* f = reinterpret_cast<FaultFile*>(file);
    f->base.pMethods = nullptr;
    int rc = g_base->xOpen(g_base, name, f->real(), flags, outFlags);
    if (rc == SQLITE_OK) f->base.pMethods = &g_methods;
    return rc;
}

void buildVfs() {
    g_base = sqlite3_vfs_find(nullptr);
    g_methods.iVersion = 3;
    g_methods.xClose = faultClose;
    g_methods.xRead = forward<&sqlite3_io_methods::xRead, void*, int, sqlite3_int64>;
    g_methods.xWrite = faultWrite;
    g_methods.xTruncate = forward<&sqlite3_io_methods::xTruncate, sqlite3_int64>;
    g_methods.xSync = forward<&sqlite3_io_methods::xSync, int>;
    g_methods.xFileSize = forward<&sqlite3_io_methods::xFileSize, sqlite3_int64*>;
    g_methods.xLock = forward<&sqlite3_io_methods::xLock, int>;
    g_methods.xUnlock = forward<&sqlite3_io_methods::xUnlock, int>;
    g_methods.xCheckReservedLock = forward<&sqlite3_io_methods::xCheckReservedLock, int*>;
    g_methods.xFileControl = forward<&sqlite3_io_methods::xFileControl, int, void*>;
    g_methods.xSectorSize = [](sqlite3_file* f) {
        sqlite3_file* real = reinterpret_cast<FaultFile*>(f)->real();
        return real->pMethods->xSectorSize(real);
    };
    g_methods.xDeviceCharacteristics = [](sqlite3_file* f) {
        sqlite3_file* real = reinterpret_cast<FaultFile*>(f)->real();
        return real->pMethods->xDeviceCharacteristics(real);
    };
    g_methods.xShmMap = faultShmMap;
    g_methods.xShmLock = forward<&sqlite3_io_methods::xShmLock, int, int, int>;
    g_methods.xShmBarrier = [](sqlite3_file* f) {
        sqlite3_file* real = reinterpret_cast<FaultFile*>(f)->real();
        real->pMethods->xShmBarrier(real);
    };
    g_methods.xShmUnmap = forward<&sqlite3_io_methods::xShmUnmap, int>;
    g_methods.xFetch = forward<&sqlite3_io_methods::xFetch, sqlite3_int64, int, void**>;
    g_methods.xUnfetch = forward<&sqlite3_io_methods::xUnfetch, sqlite3_int64, void*>;

    g_vfs = *g_base;  // every other call (delete, access, randomness, time) is the base's
    g_vfs.szOsFile = int(sizeof(FaultFile)) + g_base->szOsFile;
    g_vfs.zName = "meshscope-fault";
    g_vfs.pNext = nullptr;
    g_vfs.xOpen = faultOpen;
}

std::optional<uint64_t> number(std::string_view text) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return v;
}

}  // namespace

std::optional<DiskFault> parseDiskFault(std::string_view text, std::string* error) {
    DiskFault fault;
    bool sawPoint = false;
    auto fail = [&](std::string why) {
        if (error) *error = std::move(why);
        return std::nullopt;
    };
    while (!text.empty()) {
        size_t comma = text.find(',');
        std::string_view part = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        size_t eq = part.find('=');
        std::string_view key = part.substr(0, eq);
        std::string_view value =
            eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
        bool full = key == "full-after" || key == "full-when";
        if (full || key == "readonly-after" || key == "readonly-when") {
            if (sawPoint)
                return fail("'" + std::string(part) + "': the fault's point is given twice");
            fault.kind = full ? DiskFault::Kind::Full : DiskFault::Kind::ReadOnly;
            sawPoint = true;
            if (key.ends_with("-when")) {
                if (value.empty()) return fail("'" + std::string(part) + "' is not KEY=PATH");
                fault.whenExists = std::string(value);
                continue;
            }
        } else if (key != "free-after") {
            return fail("unknown key '" + std::string(key) +
                        "' (full-after, readonly-after, full-when, readonly-when, free-after)");
        }
        std::optional<uint64_t> n = number(value);  // none for an empty value
        if (!n) return fail("'" + std::string(part) + "' is not KEY=NUMBER");
        (key == "free-after" ? fault.freeAfterFails : fault.afterBytes) = *n;
    }
    if (!sawPoint)
        return fail(
            "needs full-after=BYTES, readonly-after=BYTES, full-when=PATH or readonly-when=PATH");
    return fault;
}

void installDiskFault(const DiskFault& fault) {
    static std::once_flag built;
    std::call_once(built, buildVfs);
    g_state.fault = fault;
    g_state.written = 0;
    g_state.failures = 0;
    g_state.triggered = false;
    sqlite3_vfs_register(&g_vfs, 1);
}

void installDiskFaultFromEnvironment() {
    static std::once_flag once;
    std::call_once(once, [] {
        const char* text = std::getenv(std::string(setting("fault_disk").env).c_str());
        if (!text || !*text) return;
        std::string error;
        std::optional<DiskFault> fault = parseDiskFault(text, &error);
        if (!fault)
            throw std::invalid_argument(std::string(setting("fault_disk").env) + "='" + text +
                                        "': " + error);
        installDiskFault(*fault);
    });
}

uint64_t diskFaultFailures() {
    return g_state.failures.load();
}

}  // namespace meshscope
