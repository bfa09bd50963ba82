"""Capture overhead in instructions: the training loop of capture_overhead.py
under Valgrind's callgrind, which counts every instruction executed, so the
ratios do not move with the machine's load (step-time ratios on a shared
2-core machine do, by +-5-10 %). Instructions are not time: cache misses,
page faults, the kernel and waiting are not in them; read these next to
capture_overhead.py's step times, not instead of them.

    .venv/bin/python tests/bench/capture_instructions.py [--steps 4] [--warm 12]
        [--dim 256 --hidden 1024 --batch 32 --layers 2] [--only 3,4] [--cache-sim]

For each configuration, 2 ranks (gloo, CPU) start under callgrind with
instrumentation off, build the model, train 5 steps uninstrumented, enter
the configuration (meshscope: attach()), run --warm steps, and count the
instructions of the next --steps steps, per thread. Twelve warm steps keep
attach()'s transient out of the count: the agent's caches fill in the first
steps, and the Python objects they keep make one more garbage collection
fall in steps 4-7 after attach() (3 collections there instead of 2, about
0.3 M instructions a step more), while over 60 steps the collections are
the same with and without meshscope (gc.callbacks). Prints, per
configuration, rank 0's instructions per step and their ratio to the
uninstrumented loop for the training thread and for the whole process (all
its threads: gloo's, meshscope's writer). The
whole-process count includes meshscope's writer thread, which commits every
200 ms of wall time; under callgrind a step takes about 200 times longer, so
the writer commits about 200 times more often per step than it would
natively and its share is overstated.

--cache-sim adds callgrind's cache and branch-predictor simulation and a
column of estimated cycles for the training thread: instructions + 10 per
L1 miss + 100 per last-level miss + 15 per mispredicted branch (the weights
of callgrind's documentation). Code that runs between torch's kernels finds
its instructions and data evicted; the estimate counts that, instructions
alone do not. The simulated caches are not this machine's (the estimate is
still deterministic, which step times on a shared machine are not). Needs
valgrind (callgrind.h) and a C compiler; takes about 2 minutes per
configuration, 3 with --cache-sim."""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from capture_overhead import (CONFIGURATIONS, add_model_arguments, rank_environments,  # noqa: E402
                              selected, training)
CONTROL_C = """#include <valgrind/callgrind.h>
void meshscope_cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void meshscope_cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
"""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=4, help="counted steps per configuration")
    p.add_argument("--warm", type=int, default=12, help="steps after entering, not counted")
    add_model_arguments(p)
    p.add_argument("--only", default="", help="comma-separated configuration numbers "
                   "(0 = no instrumentation, always run), e.g. --only 3")
    p.add_argument("--cache-sim", action="store_true",
                   help="simulate caches and branch prediction; print estimated cycles")
    p.add_argument("--last-level", type=int, default=0, metavar="BYTES",
                   help="with --cache-sim: the simulated last-level cache (default: the\n"
                        "host's L3, as callgrind detects it; this machine's per-core L2\n"
                        "is 1048576)")
    p.add_argument("--by-function", type=int, default=0, metavar="N",
                   help="also print, for each configuration, the N functions of the\n"
                        "training thread that add the most estimated cycles (with\n"
                        "--cache-sim) or instructions a step, and the total by shared\n"
                        "object (callgrind_annotate's self costs)")
    p.add_argument("--rank-config", help=argparse.SUPPRESS)  # inside a rank
    p.add_argument("--control", help=argparse.SUPPRESS)
    return p.parse_args()


def rank_main(args: argparse.Namespace) -> None:
    import ctypes

    import torch.distributed as dist

    args.device = "cpu"
    step, _, configs = training(args)
    make, per_step = configs[args.rank_config]
    outer = contextlib.nullcontext if per_step else make
    inner = make if per_step else contextlib.nullcontext
    control = ctypes.CDLL(args.control)
    for _ in range(5):
        step()
    with outer():
        for _ in range(args.warm):
            with inner():
                step()
        dist.barrier()
        control.meshscope_cg_start()
        for _ in range(args.steps):
            with inner():
                step()
        control.meshscope_cg_stop()
        dist.barrier()
    dist.destroy_process_group()


def build_control(workdir: str) -> str:
    if not os.path.exists("/usr/include/valgrind/callgrind.h") or not shutil.which("valgrind"):
        sys.exit("capture_instructions.py: needs valgrind and its callgrind.h "
                 "(apt-get install valgrind)")
    source = os.path.join(workdir, "cg_control.c")
    library = os.path.join(workdir, "libcg_control.so")
    with open(source, "w") as f:
        f.write(CONTROL_C)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", source, "-o", library],
                   check=True)
    return library


def event_totals(path: str) -> dict[str, int]:
    """The totals line of a callgrind dump, by event name (Ir, I1mr, ...)."""
    with open(path) as f:
        text = f.read()
    events = re.search(r"^events: (.+)$", text, re.MULTILINE)
    values = re.search(r"^totals: (.+)$", text, re.MULTILINE)
    if not events or not values:
        return {}
    return dict(zip(events.group(1).split(), (int(v) for v in values.group(1).split())))


