#pragma once

// A thin RAII layer over SQLite. Only core/store uses it; nothing outside the
// store sees a sqlite3 handle or writes SQL.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace meshscope::sql {

// Thrown for a failed SQLite call; code() is the extended result code.
class Error : public std::exception {
  public:
    Error(int code, std::string message) : m_code(code), m_message(std::move(message)) {}
    const char* what() const noexcept override { return m_message.c_str(); }
    int code() const { return m_code; }
    bool isCorruption() const;  // SQLITE_CORRUPT / SQLITE_NOTADB

  private:
    int m_code;
    std::string m_message;
};

// Immutable: read-only, and SQLite is told that nobody changes the file, so
// it neither locks it nor opens or creates its -wal or -shm (for a folder
// that cannot be written, or a copy whose -shm is gone). Committed data
// still in a -wal is not seen that way: RankReader reads such a file from a
// private copy.
enum class OpenMode { ReadOnly, Immutable, ReadWriteCreate };

// For a process that holds many connections (`check` of 4,096 ranks, the
// GUI): no initial bulk page-cache allocation per connection (20 pages,
// about 170 KB each; pages are then allocated as read) and no allocation
// statistics (a process-wide mutex per allocation). Call first thing in
// main(), before any other SQLite call and before threads start; later it
// changes nothing (SQLite is initialized by then).
void preferManyConnections();

class Db {
  public:
    Db() = default;
    // Read-only opens are defensive: trusted_schema off, defensive mode on,
    // cell_size_check on, so damaged or hostile files cannot run SQL functions
    // or corrupt memory.
    Db(const std::string& path, OpenMode mode);
    ~Db();
    Db(Db&& other) noexcept;
    Db& operator=(Db&& other) noexcept;
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;

    void exec(std::string_view sql);
    int64_t pragmaInt(std::string_view pragma);
    // Bounds what one value may cost a reader: a hostile file's megabyte
    // values cannot make gigabytes of a query.
    void limitValueBytes(int bytes);
    // Frees the page cache's unused pages (a reader done with a pass).
    void releaseMemory();
    sqlite3* handle() const { return m_db; }
    const std::string& path() const { return m_path; }
    // Gives up the handle without closing it: a fork()ed child must never
    // close (and thereby checkpoint or unlink) its parent's connection.
    void abandon() { m_db = nullptr; }

  private:
    void close() noexcept;

    sqlite3* m_db = nullptr;
    std::string m_path;
};

// A prepared statement, reset and rebound for each use.
class Stmt {
  public:
    Stmt() = default;
    Stmt(const Db& db, std::string_view sql);
    ~Stmt();
    Stmt(Stmt&& other) noexcept;
    Stmt& operator=(Stmt&& other) noexcept;
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    // Binding is 1-based as in SQLite. A zero/invalid id binds NULL via bindId.
    Stmt& bind(int index, int64_t value);
    Stmt& bind(int index, double value);
    Stmt& bind(int index, std::string_view text);
    Stmt& bindBlob(int index, std::string_view bytes);
    Stmt& bindNull(int index);
    template <typename Id>
    Stmt& bindId(int index, Id id) {
        return id.valid() ? bind(index, id.value()) : bindNull(index);
    }

    // Steps once; true when a row is available.
    bool step();
    // Steps a statement that returns no rows, then resets it.
    void run();
    void reset();

    int64_t int64(int col) const;
    double real(int col) const;
    std::string text(int col) const;
    std::string_view blob(int col) const;  // valid until the next step/reset
    bool isNull(int col) const;
    template <typename Id>
    Id id(int col) const {
        return isNull(col) ? Id{} : Id{int64(col)};
    }

  private:
    [[noreturn]] void fail(int rc) const;

    sqlite3_stmt* m_stmt = nullptr;
    sqlite3* m_db = nullptr;
};

// Commits on commit(); rolls back if destroyed before.
class Transaction {
  public:
    explicit Transaction(Db& db);
    ~Transaction();
    void commit();

  private:
    Db& m_db;
    bool m_done = false;
};

}  // namespace meshscope::sql
