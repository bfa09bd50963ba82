// meshscope: command-line front end. Each subcommand lives in app/cli/;
// exit codes are in app/cli/cli.h and the README.

#include <CLI/CLI.hpp>

#include <iostream>
#include <vector>

#include "app/cli/cli.h"
#include "core/policy/policy.h"
#include "core/store/store_error.h"
#include "core/util/terminal_text.h"
#include "core/version.h"

int main(int argc, char** argv) {
    namespace cli = meshscope::cli;
    meshscope::prepareForManyReaders();  // before any SQLite call
    CLI::App app{"meshscope: find and fix mixed torch.Tensor/DTensor incidents"};
    app.require_subcommand(1);
    app.set_version_flag("--version", meshscope::kNameAndVersion);
    std::vector<cli::Command> commands = {
        cli::addRecord(app), cli::addInfo(app),   cli::addSummary(app),
        cli::addSynth(app),  cli::addCheck(app),  cli::addReport(app),
        cli::addDiff(app),   cli::addExport(app), cli::addMerge(app),
    };
    // A word that names no command: say so, with the commands (CLI11 would
    // only say that a subcommand is required).
    if (argc > 1 && argv[1][0] != '-') {
        std::string names;
        bool known = false;
        for (const cli::Command& command : commands) {
            names += (names.empty() ? "" : ", ") + command.app->get_name();
            known = known || command.app->get_name() == argv[1];
        }
        if (!known) {
            std::cerr << "meshscope: unknown command '" << meshscope::terminalSafe(argv[1])
                      << "'; commands: " << names << " (meshscope COMMAND --help)\n";
            return cli::kExitUsage;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? cli::kExitOk : cli::kExitUsage;
    }
    try {
        for (const cli::Command& command : commands)
            if (*command.app) return command.run();
    } catch (const meshscope::StoreError& e) {
        std::cerr << "meshscope: " << meshscope::terminalSafe(e.what()) << "\n";
        return cli::kExitUnreadable;
    } catch (const meshscope::PolicyError& e) {
        std::cerr << "meshscope: bad policy: " << e.what() << "\n";
        return cli::kExitUsage;
    } catch (const std::runtime_error& e) {
        std::cerr << "meshscope: " << meshscope::terminalSafe(e.what()) << "\n";
        return cli::kExitUsage;
    }
    return cli::kExitUsage;
}
