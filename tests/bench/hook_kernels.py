"""What the dispatcher hook's own kernels of common ops save per op, side by side in one run.

    scripts/bench_hook_kernels.sh [--rounds 7] [--calls 20000]

One rank (gloo, CPU). Warm loops of single ops, each timed --calls times:
ops the hook has kernels of its own for (capture/agent/hooks/unboxed_ops.h:
torch.mm of plain 4x4 tensors, an add of two replicated 8x8 DTensors) and
one it has none for (torch.atan2, plain: the boxed fallback either way).
Each round times every op three ways, in a new order: without meshscope,
attached at level dtensor (the hook's kernels), and attached with every op
through the hook's boxed fallback (MESHSCOPE_BENCH_BOXED=1, configuration
15 of capture_overhead.py). Per op it prints the median over rounds of ns
per call each way and what the hook adds through its kernel and through
the fallback. Warm loops leave out what a training step pays for cold
caches; tests/bench/capture_instructions.py --only 3,15 --cache-sim counts
a step."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_overhead import one_rank  # noqa: E402

WAYS = ("without", "kernels", "boxed")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=20000, help="calls a timed loop")
    return p.parse_args()


def summary(times: dict[str, dict[str, list[float]]]) -> list[str]:
    """The table: per op, the medians over rounds of ns per call each way
    and what the hook adds to it with its kernels and through the fallback."""
    lines = [f"{'op':34s} " + " ".join(f"{w + ' ns':>11s}" for w in WAYS)
             + f" {'added (kernels)':>15s} {'added (boxed)':>13s}"]
    for name, ways in times.items():
        if not all(ways[w] for w in WAYS):
            continue
        m = {w: statistics.median(ways[w]) for w in WAYS}
        lines.append(f"{name:34s} " + " ".join(f"{m[w]:11.0f}" for w in WAYS)
                     + f" {m['kernels'] - m['without']:+15.0f} {m['boxed'] - m['without']:+13.0f}")
    return lines


def timed(call, n: int) -> float:
    """ns per call of `call` over n calls, after n // 10 (at least 50)
    untimed: the agent's caches filled after attach()."""
    for _ in range(max(50, n // 10)):
        call()
    start = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - start) / n


def run(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate

    import meshscope

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (1,))
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    x = DTensor.from_local(torch.randn(8, 8), mesh, [Replicate()])
    y = DTensor.from_local(torch.randn(8, 8), mesh, [Replicate()])
    calls = {
        "torch.mm, plain (a kernel)": lambda: torch.mm(a, b),
        "torch.atan2, plain (no kernel)": lambda: torch.atan2(a, b),
        "DTensor add, replicated (a kernel)": lambda: x + y,
    }
    times = {name: {w: [] for w in WAYS} for name in calls}
    runs = tempfile.mkdtemp(prefix="meshscope-bench-")
    try:
        for r in range(args.rounds):
            for way in random.Random(r).sample(WAYS, len(WAYS)):
                if way != "without":
                    os.environ["MESHSCOPE_BENCH_BOXED"] = "1" if way == "boxed" else ""
                    meshscope.attach(os.path.join(runs, f"run-{r}-{way}"), policy="observe",
                                     level="dtensor")
                try:
                    for name, call in calls.items():
                        # a DTensor op runs some 30 times slower: fewer calls
                        n = args.calls // 20 if "DTensor" in name else args.calls
                        times[name][way].append(timed(call, max(n, 1)))
                finally:
                    if way != "without":
                        meshscope.detach()
    finally:
        os.environ.pop("MESHSCOPE_BENCH_BOXED", None)
        dist.destroy_process_group()
    print(f"warm loops, 1 rank gloo on cpu; {args.rounds} rounds x {args.calls} calls "
          f"(DTensor ops: a twentieth); ns per call, median over rounds")
    print("\n".join(summary(times)))


def main() -> int:
    return one_rank(run, parse())


if __name__ == "__main__":
    sys.exit(main())