def totals(path: str) -> int:
    return event_totals(path).get("Ir", 0)


# Estimated cycles from simulated events (callgrind's documented weights).
CYCLE_WEIGHTS = {"Ir": 1, "I1mr": 10, "D1mr": 10, "D1mw": 10, "ILmr": 100, "DLmr": 100,
                 "DLmw": 100, "Bcm": 15, "Bim": 15}


def estimated_cycles(events: dict[str, int]) -> int:
    return sum(weight * events.get(name, 0) for name, weight in CYCLE_WEIGHTS.items())


def tag_of(name: str) -> str:
    """A configuration's name as it appears in its dumps' file names."""
    return re.sub(r"\W+", "_", name)


def training_dump(out_prefix: str) -> str:
    """The training thread's counted dump: the one cg_stop took (part 1,
    thread 01)."""
    return out_prefix + ".1-01"


def counted(out_prefix: str, cache_sim: bool) -> tuple[int, int, int]:
    """(training thread, whole process) instructions while counting, and the
    training thread's estimated cycles (0 without --cache-sim). The training
    thread's are in training_dump(); the other threads' in the dumps
    callgrind writes at exit (instrumentation was off from cg_stop on, so
    they hold the counted steps only)."""
    events = event_totals(training_dump(out_prefix))
    main = events.get("Ir", 0)
    others = sum(totals(p) for p in glob.glob(out_prefix + "-*"))
    return main, main + others, estimated_cycles(events) if cache_sim else 0


def function_costs(path: str) -> dict[str, tuple[str, dict[str, int]]]:
    """Self cost of each function in a callgrind dump, by event, keyed by
    its file:function as callgrind_annotate prints it, with the shared
    object named beside it. Callgrind keeps one entry per function name: a
    symbol that several libraries hold (an intrusive_ptr method, std::vector
    of IValue, pybind11's dispatcher) is one entry, named after whichever
    object ran it first in that run, so the object says little for such
    names and is not part of the key (keyed by it, a function that moved
    from libtorch_cpu to libtorch_python between two runs read as +100 k in
    one and -100 k in the other)."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", path],
                         capture_output=True, text=True, check=True).stdout
    events: list[str] = []
    costs: dict[str, tuple[str, dict[str, int]]] = {}
    for line in out.splitlines():
        if line.startswith("Events shown:"):
            events = line.split(":", 1)[1].split()
            continue
        if not events or "PROGRAM TOTALS" in line:
            continue
        words = re.sub(r"\(\s*[\d.]+%\)", " ", line).split()
        values = []
        while len(values) < len(events) and len(values) < len(words) and \
                re.fullmatch(r"[\d,]+|\.", words[len(values)]):
            word = words[len(values)]
            values.append(0 if word == "." else int(word.replace(",", "")))
        if len(values) != len(events) or len(words) == len(values):
            continue
        name = " ".join(words[len(values):])
        shared = re.search(r"\[(/[^\[\]]*)\]$", name)  # the object's absolute path
        obj = os.path.basename(shared.group(1)) if shared else "(object not named)"
        name = re.sub(r"'\d+", "", name[:shared.start()] if shared else name).strip()
        entry = costs.setdefault(name, (obj, dict.fromkeys(events, 0)))[1]
        for event, value in zip(events, values):
            entry[event] += value
    return costs


def whose(name: str, obj: str) -> str:
    """Whose code a function is: the agent's (its extension, or a function
    of meshscope's types inlined from a header, which callgrind names by
    the header), the interpreter's, or the rest (torch, libc, ...)."""
    if obj.startswith("_capture.") or "meshscope::" in name:
        return "meshscope's code"
    if obj.startswith("libpython") or "/Python/" in name or "/Objects/" in name:
        return "Python's interpreter"
    return "torch, libc and the rest"


# The events a split by kind shows: instructions, first-level misses, and
# last-level misses (instruction fetches and data apart).
KINDS = [("instructions", ("Ir",)), ("L1 misses", ("I1mr", "D1mr", "D1mw")),
         ("LL misses, code", ("ILmr",)), ("LL misses, data", ("DLmr", "DLmw"))]


