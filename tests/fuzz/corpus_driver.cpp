// Without libFuzzer: `fuzz_corpus_driver --make-corpus DIR` writes a seed
// corpus (a valid synthetic rank file and damaged variants of it);
// `fuzz_corpus_driver DIR...` replays every file through the fuzz target.

#include <sqlite3.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/store/run_directory.h"
#include "core/synth/synthetic_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string slurp(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void put(const std::filesystem::path& file, const std::string& bytes) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

int makeCorpus(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    auto scratch = dir / "scratch-run";
    std::filesystem::remove_all(scratch);
    meshscope::SyntheticRunSpec spec;
    spec.ranks = 1;
    spec.steps = 6;
    spec.layers = 2;
    meshscope::writeSyntheticRun(scratch, spec);
    std::string valid = slurp(meshscope::rankFilePath(scratch, 0));
    std::filesystem::remove_all(scratch);
    put(dir / "valid.msdb", valid);
    put(dir / "empty.msdb", "");
    put(dir / "text.msdb", "not a database\n");
    for (size_t cut : {size_t(16), size_t(100), size_t(8192), valid.size() / 2, valid.size() - 1})
        put(dir / ("cut-" + std::to_string(cut) + ".msdb"), valid.substr(0, cut));
    // Hostile schemas (issue #45): SQL of the file's own inside every query.
    const std::pair<const char*, const char*> hostile[] = {
        {"generated-column",
         "ALTER TABLE strings ADD COLUMN g BLOB GENERATED ALWAYS AS (zeroblob(100000000))"},
        {"view-for-table",
         "DROP TABLE drops; CREATE VIEW drops AS SELECT 'queue_full' AS reason, 1 AS count"},
        {"foreign-index", "CREATE INDEX slow ON strings (length(text) * 7)"},
        {"extra-column", "ALTER TABLE meta ADD COLUMN note TEXT"},
    };
    for (const auto& [name, sql] : hostile) {
        auto file = dir / (std::string("schema-") + name + ".msdb");
        put(file, valid);
        sqlite3* db = nullptr;
        if (sqlite3_open(file.c_str(), &db) != SQLITE_OK ||
            sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
            std::fprintf(stderr, "cannot make %s: %s\n", name, sqlite3_errmsg(db));
        sqlite3_close(db);
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 24; ++i) {
        std::string bytes = valid;
        for (int f = 0; f < 1 + i; ++f)
            bytes[rng() % bytes.size()] ^= char(1 + rng() % 255);
        put(dir / ("flip-" + std::to_string(i) + ".msdb"), bytes);
    }
    std::printf("corpus written to %s\n", dir.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "--make-corpus") return makeCorpus(argv[2]);
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s --make-corpus DIR | %s DIR...\n", argv[0], argv[0]);
        return 2;
    }
    int files = 0;
    for (int i = 1; i < argc; ++i) {
        for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
            if (!entry.is_regular_file()) continue;
            std::string bytes = slurp(entry.path());
            LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
            ++files;
        }
    }
    std::printf("replayed %d corpus files without a crash\n", files);
    return files > 0 ? 0 : 1;
}
