#include "core/store/sqlite.h"

#include <sqlite3.h>

#include <cstdio>
#include <utility>

namespace meshscope::sql {
namespace {

std::string describe(sqlite3* db, int rc) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    return msg;
}

}  // namespace

bool Error::isCorruption() const {
    int primary = m_code & 0xff;
    return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

// A file: URI of `path` with `?immutable=1`: the characters a URI gives a
// meaning to are percent-encoded.
static std::string immutableUri(const std::string& path) {
    std::string uri = "file:";
    for (unsigned char c : path) {
        if (c == '%' || c == '?' || c == '#' || c < 0x20 || c == 0x7f) {
            char hex[4];
            std::snprintf(hex, sizeof hex, "%%%02X", c);
            uri += hex;
        } else {
            uri += char(c);
        }
    }
    return uri + "?immutable=1";
}

void preferManyConnections() {
    sqlite3_config(SQLITE_CONFIG_PAGECACHE, nullptr, 0, 0);
    // No allocation statistics: they take one process-wide mutex for every
    // allocation, which readers working side by side contend for.
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

Db::Db(const std::string& path, OpenMode mode) : m_path(path) {
    int flags = SQLITE_OPEN_NOMUTEX;
    std::string name = path;
    if (mode == OpenMode::ReadWriteCreate) {
        flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW;
    } else {
        flags |= SQLITE_OPEN_READONLY;
        if (mode == OpenMode::Immutable) {
            flags |= SQLITE_OPEN_URI;
            name = immutableUri(path);
        }
    }
    int rc = sqlite3_open_v2(name.c_str(), &m_db, flags, nullptr);
    if (rc != SQLITE_OK) {
        Error error(rc, describe(m_db, rc));
        close();
        throw error;
    }
    sqlite3_extended_result_codes(m_db, 1);
    if (mode != OpenMode::ReadWriteCreate)
        // A reader reads its file's chunks once, in order, and `check` of
        // 4,096 ranks holds 4,096 readers: no lookaside buffer (about 150 KB
        // each by default) and a small page cache (64 KiB; 2 MB by default).
        sqlite3_db_config(m_db, SQLITE_DBCONFIG_LOOKASIDE, nullptr, 0, 0);
    sqlite3_db_config(m_db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(m_db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_db_config(m_db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
    sqlite3_db_config(m_db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
    sqlite3_db_config(m_db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
    exec("PRAGMA cell_size_check=ON");
    if (mode != OpenMode::ReadWriteCreate) exec("PRAGMA cache_size=-64");
}

void Db::releaseMemory() {
    sqlite3_db_release_memory(m_db);
}

void Db::limitValueBytes(int bytes) {
    sqlite3_limit(m_db, SQLITE_LIMIT_LENGTH, bytes);
    sqlite3_limit(m_db, SQLITE_LIMIT_SQL_LENGTH, 1 << 20);
}

Db::~Db() {
    close();
}

Db::Db(Db&& other) noexcept
    : m_db(std::exchange(other.m_db, nullptr)), m_path(std::move(other.m_path)) {}

Db& Db::operator=(Db&& other) noexcept {
    if (this != &other) {
        close();
        m_db = std::exchange(other.m_db, nullptr);
        m_path = std::move(other.m_path);
    }
    return *this;
}

void Db::close() noexcept {
    if (m_db) sqlite3_close_v2(m_db);
    m_db = nullptr;
}

void Db::exec(std::string_view sql) {
    std::string text(sql);
    char* err = nullptr;
    int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        std::string message = err ? err : sqlite3_errstr(rc);
        sqlite3_free(err);
        throw Error(sqlite3_extended_errcode(m_db), message);
    }
}

int64_t Db::pragmaInt(std::string_view pragma) {
    Stmt stmt(*this, "PRAGMA " + std::string(pragma));
    return stmt.step() ? stmt.int64(0) : 0;
}

Stmt::Stmt(const Db& db, std::string_view sql) : m_db(db.handle()) {
    int rc = sqlite3_prepare_v3(m_db, sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                &m_stmt, nullptr);
    if (rc != SQLITE_OK) fail(rc);
}

Stmt::~Stmt() {
    if (m_stmt) sqlite3_finalize(m_stmt);
}

Stmt::Stmt(Stmt&& other) noexcept
    : m_stmt(std::exchange(other.m_stmt, nullptr)), m_db(other.m_db) {}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
    if (this != &other) {
        if (m_stmt) sqlite3_finalize(m_stmt);
        m_stmt = std::exchange(other.m_stmt, nullptr);
        m_db = other.m_db;
    }
    return *this;
}

void Stmt::fail(int rc) const {
    throw Error(m_db ? sqlite3_extended_errcode(m_db) : rc, describe(m_db, rc));
}

Stmt& Stmt::bind(int index, int64_t value) {
    if (int rc = sqlite3_bind_int64(m_stmt, index, value); rc != SQLITE_OK) fail(rc);
    return *this;
}

Stmt& Stmt::bind(int index, double value) {
    if (int rc = sqlite3_bind_double(m_stmt, index, value); rc != SQLITE_OK) fail(rc);
    return *this;
}

Stmt& Stmt::bind(int index, std::string_view text) {
    int rc = sqlite3_bind_text(m_stmt, index, text.data(), int(text.size()), SQLITE_TRANSIENT);
    if (rc != SQLITE_OK) fail(rc);
    return *this;
}

Stmt& Stmt::bindBlob(int index, std::string_view bytes) {
    int rc = sqlite3_bind_blob(m_stmt, index, bytes.data(), int(bytes.size()), SQLITE_STATIC);
    if (rc != SQLITE_OK) fail(rc);
    return *this;
}

Stmt& Stmt::bindNull(int index) {
    if (int rc = sqlite3_bind_null(m_stmt, index); rc != SQLITE_OK) fail(rc);
    return *this;
}

bool Stmt::step() {
    int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite3_reset(m_stmt);
    fail(rc);
}

void Stmt::run() {
    step();
    sqlite3_reset(m_stmt);  // every parameter is rebound before the next run
}

void Stmt::reset() {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
}

int64_t Stmt::int64(int col) const {
    return sqlite3_column_int64(m_stmt, col);
}
double Stmt::real(int col) const {
    return sqlite3_column_double(m_stmt, col);
}
bool Stmt::isNull(int col) const {
    return sqlite3_column_type(m_stmt, col) == SQLITE_NULL;
}

std::string_view Stmt::blob(int col) const {
    auto* data = static_cast<const char*>(sqlite3_column_blob(m_stmt, col));
    return data ? std::string_view(data, size_t(sqlite3_column_bytes(m_stmt, col)))
                : std::string_view();
}

std::string Stmt::text(int col) const {
    auto* data = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
    return data ? std::string(data, size_t(sqlite3_column_bytes(m_stmt, col))) : std::string();
}

Transaction::Transaction(Db& db) : m_db(db) {
    m_db.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
    if (!m_done) {
        try {
            m_db.exec("ROLLBACK");
        } catch (const Error&) {
            // Nothing to roll back after SQLite already aborted the transaction.
        }
    }
}

void Transaction::commit() {
    m_db.exec("COMMIT");
    m_done = true;
}

}  // namespace meshscope::sql
