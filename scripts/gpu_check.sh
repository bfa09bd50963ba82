#!/usr/bin/env bash
# The GPU path of meshscope on a machine with an NVIDIA GPU (no Qt needed;
# torch with CUDA in its own Python, CMake and ninja). Builds core, the
# capture agent and the NCCL profiler plugin against that machine's torch,
# then runs, each part logged under LOG_DIR:
#   unit     the plugin's, the store's and the fingerprint tests (CUDA cases
#            included) through ctest, when GoogleTest is there
#   w1       capture scenarios s1-s4 with NCCL on the GPU, world size 1,
#            recorded with policy auto (attach() points NCCL_PROFILER_PLUGIN
#            at the staged plugin); checks the rank files: reconciled
#            incidents with fingerprints, the plugin loaded, NCCL collectives
#            tied to ops and carrying GPU times
#   w2       the same with 2 ranks on the one GPU if NCCL allows it, else
#            with gloo for the CPU tensors beside NCCL ("cpu:gloo,cuda:nccl")
#   bench    tests/bench/capture_overhead.py --device cuda
#
#   scripts/gpu_check.sh LOG_DIR [--deb PKG.deb]... [--no-gpu]
#
# --deb: a Debian package to unpack (dpkg-deb -x) into LOG_DIR/deps and
#        build against, for what the machine lacks (libsqlite3-dev,
#        libcli11-dev, libfmt-dev, nlohmann-json3-dev, libtomlplusplus-dev,
#        libgtest-dev); repeat for several.
# --no-gpu: configure, build and unit-test only (what a CPU machine can check).
# Environment: PYTHON (default: python3 on PATH), BUILD_DIR (default:
# build/gpu-check), JOBS (build jobs, default: all cores).
# Exit status: the number of failed parts (0: all passed or skipped).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    sed -n '16,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
(($# >= 1)) || usage
logs=$(mkdir -p "$1" && cd "$1" && pwd) || usage
shift
debs=()
gpu=1
while (($#)); do
    case "$1" in
        --deb) debs+=("$(realpath "$2")") && shift 2 ;;
        --no-gpu) gpu=0 && shift ;;
        *) usage ;;
    esac
done
python=${PYTHON:-$(command -v python3)}
build=${BUILD_DIR:-$root/build/gpu-check}
jobs=${JOBS:-$(nproc)}
plugin=$build/lib/libnccl-profiler-meshscope.so
scenarios=$root/tests/capture/scenarios
failed=0
summary=$logs/summary.txt
: >"$summary"

# report PART STATUS [DETAIL]: one line in summary.txt and on stdout
report() {
    printf '%-6s %-7s %s\n' "$1" "$2" "${3:-}" | tee -a "$summary"
    [[ $2 == FAILED ]] && failed=$((failed + 1))
    return 0
}

environment() {
    {
        date -u
        uname -a
        nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
        "$python" -c 'import sys, torch; print(sys.executable, "torch", torch.__version__,
"cuda", torch.version.cuda, "available", torch.cuda.is_available(),
"nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")' 2>&1
        cmake --version | head -1
        ninja --version
    } >"$logs/environment.txt"
}