def print_by_function(base_dump: str, dump: str, steps: int, top: int, cycles: bool) -> None:
    """What a configuration adds to the uninstrumented loop, per step, by
    whose code it is, by shared object and by function (self costs of the
    training thread)."""
    def cost(events: dict[str, int]) -> int:
        return estimated_cycles(events) if cycles else events.get("Ir", 0)
    base, new = function_costs(base_dump), function_costs(dump)
    empty: dict[str, int] = {}
    added: dict[str, tuple[str, dict[str, float]]] = {}
    for name in base.keys() | new.keys():
        obj = (base.get(name) or new[name])[0]  # the uninstrumented run's, where it ran
        b, n = base.get(name, ("", empty))[1], new.get(name, ("", empty))[1]
        delta = {e: (n.get(e, 0) - b.get(e, 0)) / steps for e in set(b) | set(n)}
        delta["cost"] = (cost(n) - cost(b)) / steps
        added[name] = (obj, delta)
    unit = "est. cycles" if cycles else "instructions"
    print(f"  added {unit} a step, by whose code it is:")
    groups: dict[str, dict[str, float]] = {}
    for name, (obj, delta) in added.items():
        group = groups.setdefault(whose(name, obj), {})
        for event, value in delta.items():
            group[event] = group.get(event, 0.0) + value
    kinds = KINDS if cycles else []  # the cache events exist with --cache-sim only
    head = "".join(f"  {label:>16s}" for label, _ in kinds)
    print(f"    {unit:>12s}{head}")
    for group, delta in sorted(groups.items(), key=lambda kv: -kv[1]["cost"]):
        cells = "".join(f"  {sum(delta.get(e, 0.0) for e in events) / 1e3:+14.1f} k"
                        for _, events in kinds)
        print(f"    {delta['cost'] / 1e3:+10.1f} k{cells}  {group}")
    print(f"  added {unit} a step, by shared object (of the uninstrumented run, where a "
          f"function ran in both):")
    objects: dict[str, float] = {}
    for obj, delta in added.values():
        objects[obj] = objects.get(obj, 0.0) + delta["cost"]
    for obj, value in sorted(objects.items(), key=lambda kv: -abs(kv[1])):
        if abs(value) >= 1000:
            print(f"    {value / 1e3:+10.1f} k  {obj}")
    print(f"  the {top} functions that add the most {unit} a step:")
    for name, (obj, delta) in sorted(added.items(), key=lambda kv: -kv[1][1]["cost"])[:top]:
        print(f"    {delta['cost'] / 1e3:+10.1f} k  {name[:110]}  [{obj}]")


def measure(args: argparse.Namespace, name: str, control: str,
            workdir: str) -> tuple[int, int, int]:
    tag = tag_of(name)
    procs = []
    simulate = ["--cache-sim=yes", "--branch-sim=yes"] if args.cache_sim else []
    if args.cache_sim and args.last_level:
        simulate.append(f"--LL={args.last_level},16,64")
    for rank, env in enumerate(rank_environments(2)):
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               *simulate,
               f"--callgrind-out-file={workdir}/{tag}.r{rank}", sys.executable,
               os.path.abspath(__file__), "--rank-config", name, "--control", control,
               "--steps", str(args.steps), "--warm", str(args.warm), "--dim", str(args.dim),
               "--hidden", str(args.hidden), "--layers", str(args.layers),
               "--batch", str(args.batch)]
        log = open(os.path.join(workdir, f"{tag}.r{rank}.log"), "w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    if max(p.wait() for p in procs) != 0:
        sys.exit(f"capture_instructions.py: {name} failed; see {workdir}/{tag}.r*.log")
    return counted(f"{workdir}/{tag}.r0", args.cache_sim)


def main() -> int:
    args = parse()
    if args.rank_config:
        rank_main(args)
        return 0
    names = selected(CONFIGURATIONS, args.only)
    workdir = tempfile.mkdtemp(prefix="meshscope-callgrind-")
    control = build_control(workdir)
    print(f"DTensor MLP: {args.layers}x(Colwise {args.dim}->{args.hidden}, Rowwise "
          f"{args.hidden}->{args.dim}), batch {args.batch}, Adam, 2 ranks gloo on cpu; "
          f"instructions of rank 0 over {args.steps} steps after {args.warm} warm steps "
          f"(callgrind; files in {workdir})", flush=True)
    cycles_head = f" {'est. cycles/step':>17s} {'ratio':>7s}" if args.cache_sim else ""
    print(f"{'configuration':36s} {'train thread/step':>18s} {'ratio':>7s} "
          f"{'process/step':>13s} {'ratio':>7s}{cycles_head}", flush=True)
    base = None
    for name in names:
        main_thread, process, cycles = (n / args.steps
                                        for n in measure(args, name, control, workdir))
        if base is None:
            base = (main_thread, process, cycles)
        cycles_cell = (f" {cycles / 1e6:14.2f} M {cycles / base[2]:6.3f}x"
                       if args.cache_sim else "")
        print(f"{name:36s} {main_thread / 1e6:15.2f} M {main_thread / base[0]:6.3f}x "
              f"{process / 1e6:10.2f} M {process / base[1]:6.3f}x{cycles_cell}", flush=True)
        if args.by_function and name != names[0]:
            print_by_function(training_dump(f"{workdir}/{tag_of(names[0])}.r0"),
                              training_dump(f"{workdir}/{tag_of(name)}.r0"), args.steps,
                              args.by_function, args.cache_sim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
