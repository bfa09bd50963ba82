#pragma once

// The agent's settings that travel through the environment (a user's
// `MESHSCOPE_WATCHDOG_S=60 torchrun ...`, or `meshscope record` passing its
// options to the job's processes), with their defaults: one table, read by
// the CLI, the agent's C++ and the Python package alike
// (meshscope._capture.settings(), tests/capture/test_single_sources.py).

#include <array>
#include <string_view>

namespace meshscope {

struct Setting {
    std::string_view key;       // "watchdog_s": the Python package's name for it
    std::string_view env;       // "MESHSCOPE_WATCHDOG_S"
    std::string_view fallback;  // the default, as its variable would say it; "" none
    std::string_view meaning;   // one line, for --help and docs
};

inline constexpr std::array kSettings = std::to_array<Setting>({
    {"run_dir", "MESHSCOPE_RUN_DIR", "",
     "the run folder the ranks record into; set: the loader attaches at interpreter start"},
    {"run_id", "MESHSCOPE_RUN_ID", "", "the run id every rank records (default: a new one)"},
    {"policy", "MESHSCOPE_POLICY", "observe", "the policy name or TOML file"},
    {"level", "MESHSCOPE_LEVEL", "dtensor", "what is recorded: dtensor or all"},
    // the heartbeat timeout of PyTorch's NCCL watchdog
    // (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC), under the process groups' 10 min
    {"watchdog_s", "MESHSCOPE_WATCHDOG_S", "480",
     "seconds a collective may stay pending before its stacks are written (0: no watchdog)"},
    {"device_timing", "MESHSCOPE_DEVICE_TIMING", "every:10",
     "which steps' ops get GPU durations: every:N, all or off"},
    {"replica_check", "MESHSCOPE_REPLICA_CHECK", "every:50",
     "which optimizer steps fingerprint the state ranks must hold equal (replica drift): "
     "every:N, all or off"},
    {"max_file_bytes", "MESHSCOPE_MAX_FILE_BYTES", "", "a cap on each rank file's size"},
    {"queue_capacity", "MESHSCOPE_QUEUE_CAPACITY", "", "records the writer's queue holds"},
    {"hook", "MESHSCOPE_HOOK", "dispatcher",
     "how ops are intercepted: dispatcher (the key hook) or mode (a TorchDispatchMode)"},
    {"attach", "MESHSCOPE_ATTACH", "always",
     "which processes the loader attaches: always, or rank-env (those with RANK set)"},
    {"command", "MESHSCOPE_COMMAND", "", "the job's command line as record shows it (JSON)"},
    {"launcher_pid", "MESHSCOPE_LAUNCHER_PID", "",
     "record's process: the job's processes die with it"},
    {"attached_pid", "MESHSCOPE_ATTACHED_PID", "",
     "the process that attached: its spawned children do not"},
    {"nccl_profiler", "MESHSCOPE_NCCL_PROFILER", "1",
     "0: attach() leaves NCCL_PROFILER_PLUGIN alone (no NCCL GPU times)"},
    {"kill_grace", "MESHSCOPE_KILL_GRACE", "",
     "seconds record waits after SIGTERM before SIGKILL (record --kill-grace)"},
    {"pythonpath", "MESHSCOPE_PYTHONPATH", "",
     "where record finds the Python package with the loader"},
    {"status_socket", "MESHSCOPE_STATUS_SOCKET", "",
     "record's socket: each rank says there whether it records, and what it dropped"},
    {"fault_disk", "MESHSCOPE_FAULT_DISK", "",
     "tests only: rank files' writes fail like a full or read-only disk "
     "(full-after=BYTES[,free-after=FAILS] or readonly-after=BYTES; -when=PATH: once PATH exists)"},
    {"fault", "MESHSCOPE_FAULT", "",
     "tests only: the phase of the agent's op handling that fails on purpose (before, "
     "provenance, record, reconcile)"},
    {"bench_hook", "MESHSCOPE_BENCH_HOOK", "",
     "benchmarks only: how far the dispatcher hook's work on an op goes (off, pass, scan, "
     "unrecorded), to measure what each part costs; records less than the agent does"},
    {"bench_boxed", "MESHSCOPE_BENCH_BOXED", "",
     "benchmarks only: 1 sends every op through the dispatcher hook's boxed fallback, none "
     "through its own kernels of common ops, to measure what those save"},
});

// The setting named `key`; a key the table lacks does not compile.
consteval const Setting& setting(std::string_view key) {
    for (const Setting& s : kSettings)
        if (s.key == key) return s;
    throw "meshscope: no such setting";
}

// The number a default ends with ("480", "every:10"), for C++ defaults.
consteval long long defaultNumber(const Setting& s) {
    std::string_view text = s.fallback;
    size_t start = text.find_last_not_of("0123456789");
    start = start == std::string_view::npos ? 0 : start + 1;
    if (start == text.size()) throw "meshscope: this setting has no numeric default";
    long long n = 0;
    for (char c : text.substr(start))
        n = n * 10 + (c - '0');
    return n;
}

}  // namespace meshscope
