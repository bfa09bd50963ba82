#!/usr/bin/env bash
# The GPU path of meshscope on a machine with an NVIDIA GPU (no Qt needed;
# torch with CUDA in its own Python, CMake and ninja), with that machine's
# default compiler. Builds core, the capture agent and the NCCL profiler
# plugin against that machine's torch, then runs, each part logged under
# LOG_DIR and timed in summary.txt:
#   unit     the plugin's, the store's, the fingerprint and the agent's tests
#            (CUDA cases included), the CUDA-header and static-libstdc++
#            checks, through ctest, when GoogleTest is there
#   w1       capture scenarios s1-s4 with NCCL on the GPU, world size 1,
#            recorded with policy auto, side by side; checks the rank files:
#            reconciled incidents with fingerprints, the plugin loaded and
#            its communicators announced, torch-level collectives recorded,
#            ops with GPU durations
#   c10d     direct c10d collectives (all_reduce, broadcast, barrier,
#            all_to_all_single) and a redistribution on NCCL, meshscope
#            attached through the Python API after an eager NCCL init
#            (scripts/gpu/c10d_late_attach.py)
#   w2       the scenarios with 2 ranks: NCCL on two GPUs, else (NCCL
#            refuses two ranks on one GPU) gloo for CPU tensors beside NCCL
#   tp       tensor parallelism on NCCL at world size 1 (scenario
#            h6_slow_training; with --examples DIR also pytorch/examples'
#            tensor_parallel_example.py and sequence_parallel_example.py,
#            their even-GPU assertion removed): `meshscope check` must
#            report 0 findings (no false hang from collectives NCCL
#            completes on the device after wait() returned)
#   hang     an all_reduce that waits on the device behind a sleeping kernel
#            (scripts/gpu/nccl_device_hang.py): the watchdog reports it at
#            its line while wait() has long returned on the host, and its
#            record spans the wait
#   (w1, c10d, w2, tp and hang run side by side; the benchmark alone after them)
#   bench    tests/bench/capture_overhead.py --device cuda: uninstrumented,
#            torch.profiler, meshscope level dtensor (GPU op timing sampled,
#            and off) and the uninstrumented loop again (an A/A block: the
#            run's noise floor), side by side, --rounds rounds (--bench-only adds
#            capture_overhead.py's configuration 5, timing every op), with
#            what each adds to forward, backward and the optimizer step
#            (--parts)
#   cache    tests/bench/hook_cache.py: the agent's ns per DTensor op with
#            its caches cold (an op alone between 16 MiB of other work) and
#            warm (8 in a row), on this machine's CPU (CPU tensors: runs
#            with --no-gpu too)
#
#   scripts/gpu_check.sh LOG_DIR [--debs DIR] [--deb PKG.deb]... [--no-gpu]
#                        [--parts LIST] [--rounds N] [--steps N] [--bench-only LIST]
#                        [--examples DIR]
#   scripts/gpu_check.sh --fetch-debs DIR     (on a Debian 12 machine, first)
#
# --fetch-debs: downloads (apt-get download) the Debian packages a GPU
#        machine without them needs into DIR: SQLite, CLI11, fmt, toml++,
#        nlohmann-json headers and runtimes, GoogleTest, Google Benchmark.
# --debs DIR: unpacks every .deb in DIR (dpkg-deb -x, or ar + tar) into
#        LOG_DIR/deps and builds against it; --deb one package, repeatable.
# --no-gpu: configure, build and unit-test only (what a CPU machine can check).
# --parts: the comma-separated parts to run after the build (default all:
#        unit,w1,c10d,w2,tp,hang,bench,cache).
# --examples DIR: a checkout of pytorch/examples, for part tp.
# --rounds, --steps: rounds of the overhead benchmark and steps per block
#        (default 100 x 40: a 95 % interval of about +-3 % at 6 ms a step;
#        60 rounds gave +-4 % on an H200).
# --bench-only LIST: capture_overhead.py's configurations (default 2,3,6,14).
# Environment: PYTHON (default: python3 on PATH), BUILD_DIR (default:
# build/gpu-check), JOBS (build jobs, default: all cores), CXX (default:
# the machine's).
# Exit status: the number of failed parts (0: all passed or skipped).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    sed -n '37,58p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

