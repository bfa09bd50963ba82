"""Where the capture overhead goes, on this machine's own CPU: the training
loop of capture_overhead.py under `perf record -e cpu-clock`, with the
configurations interleaved in one process and every sample given to the
block it fell in by its timestamp (CLOCK_MONOTONIC on both sides).

    .venv/bin/python tests/bench/capture_profile.py [--rounds 30] [--steps 30]
        [--warm 6 --settle 2] [--freq 4999] [--top 25] [--steady-heap]
        [--dim 256 --hidden 1024 --batch 32 --layers 2]

Each rank alternates, in a new order each round, 30-step blocks of: no
instrumentation, no instrumentation again (the noise floor: two blocks of
the same code read this far apart), meshscope's adapters alone (attach()
with the dispatcher hook off) and meshscope observe at level dtensor. Prints
CPU time per step of each configuration over all threads and on the
training thread, then the difference to the uninstrumented blocks by
thread (training thread, meshscope's writer, gloo's threads), by thread and
shared object, and by function for the full agent. Unlike the step-time
ratios of capture_overhead.py, this says whose time grew: the agent's own
code, the Python interpreter and torch running slower between its calls,
page faults in the kernel, the writer. Unlike capture_instructions.py, it
counts real cycles, cache misses included. Needs `perf` (linux-perf) and
perf_event_paranoid <= 1 or root."""

from __future__ import annotations

import argparse
import bisect
import collections
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from capture_overhead import (STEADY_HEAP, add_model_arguments, rank_environments,  # noqa: E402
                              thread_role, training)

OFF, OFF_AGAIN, ADAPTERS, AGENT = ("no instrumentation", "no instrumentation (again)",
                                   "meshscope adapters only (hook off)",
                                   "meshscope observe, level dtensor")
CONFIGURATIONS = (OFF, OFF_AGAIN, ADAPTERS, AGENT)
COLUMN = {OFF_AGAIN: "A/A noise", ADAPTERS: "adapters", AGENT: "full agent"}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--steps", type=int, default=30, help="timed steps per block")
    p.add_argument("--warm", type=int, default=6)
    p.add_argument("--settle", type=int, default=2)
    p.add_argument("--freq", type=int, default=4999, help="samples per second per CPU")
    p.add_argument("--top", type=int, default=25, help="rows of the per-function table")
    p.add_argument("--steady-heap", action="store_true",
                   help="fixed glibc mmap/trim thresholds in the ranks (see capture_overhead.py)")
    add_model_arguments(p)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--out", default="", help="keep perf.data and the block windows here")
    p.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    p.add_argument("--role", default="", help=argparse.SUPPRESS)  # internal: ranks | rank
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# Attribution (pure: tested without perf)

@dataclass
class Windows:
    """The timed blocks of one rank process."""

    pid: int
    main_tid: int
    steps: int
    blocks: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, config)

    def config_at(self, t: float) -> str | None:
        i = bisect.bisect(self.blocks, (t, float("inf"), "")) - 1
        if i >= 0 and self.blocks[i][0] <= t <= self.blocks[i][1]:
            return self.blocks[i][2]
        return None


@dataclass
class Sample:
    comm: str
    pid: int
    tid: int
    time: float
    symbol: str
    dso: str


def parse_sample(line: str) -> Sample | None:
    """One line of `perf script -F comm,pid,tid,time,ip,sym,dso`:
    `python 123/124 85776.388371: 7f00 sym+0x1f (/path/lib.so)`."""
    head, sep, rest = line.partition(": ")
    if not sep:
        return None
    parts = head.rsplit(None, 2)
    if len(parts) != 3 or "/" not in parts[1]:
        return None
    comm, ids, stamp = parts
    try:
        pid, tid = (int(x) for x in ids.split("/"))
        when = float(stamp)
    except ValueError:
        return None
    rest = rest.strip()
    fields = rest.split(None, 1)  # ip, then "symbol (dso)"
    tail = fields[1] if len(fields) > 1 else ""
    dso = "?"
    cut = tail.rfind(" (")
    if cut >= 0 and tail.endswith(")"):
        dso, tail = os.path.basename(tail[cut + 2:-1]), tail[:cut]
    symbol = tail.split("+0x")[0].strip() or "[unknown]"
    return Sample(comm.strip(), pid, tid, when, symbol, dso)


