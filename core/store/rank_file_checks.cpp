#include "core/store/rank_file_checks.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/store/regular_file.h"
#include "core/store/schema.h"
#include "core/store/store_error.h"
#include "core/util/utf8.h"

namespace meshscope {

using namespace schema;

namespace {

constexpr char kSqliteMagic[] = "SQLite format 3";  // 16 bytes with the NUL

uint32_t bigEndian(const unsigned char* p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i)
        v = (v << 8) | p[i];
    return v;
}

// The size of `file`'s -wal, 0 when it has none.
uint64_t walBytes(const std::filesystem::path& file) {
    std::error_code ec;
    uint64_t size = std::filesystem::file_size(std::filesystem::path(file) += "-wal", ec);
    return ec ? 0 : size;
}

}  // namespace

// A file with a -wal is not called truncated: its newest pages, and the
// header's page count with them, may be in the -wal alone (a checkpoint
// that a full disk stopped half way leaves the file shorter than its
// header says, and every committed page still in the -wal).
void checkHeader(const std::filesystem::path& file) {
    FileHead head = readRegularFileHead(file, 100);
    for (const char* companion : {"-wal", "-shm"})
        refuseIfNotRegular(std::filesystem::path(file) += companion);
    uint64_t size = head.size;
    if (size == 0)
        throw StoreError(file.string(), "empty file (0 bytes), not a meshscope rank file");
    unsigned char header[100] = {};
    size_t got = head.bytes.size();
    std::memcpy(header, head.bytes.data(), got);
    if (got < 16 || std::memcmp(header, kSqliteMagic, 16) != 0)
        throw StoreError(file.string(), "not a meshscope rank file (not an SQLite database)");
    if (got < sizeof header)
        throw StoreError(file.string(), "truncated (" + std::to_string(size) +
                                            " bytes, shorter than an SQLite header)");
    uint32_t pageSize = bigEndian(header + 16, 2);
    if (pageSize == 1) pageSize = 65536;
    uint32_t pageCount = bigEndian(header + 28, 4);
    bool countValid = bigEndian(header + 24, 4) == bigEndian(header + 92, 4);
    uint64_t expected = uint64_t(pageSize) * pageCount;
    if (pageSize < 512 || (pageSize & (pageSize - 1)) != 0)
        throw StoreError(file.string(),
                         "corrupt SQLite header (page size " + std::to_string(pageSize) + ")");
    constexpr uint64_t kWalHeaderBytes = 32;
    if (countValid && pageCount > 0 && expected > size && walBytes(file) <= kWalHeaderBytes)
        throw StoreError(file.string(), "truncated (" + std::to_string(size) + " of " +
                                            std::to_string(expected) + " bytes)");
}

bool hasWalContent(const std::filesystem::path& file) {
    return walBytes(file) > 0;
}

ReadVia readVia(const std::filesystem::path& file) {
    std::filesystem::path dir = file.parent_path().empty() ? "." : file.parent_path();
    auto shm = std::filesystem::path(file) += "-shm";
    std::error_code ec;
    bool shmExists = std::filesystem::exists(shm, ec);
    bool shared = ::access(dir.c_str(), W_OK | X_OK) == 0 &&
                  (shmExists ? ::access(shm.c_str(), R_OK | W_OK) == 0 : walBytes(file) == 0);
    if (shared) return ReadVia::Shared;
    return walBytes(file) > 0 ? ReadVia::PrivateCopy : ReadVia::Immutable;
}

namespace {

// Schema objects a rank file may hold beyond its tables.
bool knownIndex(const std::string& name) {
    if (name.starts_with("sqlite_autoindex_")) return true;
    return std::find(kIndexNames.begin(), kIndexNames.end(), name) != kIndexNames.end();
}

}  // namespace

// The tables, columns and indexes a meshscope writer makes, and nothing
// else: a generated column, a view where a table belongs or a foreign index
// would run the file's own SQL inside every query (a crafted 786 KB file
// took 24 s and 1.8 GB), so such a file is refused before any query.
void checkRankSchema(sql::Db& db, const std::filesystem::path& path) {
    std::map<std::string, schema::TableShape> shapes;
    for (const schema::TableShape& shape : schema::tableShapes())
        shapes.emplace(std::string(shape.name), shape);
    sql::Stmt objects(db, "SELECT type, name FROM sqlite_schema");
    std::vector<std::string> tables;
    while (objects.step()) {
        std::string type = objects.text(0), name = objects.text(1);
        std::string shown = "'" + validUtf8(name.substr(0, 60)) + "'";
        if (type == "table" && shapes.count(name)) {
            tables.push_back(name);
        } else if (type == "index" && knownIndex(name)) {
        } else {
            throw StoreError(path.string(), "unexpected schema: it holds " + type + " " + shown +
                                                ", which no meshscope writer makes");
        }
    }
    sql::Stmt columns(db, "SELECT name, hidden FROM pragma_table_xinfo(?1)");  // one per file
    for (const std::string& name : tables) {
        const schema::TableShape& shape = shapes.at(name);
        columns.reset();
        columns.bind(1, name);
        size_t i = 0;
        while (columns.step()) {
            std::string column = columns.text(0);
            if (columns.int64(1) != 0)
                throw StoreError(path.string(),
                                 "unexpected schema: column '" + validUtf8(column.substr(0, 60)) +
                                     "' of table '" + name +
                                     "' is generated or hidden; a rank file has none");
            if (i >= shape.columns.size() || column != shape.columns[i])
                throw StoreError(
                    path.string(),
                    "unexpected schema: table '" + name + "' has column '" +
                        validUtf8(column.substr(0, 60)) + "' where meshscope writes " +
                        (i < shape.columns.size() ? "'" + std::string(shape.columns[i]) + "'"
                                                  : std::string("no more columns")));
            ++i;
        }
        if (i != shape.columns.size())
            throw StoreError(path.string(), "unexpected schema: table '" + name +
                                                "' lacks column '" + std::string(shape.columns[i]) +
                                                "'");
    }
}

}  // namespace meshscope
