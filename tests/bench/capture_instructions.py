"""Capture overhead in instructions: the training loop of capture_overhead.py
under Valgrind's callgrind, which counts every instruction executed, so the
ratios do not move with the machine's load (step-time ratios on a shared
2-core machine do, by +-5-10 %). Instructions are not time: cache misses,
page faults, the kernel and waiting are not in them; read these next to
capture_overhead.py's step times, not instead of them.

    .venv/bin/python tests/bench/capture_instructions.py [--steps 4] [--warm 3]
        [--dim 256 --hidden 1024 --batch 32 --layers 2] [--only 3,4]

For each configuration, 2 ranks (gloo, CPU) start under callgrind with
instrumentation off, build the model, train 5 steps uninstrumented, enter
the configuration (meshscope: attach()), run --warm steps, and count the
instructions of the next --steps steps, per thread. Prints, per
configuration, rank 0's instructions per step and their ratio to the
uninstrumented loop for the training thread and for the whole process (all
its threads: gloo's, meshscope's writer). The
whole-process count includes meshscope's writer thread, which commits every
50 ms of wall time; under callgrind a step takes about 200 times longer, so
the writer commits about 200 times more often per step than it would
natively and its share is overstated. Needs valgrind (callgrind.h) and a C
compiler; takes about 2 minutes per configuration."""

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
from capture_overhead import (CONFIGURATIONS, rank_environments, selected,  # noqa: E402
                              training)
CONTROL_C = """#include <valgrind/callgrind.h>
void meshscope_cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void meshscope_cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
"""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=4, help="counted steps per configuration")
    p.add_argument("--warm", type=int, default=3, help="steps after entering, not counted")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--only", default="", help="comma-separated configuration numbers "
                   "(0 = no instrumentation, always run), e.g. --only 3")
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


def totals(path: str) -> int:
    with open(path) as f:
        match = re.search(r"^totals: (\d+)", f.read(), re.MULTILINE)
    return int(match.group(1)) if match else 0


def counted(out_prefix: str) -> tuple[int, int]:
    """(training thread, whole process) instructions while counting. The
    training thread's are in the dump cg_stop took (part 1, thread 01); the
    other threads' in the dumps callgrind writes at exit (instrumentation
    was off from cg_stop on, so they hold the counted steps only)."""
    main = totals(out_prefix + ".1-01")
    others = sum(totals(p) for p in glob.glob(out_prefix + "-*"))
    return main, main + others


def measure(args: argparse.Namespace, name: str, control: str,
            workdir: str) -> tuple[int, int]:
    tag = re.sub(r"\W+", "_", name)
    procs = []
    for rank, env in enumerate(rank_environments(2)):
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               f"--callgrind-out-file={workdir}/{tag}.r{rank}", sys.executable,
               os.path.abspath(__file__), "--rank-config", name, "--control", control,
               "--steps", str(args.steps), "--warm", str(args.warm), "--dim", str(args.dim),
               "--hidden", str(args.hidden), "--layers", str(args.layers),
               "--batch", str(args.batch)]
        log = open(os.path.join(workdir, f"{tag}.r{rank}.log"), "w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    if max(p.wait() for p in procs) != 0:
        sys.exit(f"capture_instructions.py: {name} failed; see {workdir}/{tag}.r*.log")
    return counted(f"{workdir}/{tag}.r0")


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
    print(f"{'configuration':36s} {'train thread/step':>18s} {'ratio':>7s} "
          f"{'process/step':>13s} {'ratio':>7s}", flush=True)
    base = None
    for name in names:
        main_thread, process = (n / args.steps for n in measure(args, name, control, workdir))
        if base is None:
            base = (main_thread, process)
        print(f"{name:36s} {main_thread / 1e6:15.2f} M {main_thread / base[0]:6.3f}x "
              f"{process / 1e6:10.2f} M {process / base[1]:6.3f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