class Profile:
    """Samples per (configuration, thread role, shared object, function)."""

    def __init__(self, windows: list[Windows], freq: int) -> None:
        self.windows = {w.pid: w for w in windows}
        self.freq = freq
        self.counts: collections.Counter = collections.Counter()
        self.steps: collections.Counter = collections.Counter()
        for w in windows:
            for _, _, config in w.blocks:
                self.steps[config] += w.steps

    def add(self, s: Sample) -> None:
        w = self.windows.get(s.pid)
        config = w.config_at(s.time) if w else None
        if config is not None:
            self.counts[(config, thread_role(s.tid, s.comm, w.main_tid), s.dso, s.symbol)] += 1

    def wall_ratio(self, config: str) -> tuple[float, float]:
        """Wall time per step of `config` (ms, median over its blocks) and the
        median over rounds of its block time / the same round's uninstrumented
        block time, on the first rank."""
        w = min(self.windows.values(), key=lambda w: w.pid)
        per_round = len(CONFIGURATIONS)
        mine, ratios = [], []
        for i in range(0, len(w.blocks) - per_round + 1, per_round):
            rnd = {c: end - start for start, end, c in w.blocks[i:i + per_round]}
            if config in rnd and rnd.get(OFF):
                mine.append(rnd[config])
                ratios.append(rnd[config] / rnd[OFF])
        if not mine:
            return 0.0, 0.0
        return statistics.median(mine) / w.steps * 1e3, statistics.median(ratios)

    def per_step_us(self, config: str, match=lambda key: True) -> float:
        """CPU microseconds per step (per rank) of the samples `match` keeps."""
        return sum(us for key, us in self.grouped(config, 3).items() if match(key))

    def grouped(self, config: str, depth: int) -> dict[tuple, float]:
        out: dict[tuple, float] = collections.defaultdict(float)
        if not self.steps[config]:
            return out
        scale = 1e6 / self.steps[config] / self.freq
        for key, c in self.counts.items():
            if key[0] == config:
                out[key[1:1 + depth]] += c * scale
        return out


def report(profile: Profile, configs: list[str], top: int) -> str:
    lines = []
    base = profile.per_step_us(OFF)
    base_main = profile.per_step_us(OFF, lambda k: k[0] == "training thread")
    lines.append(f"{'configuration':38s} {'CPU ms/step':>11s} {'ratio':>7s} "
                 f"{'training thread':>15s} {'ratio':>7s} {'wall ms/step':>12s} {'ratio':>7s}")
    for c in configs:
        total = profile.per_step_us(c)
        main = profile.per_step_us(c, lambda k: k[0] == "training thread")
        wall, wall_ratio = profile.wall_ratio(c)
        lines.append(f"{c:38s} {total / 1e3:11.2f} {total / base if base else 0:6.3f}x "
                     f"{main / 1e3:15.2f} {main / base_main if base_main else 0:6.3f}x "
                     f"{wall:12.2f} {wall_ratio:6.3f}x")
    others = [c for c in configs if c != OFF]
    for depth, title in ((1, "thread"), (2, "thread, shared object"), (3, "function")):
        table = {c: profile.grouped(c, depth) for c in configs}
        keys = set().union(*table.values())
        worst = others[-1] if depth == 3 else None

        def delta(key: tuple, c: str) -> float:
            return table[c].get(key, 0.0) - table[OFF].get(key, 0.0)

        order = sorted(keys, key=lambda k: -abs(delta(k, worst)) if worst else
                       -max(abs(delta(k, c)) for c in others))
        lines.append("")
        lines.append(f"CPU us/step beyond '{OFF}', by {title}"
                     + (f" (ordered by {COLUMN[worst]})" if worst else "") + ":")
        lines.append(" ".join(f"{COLUMN.get(c, c)[:11]:>11s}" for c in others) + "  " + title)
        for key in order[:top if depth > 1 else len(order)]:
            lines.append(" ".join(f"{delta(key, c):+11.1f}" for c in others) + "  "
                         + " | ".join(str(k)[:110] for k in key))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Ranks

