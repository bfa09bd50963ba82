#pragma once

// `meshscope record`: runs a training command with the capture agent loaded
// into every worker, without editing the script. The agent is loaded by a
// sitecustomize module on PYTHONPATH that reads MESHSCOPE_* variables. With
// `nproc` > 0 the launcher starts the ranks itself (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR/PORT), like a minimal torchrun; otherwise it runs
// the command once (torchrun, or a single python process). No Qt, no torch.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace meshscope::cli {

struct RecordOptions {
    std::filesystem::path runDir;  // empty: ./meshscope-runs/<timestamp>
    std::string policy = "observe";
    std::string level = "dtensor";
    int nproc = 0;  // > 0: start this many local ranks
    std::vector<std::string> command;
    std::vector<std::string> pythonPath;  // prepended to PYTHONPATH (loader, package)
    // SIGTERM to SIGKILL, once a rank failed or the launcher got SIGINT/SIGTERM
    int killGraceSeconds = 10;
    // Seconds a collective may stay pending before a rank writes its Python
    // stacks (MESHSCOPE_WATCHDOG_S for the ranks); unset: the agent's default.
    std::optional<double> watchdogSeconds;
    // The run id every rank records (one per job; the same on each node of a
    // multi-node job, so `merge` takes their folders); empty: a new one.
    std::string runId;
};

// What one rank process told record about its recording (the agent's
// status datagrams, capture/agent/interop/launcher_status.h).
struct RankStatus {
    int rank = -1;
    int64_t pid = 0;
    std::string file;          // its rank file; empty when it has none
    std::string notRecording;  // why it has none
    bool closed = false;       // it said how its recording ended
    uint64_t submitted = 0, written = 0;
    std::map<std::string, uint64_t> drops;  // reason -> records
};

struct RecordResult {
    int exitCode = 0;  // the job's: first failing rank's code, 128+signal if killed
    std::filesystem::path runDir;
    int rankFiles = 0;              // rank files the job left in runDir
    bool createdDir = false;        // runDir did not exist before
    std::vector<RankStatus> ranks;  // by rank, those that said anything
    bool dirDeleted = false;        // runDir was gone when the job ended
    // Records lost to the disk (full, I/O errors, no file): the warnings
    // were printed, and record exits kExitIncompleteRecording when the job
    // itself succeeded.
    bool lostRecords = false;
};
// `record`'s exit when the job succeeded but its recording is incomplete.
inline constexpr int kExitIncompleteRecording = 3;

// The command to record cannot be found (not on PATH, or not executable):
// nothing was started and no run directory made. Shells exit 127 for it.
struct CommandNotFound : std::runtime_error {
    using std::runtime_error::runtime_error;
};
inline constexpr int kExitCommandNotFound = 127;

// Throws std::runtime_error with a one-line message for a bad policy file,
// a run directory that holds a run already or cannot be written, and
// CommandNotFound for a command that is not there; in each case before
// anything starts.
RecordResult record(const RecordOptions& options, std::ostream& log);

// Why `id` cannot be a run id (it names files and goes into reports), or
// empty when it can: 1-64 of A-Z a-z 0-9 . _ -.
std::string runIdProblem(std::string_view id);

// The run directory record() uses when none is given.
std::filesystem::path defaultRunDir();

// True when the command is torchrun / torch.distributed.run (its launcher
// process must not record; its workers carry RANK).
bool isTorchrunCommand(const std::vector<std::string>& command);

}  // namespace meshscope::cli