fetch_debs() {
    local dir=$1
    mkdir -p "$dir" && cd "$dir" || exit 2
    apt-get download libsqlite3-dev libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev \
        libtomlplusplus-dev libtomlplusplus3 libgtest-dev libgmock-dev googletest \
        libbenchmark-dev libbenchmark1debian || exit 1
    ls -1 "$dir"/*.deb
}

(($# >= 1)) || usage
if [[ $1 == --fetch-debs ]]; then
    (($# == 2)) || usage
    fetch_debs "$2"
    exit
fi
logs=$(mkdir -p "$1" && cd "$1" && pwd) || usage
shift
debs=()
gpu=1
rounds=100
bench_only=2,3,6,14
steps=40
parts=unit,w1,c10d,w2,tp,hang,bench,cache
examples=
while (($#)); do
    case "$1" in
        --deb) debs+=("$(realpath "$2")") && shift 2 ;;
        --debs) for deb in "$2"/*.deb; do debs+=("$(realpath "$deb")"); done && shift 2 ;;
        --no-gpu) gpu=0 && shift ;;
        --rounds) rounds=$2 && shift 2 ;;
        --bench-only) bench_only=$2 && shift 2 ;;
        --steps) steps=$2 && shift 2 ;;
        --parts) parts=$2 && shift 2 ;;
        --examples) examples=$(realpath "$2") && shift 2 ;;
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
part_start=$SECONDS

# report PART STATUS [DETAIL]: one line in summary.txt and on stdout, with
# the seconds the part took
report() {
    printf '%-6s %-7s %4ss  %s\n' "$1" "$2" "$((SECONDS - part_start))" "${3:-}" | tee -a "$summary"
    [[ $2 == FAILED ]] && failed=$((failed + 1))
    part_start=$SECONDS
    return 0
}

environment() {
    {
        date -u
        uname -a
        nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
        # what the agent's per-op costs depend on: the CPU, its caches, and
        # whether clock_gettime reads the TSC in user space (clocksource tsc)
        # or costs a system call
        lscpu 2>&1 | grep -E "^(Model name|CPU\(s\)|L2 cache|L3 cache|Hypervisor vendor)" || true
        echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
        "$python" -c 'import sys, torch; print(sys.executable, "torch", torch.__version__,
"cuda", torch.version.cuda, "available", torch.cuda.is_available(),
"nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")' 2>&1
        cmake --version | head -1
        ninja --version
        echo "CXX=${CXX:-} ($(command -v "${CXX:-c++}")): $("${CXX:-c++}" --version | head -1)"
        command -v nvcc && nvcc --version | tail -1
    } >"$logs/environment.txt" 2>&1
}

# Unpacks the debs; prints CMake arguments that point at them.
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
        report unit SKIPPED "no GoogleTest/Google Benchmark (see configure.log); --debs DIR"
        return
    fi
    if ctest --test-dir "$build" -j "$jobs" --output-on-failure \
        -R '^(plugins\.|RoundTrip\.|cmake\.|capture\.DeviceTimerTest|capture\.fingerprint|capture\.agent|capture\.static_libstdcxx)' \
        >"$logs/unit.log" 2>&1; then
        report unit passed "$(grep -E 'tests passed' "$logs/unit.log")"
    else
        report unit FAILED "$(grep -E 'tests passed|tests failed' "$logs/unit.log")"
    fi
}

# record NAME NPROC BACKEND DEVICE SCENARIO: one recorded scenario run.
record() {
    local name=$1 nproc=$2 backend=$3 device=$4 scenario=$5
    local run=$logs/runs/$name/$scenario
    rm -rf "$run" && mkdir -p "$logs/runs/$name/$scenario.out"
    (cd "$scenarios" && env PYTHONPATH="$build/python:$scenarios" \
        MESHSCOPE_SCENARIO_BACKEND="$backend" MESHSCOPE_SCENARIO_DEVICE="$device" \
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
        SCENARIO_OUT="$logs/runs/$name/$scenario.out" timeout 300 \
        "$build/app/meshscope" record -o "$run" -n "$nproc" --policy auto -- \
        "$python" "$scenarios/$scenario.py") >"$logs/runs/$name/$scenario.log" 2>&1
}

# check_run RUN NCCL: the recorded run's incidents were reconciled and
# fingerprinted; with NCCL=1 the plugin was loaded and announced its
# communicators, torch-level collectives were recorded (NCCL itself reports
# nothing for a one-rank communicator), ops have GPU durations.
check_run() {
    PYTHONPATH="$build/python" "$python" - "$1" "$2" <<'EOF' || return 1
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
    collectives = rank["collectives"]
    library = {k: v for k, v in collectives.items() if k[:1].isupper()}  # NCCL's own names
    print(f"rank {rank['rank']}: {len(incidents)} incidents, communicators {comms}, "
          f"collectives {collectives}, NCCL-only {library}, "
          f"ops timed on the GPU {rank.get('op_device_times')}")
    loaded = rank["meta"].get("nccl_profiler", "")
    if nccl and not loaded.endswith("libnccl-profiler-meshscope.so"):
        problems.append(f"rank {rank['rank']}: attach() did not point NCCL at the plugin ({loaded})")
    if nccl and not comms:
        problems.append(f"rank {rank['rank']}: the plugin announced no communicator")
    if not collectives:
        problems.append(f"rank {rank['rank']}: no collective recorded")
    if collectives and not any(v.get("ops") for v in collectives.values()):
        problems.append(f"rank {rank['rank']}: no collective tied to an op")
    if nccl and not rank.get("op_device_times"):
        problems.append(f"rank {rank['rank']}: no op with a GPU duration")
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
EOF
    # and what `check` finds: nothing but what the policy reconciled
    "$build/app/meshscope" check "$1"
}

# scenarios NAME NPROC BACKEND DEVICE NCCL: s1-s4 recorded side by side, checked.
scenario_part() {
    local name=$1 nproc=$2 backend=$3 device=$4 nccl=$5 scenario bad=() pids=()
    local all=(s1_input_batch s2_optimizer s3_dataloader s4_compile)
    for scenario in "${all[@]}"; do
        record "$name" "$nproc" "$backend" "$device" "$scenario" &
        pids+=($!)
    done
    for i in "${!all[@]}"; do
        scenario=${all[$i]}
        if ! wait "${pids[$i]}" ||
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

# Direct c10d collectives on NCCL (scripts/gpu/c10d_late_attach.py), recorded
# by `meshscope record` (the plugin loaded: the communicator is announced)
# and attached late through the Python API after an eager NCCL init (the
# plugin cannot load then: the meta says why). Either way every collective
# is recorded with its op, call site and bytes.
c10d_part() {
    local script=$root/scripts/gpu/c10d_late_attach.py bad=() way
    rm -rf "$logs/runs/c10d-record" "$logs/runs/c10d-late" && mkdir -p "$logs/runs"
    (cd "$logs" && PYTHONPATH="$build/python" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
        timeout 300 "$build/app/meshscope" record -o "$logs/runs/c10d-record" -n 1 -- \
        "$python" "$script" "$logs/runs/c10d-record") >"$logs/c10d-record.log" 2>&1
    (cd "$logs" && PYTHONPATH="$build/python" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
        timeout 300 "$python" -m torch.distributed.run --standalone --nproc-per-node 1 \
        "$script" "$logs/runs/c10d-late") >"$logs/c10d-late.log" 2>&1
    for way in record late; do
        PYTHONPATH="$build/python" "$python" - "$logs/c10d-$way.log" "$way" \
            >>"$logs/c10d-$way.log" 2>&1 <<'EOF' || bad+=("$way")
import json
import sys

lines = [l for l in open(sys.argv[1], errors="replace") if l.startswith('{"collectives"')]
if not lines:
    sys.exit("the script printed no run facts: it failed (see above)")
facts, late = json.loads(lines[-1]), sys.argv[2] == "late"
c = facts["collectives"]
problems = []
for kind, op, count in (("all_reduce", "c10d::allreduce_", 3), ("broadcast", "c10d::broadcast_", 1),
                        ("barrier", "c10d::barrier", 1)):
    entry = c.get(kind, {})
    if entry.get("ops", {}).get(op) != count:
        problems.append(f"{kind}: want {count} tied to {op}, got {entry}")
    if not any("c10d_late_attach.py:" in site for site in entry.get("sites", {})):
        problems.append(f"{kind}: no call site in c10d_late_attach.py: {entry}")
if c.get("all_reduce", {}).get("bytes", 0) < 3 * 4 << 20:
    problems.append(f"all_reduce bytes: {c.get('all_reduce')}")
plugin = facts["nccl_profiler"]
if late:  # NCCL made its communicator before attach() pointed it at the plugin
    if "before attach()" not in plugin:
        problems.append(f"the meta does not say why the plugin is off: {plugin}")
else:
    if not plugin.endswith("libnccl-profiler-meshscope.so"):
        problems.append(f"plugin: {plugin}")
    if not facts["communicators"]:
        problems.append("the plugin announced no communicator")
timed = {k: v["device_ns"] for k, v in c.items() if v.get("device_ns")}
print(f"{sys.argv[2]}: kinds {sorted(c)}, communicators {len(facts['communicators'])}, "
      f"GPU times from NCCL: {timed or 'none (NCCL reports no events for a one-rank communicator)'}")
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
EOF
    done
    if ((${#bad[@]})); then
        report c10d FAILED "${bad[*]}: see c10d-*.log"
    else
        report c10d passed "$(grep -h -E '^(record|late): kinds' "$logs"/c10d-*.log | tr '\n' ' ')"
    fi
}

# Tensor parallelism on NCCL, one rank: recorded, then `check` (0 findings).
tp_part() {
    local bad=() runs=(h6_slow_training) name script dir=$logs/runs/tp
    mkdir -p "$dir" && cp "$scenarios/h6_slow_training.py" "$dir/"
    if [[ -n $examples ]]; then
        for name in tensor_parallel_example sequence_parallel_example; do
            script=$examples/distributed/tensor_parallelism/$name.py
            if [[ ! -f $script ]]; then
                bad+=("$name (not in $examples)")
                continue
            fi
            cp --update=none "$(dirname "$script")"/*.py "$dir/"  # the shared helpers (patched files kept)
            # one GPU here: neither the 2-GPU check nor the even world size
            sed -i -e 's/^_min_gpu_count = 2$/_min_gpu_count = 1/' \
                -e 's/_world_size % 2 == 0/True/' "$dir/$name.py"
            runs+=("$name")
        done
    fi
    for name in "${runs[@]}"; do
        rm -rf "$dir/$name.run"
        if ! (cd "$dir" && env PYTHONPATH="$build/python:$scenarios" STEPS=10 STEP_S=0 \
            MESHSCOPE_SCENARIO_BACKEND=nccl MESHSCOPE_SCENARIO_DEVICE=cuda timeout 300 \
            "$build/app/meshscope" record -o "$dir/$name.run" -n 1 -- "$python" "$dir/$name.py") \
            >"$dir/$name.log" 2>&1 ||
            ! "$build/app/meshscope" check "$dir/$name.run" >>"$dir/$name.log" 2>&1; then
            bad+=("$name")
        elif grep -q 'Unable to locate sufficient' "$dir/$name.log" ||
            ! PYTHONPATH="$build/python" "$python" -c 'import sys, meshscope
ranks = meshscope.load_run(sys.argv[1])["rank_details"]
sys.exit(0 if ranks and all(r.get("op_names") for r in ranks) else "no ops recorded")' "$dir/$name.run" \
                >>"$dir/$name.log" 2>&1; then
            bad+=("$name (it ran nothing)")
        fi
    done
    if ((${#bad[@]})); then
        report tp FAILED "${bad[*]}: see runs/tp/*.log"
    else
        report tp passed "${runs[*]}: recorded on NCCL, check: 0 findings"
    fi
}

# A collective that hangs on the device: the watchdog must see it.
hang_part() {
    local run=$logs/runs/hang script=$root/scripts/gpu/nccl_device_hang.py
    rm -rf "$run" && mkdir -p "$logs/runs"
    (cd "$logs" && PYTHONPATH="$build/python" timeout 300 "$build/app/meshscope" record -o "$run" \
        -n 1 --watchdog 3 -- "$python" "$script") >"$logs/hang.log" 2>&1
    if PYTHONPATH="$build/python" "$python" - "$run" "$logs/hang.log" "$script" \
        >>"$logs/hang.log" 2>&1 <<'EOF'; then
import json
import sqlite3
import sys

run, log, script = sys.argv[1:]
text = open(log, errors="replace").read()
facts = [l for l in text.splitlines() if l.startswith('{"host_wait_s"')]
if not facts:
    sys.exit("the script printed no facts: it failed (see above)")
facts = json.loads(facts[-1])
line = next(i + 1 for i, l in enumerate(open(script)) if "HANG ON THE DEVICE" in l)
problems = []
if "meshscope watchdog: rank 0: all_reduce" not in text:
    problems.append("the watchdog did not report the all_reduce pending on the device")
if f"nccl_device_hang.py:{line}" not in text:
    problems.append(f"the watchdog did not name line {line}")
db = sqlite3.connect(f"file:{run}/rank-00000.msdb?mode=ro", uri=True)
rows = db.execute("SELECT c.state, (c.end_ns - c.start_ns) / 1e9 FROM collectives c JOIN strings k "
                  "ON k.id = c.kind_id WHERE k.text = 'all_reduce' ORDER BY c.seq").fetchall()
if len(rows) < 2 or rows[-1][0] != 0 or rows[-1][1] < 0.5 * facts["device_s"]:
    problems.append(f"the all_reduce is not recorded completed over its time on the device: {rows}")
print(f"host wait {facts['host_wait_s']:.3f} s, on the device {facts['device_s']:.1f} s, "
      f"recorded {rows[-1] if rows else None}")
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
EOF
        report hang passed "$(grep -E '^host wait' "$logs/hang.log")"
    else
        report hang FAILED "see hang.log"
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
    timeout 90 "$python" -m torch.distributed.run --standalone --nproc-per-node 2 \
        "$logs/two_ranks_probe.py" >"$logs/two_ranks_probe.log" 2>&1
}

benchmark() {
    local world=$1
    if PYTHONPATH="$build/python" timeout 900 "$python" \
        "$root/tests/bench/capture_overhead.py" --device cuda --world "$world" \
        --rounds "$rounds" --steps "$steps" --only "$bench_only" --parts \
        --json "$logs/bench.json" \
        >"$logs/bench.txt" 2>&1; then
        report bench passed "$world rank(s) on cuda, $rounds rounds of $steps steps: see bench.txt"
    else
        report bench FAILED "see bench.txt"
    fi
}

# The agent's per-op time, cold against warm caches, on this CPU: ns per
# DTensor op for 1, 2, 4 and 8 ops in a row between cache-evicting work.
cache_part() {
    if PYTHONPATH="$build/python" timeout 300 "$python" "$root/tests/bench/hook_cache.py" \
        >"$logs/cache.txt" 2>&1; then
        report cache passed "$(awk '$1 ~ /^[0-9]+$/ && NF > 3 {
            printf "%s%s in a row %s ns", sep, $1, $2; sep = ", " }' "$logs/cache.txt") a DTensor op"
    else
        report cache FAILED "see cache.txt"
    fi
}

environment
if ! configure_and_build; then
    report build FAILED "see configure.log / build.log"
    exit "$failed"
fi
report build passed "$build (plugin: $plugin)"
wants() { [[ ",$parts," == *",$1,"* ]]; }
if wants unit; then unit_tests; fi
if ((!gpu)); then
    for part in w1 c10d w2 tp hang bench; do report "$part" SKIPPED "--no-gpu"; done
    if wants cache; then cache_part; fi
    exit "$failed"
fi
# The recorded runs side by side (each reports its own line), then the
# benchmark alone on the machine. NCCL refuses two ranks on one GPU, so with
# one GPU w2 runs gloo for the CPU tensors beside NCCL without probing.
gpus=$("$python" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
w2=(2 cpu:gloo,cuda:nccl cpu 0)
if ((gpus >= 2)) || two_ranks_on_one_gpu; then
    w2=(2 nccl cuda 1)
else
    report probe note "one GPU: NCCL refuses 2 ranks on it, w2 uses gloo beside NCCL"
fi
pids=()
if wants w1; then scenario_part w1 1 nccl cuda 1 >"$logs/w1.line" & pids+=($!); fi
if wants c10d; then c10d_part >"$logs/c10d.line" & pids+=($!); fi
if wants w2; then scenario_part w2 "${w2[@]}" >"$logs/w2.line" & pids+=($!); fi
if wants tp; then tp_part >"$logs/tp.line" & pids+=($!); fi
if wants hang; then hang_part >"$logs/hang.line" & pids+=($!); fi
((${#pids[@]})) && wait "${pids[@]}"
for part in w1 c10d w2 tp hang; do
    wants $part && [[ -f $logs/$part.line ]] || continue
    cat "$logs/$part.line"
    grep -q ' FAILED ' "$logs/$part.line" && failed=$((failed + 1))
done
part_start=$SECONDS
if wants bench; then benchmark $((gpus >= 2 ? 2 : 1)); fi
if wants cache; then cache_part; fi
exit "$failed"
