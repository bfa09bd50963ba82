#pragma once

// This process's resident memory of one kind, from /proc/self/status:
// "RssAnon:" (heap and the like) or "RssFile:" (mapped files, the
// timeline's spill file among them). For the spill's tests and the GUI
// benchmark.

#include <cstdint>
#include <fstream>
#include <string>

namespace meshscope::ui::test {

// Kilobytes, or -1 where the kernel does not say.
inline int64_t residentKiB(const std::string& kind) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind(kind, 0) == 0) return std::stoll(line.substr(kind.size()));
    return -1;
}

}  // namespace meshscope::ui::test
