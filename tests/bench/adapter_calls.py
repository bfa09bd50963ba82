"""What the agent's adapters add to each call they wrap, side by side in one run.

    scripts/bench_adapter_calls.sh [--rounds 7] [--calls 2000]

One rank (gloo, CPU). The calls a tensor-parallel step makes through
meshscope's Python adapters, each timed in a loop of --calls: a forward of a
ColwiseParallel and of a RowwiseParallel nn.Linear (the Module.__call__
wrapper, from_local's guard on the input, to_local's provenance on the
output), DTensor.to_local(), DTensor.from_local(), DTensor.redistribute()
and an Adam step (the optimizer hooks: the step's record, the step counter,
the tensor table's sweep and the spec cache's trim). A loop ends a step
(meshscope.mark_step(), nothing without meshscope) every --step-every calls,
as a training loop's optimizer does: what the agent's caches alone hold is
dropped there. Each round times every
call without meshscope and with it attached at level dtensor with the
dispatcher hook off (MESHSCOPE_BENCH_HOOK=off: the adapters, the collective
wrappers and the writer alone), in a new order. Per call it prints the
median over rounds of us per call both ways, what the adapters add and
their ratio: configuration 9 of capture_overhead.py (hook off) taken apart
call by call."""

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


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=2000,
                   help="calls a timed loop (an optimizer step: a tenth of them)")
    p.add_argument("--step-every", type=int, default=8,
                   help="calls between two meshscope.mark_step() (a training step's end: "
                        "the agent drops what only its caches still hold)")
    return p.parse_args()


def summary(times: dict[str, tuple[list[float], list[float]]]) -> list[str]:
    """The table: per call, the medians over rounds of ns per call without
    and with the adapters, the difference and the ratio."""
    lines = [f"{'call':32s} {'without us':>10s} {'with us':>9s} {'added us':>9s} {'ratio':>7s}"]
    for name, (without, with_) in times.items():
        if not without or not with_:
            continue
        a, b = statistics.median(without) / 1e3, statistics.median(with_) / 1e3
        lines.append(f"{name:32s} {a:10.2f} {b:9.2f} {b - a:+9.2f} {b / a:6.3f}x")
    return lines


def timed(call, n: int, mark_step, every: int) -> float:
    """ns per call of `call` over n calls, after n // 10 untimed, with
    mark_step() after every `every` calls, as a training step ends."""
    for _ in range(max(1, n // 10)):
        call()
    start = time.perf_counter_ns()
    for i in range(1, n + 1):
        call()
        if i % every == 0:
            mark_step()
    return (time.perf_counter_ns() - start) / n


def run(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    import meshscope

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (1,))
    torch.manual_seed(0)
    model = parallelize_module(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8)),
                               mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = DTensor.from_local(torch.randn(4, 8), mesh, [Replicate()])
    hidden = model[1](model[0](x))
    local = torch.randn(4, 8)
    model(x).sum().backward()  # the optimizer's state exists
    calls = {
        "ColwiseParallel Linear forward": lambda: model[0](x),
        "RowwiseParallel Linear forward": lambda: model[2](hidden),
        "DTensor.to_local()": x.to_local,
        "DTensor.from_local()": lambda: DTensor.from_local(local, mesh, [Replicate()]),
        "DTensor.redistribute()": lambda: x.redistribute(mesh, [Replicate()]),
        "torch.optim.Adam.step()": opt.step,
    }
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in calls}
    runs = tempfile.mkdtemp(prefix="meshscope-bench-")
    os.environ["MESHSCOPE_BENCH_HOOK"] = "off"
    try:
        for r in range(args.rounds):
            for attached in random.Random(r).sample([False, True], 2):
                if attached:
                    meshscope.attach(os.path.join(runs, f"run-{r}"), policy="observe",
                                     level="dtensor")
                try:
                    for name in random.Random(1000 + r).sample(list(calls), len(calls)):
                        n = args.calls // 10 if name.startswith("torch.optim") else args.calls
                        times[name][attached].append(
                            timed(calls[name], max(1, n), meshscope.mark_step, args.step_every))
                finally:
                    if attached:
                        meshscope.detach()
    finally:
        dist.destroy_process_group()
    print(f"calls through meshscope's adapters (level dtensor, dispatcher hook off) and "
          f"without meshscope; 1 rank gloo on cpu; {args.rounds} rounds x {args.calls} calls")
    print("us per call, median over rounds; added: what the adapters add to one call")
    print("\n".join(summary(times)))


def main() -> int:
    return one_rank(run, parse())


if __name__ == "__main__":
    sys.exit(main())