def rank_main(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    import meshscope
    from meshscope import _capture

    step, sync, _ = training(args)
    runs = tempfile.mkdtemp(prefix="meshscope-profile-")
    windows = Windows(os.getpid(), threading.get_native_id(), args.steps)
    for _ in range(5):
        step()
    for r in range(args.rounds):
        for config in random.Random(r).sample(CONFIGURATIONS, len(CONFIGURATIONS)):
            # A full collection (~130 ms here, about one per 2,000 steps)
            # lands in whichever block reaches the threshold; one was due
            # after the model's set-up, in the first block. Every block
            # starts from a collected heap alike.
            gc.collect()
            dist.barrier()
            if config in (ADAPTERS, AGENT):
                meshscope.attach(os.path.join(runs, f"{r}-{len(windows.blocks)}"),
                                 policy="observe", level="dtensor")
                if config == ADAPTERS:
                    _capture.enable_hook(False)
            for _ in range(args.warm):
                step()
            sync()
            dist.barrier()
            start = time.monotonic()
            for _ in range(args.steps):
                step()
            sync()
            windows.blocks.append((start, time.monotonic(), config))
            dist.barrier()
            if config in (ADAPTERS, AGENT):
                meshscope.detach()
            for _ in range(args.settle):
                step()
    path = os.path.join(os.environ["MESHSCOPE_PROFILE_DIR"], f"windows-{dist.get_rank()}.json")
    with open(path, "w") as f:
        json.dump(windows.__dict__, f)
    dist.destroy_process_group()
    shutil.rmtree(runs, ignore_errors=True)


def ranks_main(args: argparse.Namespace) -> int:
    """Under perf: starts the ranks (perf follows them)."""
    extra = STEADY_HEAP if args.steady_heap else {}
    argv = sys.argv[1:-2]  # without the trailing "--role ranks"
    procs = [subprocess.Popen([sys.executable, __file__, *argv, "--role", "rank"],
                              env={**env, **extra})
             for env in rank_environments(args.world)]
    return max(p.wait() for p in procs)


def main() -> int:
    args = parse()
    if args.role == "rank":
        rank_main(args)
        return 0
    if args.role == "ranks":
        return ranks_main(args)
    perf = shutil.which("perf")
    if not perf:
        sys.exit("capture_profile.py: needs perf (apt-get install linux-perf)")
    out = args.out or tempfile.mkdtemp(prefix="meshscope-profile-")
    os.makedirs(out, exist_ok=True)
    data = os.path.join(out, "perf.data")
    env = {**os.environ, "MESHSCOPE_PROFILE_DIR": out}
    rc = subprocess.call([perf, "record", "-q", "-k", "mono", "-e", "cpu-clock",
                          "-F", str(args.freq), "-o", data, "--", sys.executable, __file__,
                          *sys.argv[1:], "--role", "ranks"], env=env)
    if rc != 0:
        sys.exit(f"capture_profile.py: perf record or the ranks failed (exit {rc}); "
                 "perf needs root or kernel.perf_event_paranoid <= 1")
    windows = []
    for rank in range(args.world):
        with open(os.path.join(out, f"windows-{rank}.json")) as f:
            windows.append(Windows(**{k: v if k != "blocks" else [tuple(b) for b in v]
                                      for k, v in json.load(f).items()}))
    profile = Profile(windows, args.freq)
    script = subprocess.Popen([perf, "script", "-i", data, "-F", "comm,pid,tid,time,ip,sym,dso"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              errors="replace")
    for line in script.stdout:
        sample = parse_sample(line)
        if sample:
            profile.add(sample)
    script.wait()
    print(f"DTensor MLP: {args.layers}x(Colwise {args.dim}->{args.hidden}, Rowwise "
          f"{args.hidden}->{args.dim}), batch {args.batch}, Adam, {args.world} ranks gloo on cpu; "
          f"{args.rounds} rounds x {args.steps} steps{'; steady heap' if args.steady_heap else ''}; "
          f"perf cpu-clock at {args.freq} Hz, per rank")
    print(report(profile, list(CONFIGURATIONS), args.top))
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
