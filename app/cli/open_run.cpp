#include <unistd.h>

#include <iostream>

#include "app/cli/cli.h"

namespace meshscope::cli {

std::optional<RunReader> openRun(const std::string& path, bool partial) {
    RunReader run = RunReader::open(path);
    for (const auto& p : run.problems())
        std::cerr << "meshscope: " << p.what() << (partial ? " (skipped)" : "") << "\n";
    if ((!partial && !run.problems().empty()) || run.ranks().empty()) {
        if (!partial && !run.problems().empty() && !run.ranks().empty())
            std::cerr << "meshscope: use --partial to read the " << run.ranks().size()
                      << " readable rank(s)\n";
        return std::nullopt;
    }
    return run;
}

bool progressWanted() {
    return isatty(STDERR_FILENO) == 1;
}

}  // namespace meshscope::cli
