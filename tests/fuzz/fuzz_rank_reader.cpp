// Fuzz target: arbitrary bytes as a rank file. Anything but a clean read or a
// StoreError (a crash, a sanitizer report, another exception) is a finding.
// Built with libFuzzer by scripts/fuzz.sh; corpus_driver.cpp replays a corpus
// through the same function in the regular test suite.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/store/store_error.h"
#include "tests/fuzz/exercise_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::filesystem::path file =
        std::filesystem::temp_directory_path() /
        ("meshscope-fuzz-" + std::to_string(::getpid()) + ".msdb");
    {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    }
    try {
        meshscope::test::exerciseRankFile(file);
    } catch (const meshscope::StoreError&) {
        // The expected outcome for damaged input.
    }
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"})
        std::filesystem::remove(file.string() + suffix, ec);
    return 0;
}
