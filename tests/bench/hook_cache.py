"""How much of the agent's per-op time is cold caches, measured side by side in one run.

    scripts/bench_hook_cache.sh [--rounds 8] [--groups 1,2,4,8] [--ops 400] [--evict-mib 16]

One rank (gloo, CPU). A loop runs small DTensor ops (a + b and a * b on
replicated 8x8 DTensors) in groups of N back to back, and between two groups
streams --evict-mib MiB through the core's caches (in-place multiplies of
plain tensors), as a training step's kernels do between its DTensor ops. The
agent is attached at level dtensor with its dispatcher hook timing each
phase of a recorded DTensor op (MESHSCOPE_BENCH_HOOK=phases, the CPU's
time-stamp counter). Each round runs every group size once, in a new order;
per group size it prints the median over rounds of the agent's ns per
DTensor op, by phase and in all, the op's own time (DTensor's dispatch, not
the agent's), and the agent's ratio to the largest group: how much of what
an op costs the agent is its code and data being fetched again after the
training's own work evicted them. The first op of a group pays that; the
ones after it find them warm."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_overhead import AGENT_PHASES as PHASES  # noqa: E402
from capture_overhead import add_phases, hook_phases, one_rank  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--groups", default="1,2,4,8",
                   help="group sizes: DTensor ops run back to back between two evictions")
    p.add_argument("--ops", type=int, default=400,
                   help="DTensor ops per group size and round (rounded up to whole groups)")
    p.add_argument("--evict-mib", type=int, default=16,
                   help="MiB streamed through the caches between two groups (0: none)")
    return p.parse_args()


def per_op(total: dict[str, float]) -> dict[str, float]:
    """ns per DTensor op by phase, "agent_ns" (the phases summed) and "op_ns",
    from add_phases() totals; empty when no op was timed."""
    ops = total.get("dtensor_ops", 0.0)
    if not ops:
        return {}
    out = {k: total.get(k, 0.0) / ops for k in PHASES}
    out["agent_ns"] = sum(out[k] for k in PHASES)
    out["op_ns"] = total.get("op_ns", 0.0) / ops
    return out


def summary(blocks: dict[int, list[dict[str, float]]]) -> list[str]:
    """The table: per group size, medians over rounds of each per_op() value
    and the agent's ratio to the largest group's median."""
    medians = {n: {k: statistics.median(b[k] for b in rows) for k in rows[0]}
               for n, rows in blocks.items() if rows}
    if not medians:
        return ["no DTensor op was timed (is MESHSCOPE_BENCH_HOOK=phases supported?)"]
    warm = medians[max(medians)]["agent_ns"]
    lines = [f"{'ops a group':>11s} {'agent ns/op':>11s} {'ratio':>7s}  "
             + " ".join(f"{k[:-3]:>8s}" for k in PHASES) + f" {'op itself':>10s}"]
    for n in sorted(medians):
        m = medians[n]
        lines.append(f"{n:11d} {m['agent_ns']:11.0f} {m['agent_ns'] / warm:6.2f}x  "
                     + " ".join(f"{m[k]:8.0f}" for k in PHASES) + f" {m['op_ns']:10.0f}")
    return lines


def run(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate

    import meshscope

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (1,))
    a = DTensor.from_local(torch.randn(8, 8), mesh, [Replicate()])
    b = DTensor.from_local(torch.randn(8, 8), mesh, [Replicate()])
    # 4 MiB tensors: each in-place multiply streams its whole tensor
    evict = [torch.ones(1 << 20) for _ in range((args.evict_mib + 3) // 4)]
    groups = [int(g) for g in args.groups.split(",")]
    os.environ["MESHSCOPE_BENCH_HOOK"] = "phases"
    meshscope.attach(os.path.join(tempfile.mkdtemp(prefix="meshscope-bench-"), "run"),
                     policy="observe", level="dtensor")
    try:
        for _ in range(50):  # the agent's caches filled (specs, frames, op facts)
            a + b
        blocks: dict[int, list[dict[str, float]]] = {n: [] for n in groups}
        for r in range(args.rounds):
            for n in random.Random(r).sample(groups, len(groups)):
                before, total = hook_phases(), {}
                for _ in range(-(-args.ops // n)):
                    for i in range(n):
                        (a + b) if i % 2 == 0 else (a * b)
                    for t in evict:
                        t.mul_(1.0)
                add_phases(total, before, hook_phases())
                if row := per_op(total):
                    blocks[n].append(row)
    finally:
        meshscope.detach()
        dist.destroy_process_group()
    print(f"DTensor ops (8x8, replicated) in groups of {args.groups} between "
          f"{args.evict_mib} MiB streamed through the caches; 1 rank gloo on cpu; "
          f"{args.rounds} rounds x {args.ops} ops a group size")
    print("agent ns/op: the dispatcher hook's own time on a recorded DTensor op "
          "(median over rounds); ratio: to the largest group")
    print("\n".join(summary(blocks)))


def main() -> int:
    return one_rank(run, parse())


if __name__ == "__main__":
    sys.exit(main())