# Unpacks the --deb packages; prints CMake arguments that point at them.
unpack_debs() {
    ((${#debs[@]})) || return 0
    local deps=$logs/deps deb
    mkdir -p "$deps"
    for deb in "${debs[@]}"; do
        if command -v dpkg-deb >/dev/null; then
            dpkg-deb -x "$deb" "$deps"
        else  # a .deb is an ar archive whose data.tar.* holds the files
            local member tmp
            member=$(ar t "$deb" | grep '^data\.tar') && tmp=$(mktemp -d) &&
                (cd "$tmp" && ar x "$deb" "$member") && tar -xf "$tmp/$member" -C "$deps"
            rm -rf "$tmp"
        fi
    done
    echo "-DCMAKE_PREFIX_PATH=$deps/usr"
    if [[ -f $deps/usr/include/sqlite3.h ]]; then
        echo "-DSQLite3_INCLUDE_DIR=$deps/usr/include"
        echo "-DSQLite3_LIBRARY=$(sqlite_library "$deps")"
    fi
}

# libsqlite3-dev's libsqlite3.so points at the runtime package's file: use
# the unpacked one if that is there too, else the machine's (Python's sqlite3
# module needs it, so it is installed).
sqlite_library() {
    local lib
    for lib in "$1"/usr/lib/*/libsqlite3.so "$1"/usr/lib/*/libsqlite3.so.0; do
        [[ -e $lib ]] && echo "$lib" && return
    done
    lib=$(ldconfig -p 2>/dev/null | awk '/libsqlite3\.so\.0 /{print $NF; exit}')
    echo "${lib:-/usr/lib/x86_64-linux-gnu/libsqlite3.so.0}"
}

configure_and_build() {
    local extra tests=ON
    mapfile -t extra < <(unpack_debs)
    local args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
        -DMESHSCOPE_PYTHON="$python" -DMESHSCOPE_BUILD_CAPTURE=ON -DMESHSCOPE_BUILD_UI=OFF
        -DMESHSCOPE_BUILD_CUDA=ON "${extra[@]}")
    if ! cmake "${args[@]}" -DMESHSCOPE_BUILD_TESTS=ON >"$logs/configure.log" 2>&1; then
        tests=OFF  # GoogleTest or Google Benchmark missing: build without the C++ tests
        cmake "${args[@]}" -DMESHSCOPE_BUILD_TESTS=OFF >>"$logs/configure.log" 2>&1 || return 1
    fi
    echo "$tests" >"$logs/tests_built"
    cmake --build "$build" -j "$jobs" >"$logs/build.log" 2>&1
}

unit_tests() {
    if [[ $(cat "$logs/tests_built") != ON ]]; then
        report unit SKIPPED "no GoogleTest/Google Benchmark (see configure.log); --deb libgtest-dev"
        return
    fi
    if ctest --test-dir "$build" -j "$jobs" --output-on-failure \
        -R '^(plugins\.|RoundTrip\.|capture\.DeviceTimerTest|capture\.fingerprint|capture\.agent)' >"$logs/unit.log" 2>&1; then
        report unit passed "$(grep -E 'tests passed' "$logs/unit.log")"
    else
        report unit FAILED "$(grep -E 'tests passed|tests failed' "$logs/unit.log")"
    fi
}

# record NAME NPROC BACKEND DEVICE SCENARIO: one recorded scenario run.
record() {
    local name=$1 nproc=$2 backend=$3 device=$4 scenario=$5
    local run=$logs/runs/$name/$scenario
    rm -rf "$run" && mkdir -p "$logs/runs/$name"
    (cd "$scenarios" && env PYTHONPATH="$build/python:$scenarios" \
        MESHSCOPE_SCENARIO_BACKEND="$backend" MESHSCOPE_SCENARIO_DEVICE="$device" \
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
        SCENARIO_OUT="$logs/runs/$name" timeout 600 \
        "$build/app/meshscope" record -o "$run" -n "$nproc" --policy auto -- \
        "$python" "$scenarios/$scenario.py") >"$logs/runs/$name/$scenario.log" 2>&1
}

# check_run RUN GPU: the recorded run's incidents were reconciled and
# fingerprinted; with GPU=1 NCCL collectives came through the plugin, tied
# to ops, with GPU times, and ops have GPU durations.
check_run() {
    PYTHONPATH="$build/python" "$python" - "$1" "$2" <<'EOF'
import sys
import meshscope

run, nccl = meshscope.load_run(sys.argv[1]), sys.argv[2] == "1"
problems = []
for rank in run["rank_details"]:
    incidents = rank["incidents"]
    if not incidents or any(i["outcome"] != "reconciled" for i in incidents):
        problems.append(f"rank {rank['rank']}: incidents not all reconciled")
    if any(not i["fingerprint"] for i in incidents):
        problems.append(f"rank {rank['rank']}: an incident without fingerprint")
    comms = [k for k in rank["meta"] if k.startswith("comm.")]
    kinds = {k: v for k, v in rank["collectives"].items() if k[:1].isupper()}  # NCCL's names
    print(f"rank {rank['rank']}: {len(incidents)} incidents, communicators {comms}, "
          f"NCCL collectives {kinds}, ops timed on the GPU {rank.get('op_device_times')}")
    loaded = rank["meta"].get("nccl_profiler", "")
    if nccl and not loaded.endswith("libnccl-profiler-meshscope.so"):
        problems.append(f"rank {rank['rank']}: attach() did not point NCCL at the plugin ({loaded})")
    if nccl and not comms:
        problems.append(f"rank {rank['rank']}: the plugin announced no communicator")
    if nccl and not kinds:
        problems.append(f"rank {rank['rank']}: no NCCL collective recorded")
    if nccl and kinds and not any(v.get("device_ns", 0) > 0 for v in kinds.values()):
        problems.append(f"rank {rank['rank']}: no NCCL collective with a GPU time")
    if nccl and kinds and not any(v.get("ops") for v in kinds.values()):
        problems.append(f"rank {rank['rank']}: no NCCL collective tied to an op")
    if nccl and not rank.get("op_device_times"):
        problems.append(f"rank {rank['rank']}: no op with a GPU duration")
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
EOF
}

# scenarios NAME NPROC BACKEND DEVICE NCCL: s1-s4 recorded and checked.
scenario_part() {
    local name=$1 nproc=$2 backend=$3 device=$4 nccl=$5 scenario bad=()
    for scenario in s1_input_batch s2_optimizer s3_dataloader s4_compile; do
        if ! record "$name" "$nproc" "$backend" "$device" "$scenario" ||
            ! check_run "$logs/runs/$name/$scenario" "$nccl" >>"$logs/runs/$name/$scenario.log" 2>&1; then
            bad+=("$scenario")
        fi
    done
    if ((${#bad[@]})); then
        report "$name" FAILED "$nproc rank(s) $backend on $device: ${bad[*]} (runs/$name/*.log)"
    else
        report "$name" passed "$nproc rank(s) $backend on $device"
    fi
}

# Whether NCCL runs 2 ranks on this machine's one GPU (it refuses duplicate
# GPUs in one communicator in most versions).
two_ranks_on_one_gpu() {
    cat >"$logs/two_ranks_probe.py" <<'EOF'
import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl")
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
assert t[0].item() == dist.get_world_size()
dist.destroy_process_group()
EOF
    timeout 180 "$python" -m torch.distributed.run --nproc-per-node 2 \
        "$logs/two_ranks_probe.py" >"$logs/two_ranks_probe.log" 2>&1
}

benchmark() {
    local world=$1
    if PYTHONPATH="$build/python" NCCL_PROFILER_PLUGIN="$plugin" timeout 1800 "$python" \
        "$root/tests/bench/capture_overhead.py" --device cuda --world "$world" --rounds 10 \
        >"$logs/bench.txt" 2>&1; then
        report bench passed "$world rank(s) on cuda: see bench.txt"
    else
        report bench FAILED "see bench.txt"
    fi
}

environment
if ! configure_and_build; then
    report build FAILED "see configure.log / build.log"
    exit "$failed"
fi
report build passed "$build (plugin: $plugin)"
unit_tests
if ((!gpu)); then
    for part in w1 w2 bench; do report "$part" SKIPPED "--no-gpu"; done
    exit "$failed"
fi
scenario_part w1 1 nccl cuda 1
if two_ranks_on_one_gpu; then
    scenario_part w2 2 nccl cuda 1
    benchmark 2
else
    report probe note "NCCL refused 2 ranks on one GPU (two_ranks_probe.log): w2 uses gloo"
    scenario_part w2 2 cpu:gloo,cuda:nccl cpu 0
    benchmark 1
fi
exit "$failed"
