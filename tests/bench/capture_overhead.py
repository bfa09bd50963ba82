"""Capture overhead on a DTensor training loop, measured side by side in one run.

    .venv/bin/python tests/bench/capture_overhead.py [--rounds 15] [--steps 8]
        [--dim 256 --hidden 1024 --batch 32] [--device cuda --world 1]

Starts 2 ranks (gloo, CPU; --device cuda: NCCL, rank i on GPU i % GPUs, step
times taken after a device synchronize). Each rank trains a tensor-parallel MLP (Colwise
then Rowwise Linear layers, Adam) under five configurations, interleaved in
rounds so machine noise hits all of them alike: no instrumentation,
CommDebugMode, torch.profiler(record_shapes=True), meshscope observe at level
dtensor, meshscope observe at level all. Prints the median step time of each
and its ratio to the uninstrumented loop (rank 0), in wall time and in the
process's CPU time (all its threads: the agent's writer thread counts; time
spent waiting for the other rank does not, so it is the less noisy of the two
on a shared machine)."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--steps", type=int, default=8, help="steps per configuration per round")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2, help="Colwise/Rowwise pairs")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: NCCL, one GPU per rank (NCCL refuses two ranks on one GPU)")
    p.add_argument("--only", default="", help="comma-separated configuration numbers "
                   "(0 = no instrumentation, always run), e.g. --only 3,4")
    return p.parse_args()


def launch(args: argparse.Namespace) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(args.world):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(args.world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, *sys.argv], env=env))
    return max(p.wait() for p in procs)


def rank_main(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    import meshscope

    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend)
    rank = dist.get_rank()
    mesh = init_device_mesh(args.device, (dist.get_world_size(),), mesh_dim_names=("model",))
    torch.manual_seed(0)
    layers, plan = [], {}
    for i in range(args.layers):
        layers += [nn.Linear(args.dim, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.dim)]
        plan[str(3 * i)] = ColwiseParallel()
        plan[str(3 * i + 2)] = RowwiseParallel()
    model = parallelize_module(nn.Sequential(*layers), mesh, plan)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = DTensor.from_local(torch.randn(args.batch, args.dim, device=args.device), mesh,
                           [Replicate()])
    y = torch.randn(args.batch, args.dim, device=args.device)

    def settle() -> None:  # a GPU step's time is when its kernels are done
        if cuda:
            torch.cuda.synchronize()

    def step() -> None:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()

    runs = tempfile.mkdtemp(prefix="meshscope-bench-")
    counter = [0]

    @contextlib.contextmanager
    def meshscope_level(level: str):
        counter[0] += 1
        meshscope.attach(os.path.join(runs, f"{level}-{counter[0]}"), policy="observe", level=level)
        try:
            yield
        finally:
            meshscope.detach()

    def profiler():
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        return profile(activities=activities, record_shapes=True)

    # name -> (context factory, entered per step?). CommDebugMode's module
    # tracker handles one forward per context (torch 2.11 raises IndexError
    # on the second), so it wraps each step, as people use it.
    configs = {
        "no instrumentation": (contextlib.nullcontext, False),
        "CommDebugMode": (CommDebugMode, True),
        "torch.profiler(record_shapes=True)": (profiler, False),
        "meshscope observe, level dtensor": (lambda: meshscope_level("dtensor"), False),
        "meshscope observe, level all": (lambda: meshscope_level("all"), False),
    }
    if args.only:
        keep = {0, *(int(i) for i in args.only.split(","))}
        configs = {name: c for i, (name, c) in enumerate(configs.items()) if i in keep}
    for _ in range(5):
        step()
    times: dict[str, list[float]] = {name: [] for name in configs}
    cpu: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # rotate: no fixed position
        for name in order:
            make, per_step = configs[name]
            outer = contextlib.nullcontext if per_step else make
            inner = make if per_step else contextlib.nullcontext
            with outer():
                with inner():
                    step()  # warm the configuration (first-step costs are not per-step)
                settle()
                dist.barrier()
                start, start_cpu = time.perf_counter(), time.thread_time()
                for _ in range(args.steps):
                    with inner():
                        step()
                settle()
                cpu[name].append((time.thread_time() - start_cpu) / args.steps)
                dist.barrier()
                times[name].append((time.perf_counter() - start) / args.steps)
    if rank == 0:
        base, base_cpu = times["no instrumentation"], cpu["no instrumentation"]

        def paired(values: list[float], against: list[float]) -> tuple[float, float, float]:
            # ratio to the uninstrumented block of the same round (drift cancels),
            # median and interquartile range over rounds
            ratios = sorted(v / b for v, b in zip(values, against))
            q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            return statistics.median(ratios), q[0], q[-1]

        print(f"DTensor MLP: {args.layers}x(Colwise {args.dim}->{args.hidden}, Rowwise "
              f"{args.hidden}->{args.dim}), batch {args.batch}, Adam, {dist.get_world_size()} "
              f"ranks {backend} on {args.device}; {args.rounds} rounds x {args.steps} steps")
        print("ratio: median over rounds of (step time / uninstrumented step time of the same "
              "round), [interquartile range]; cpu: the training thread's CPU time")
        print(f"{'configuration':36s} {'ms/step':>8s} {'ratio':>7s} {'IQR':>13s} "
              f"{'cpu ms':>7s} {'ratio':>7s} {'IQR':>13s}")
        for name in names:
            wall, wall_lo, wall_hi = paired(times[name], base)
            c, c_lo, c_hi = paired(cpu[name], base_cpu)
            print(f"{name:36s} {statistics.median(times[name]) * 1e3:8.2f} {wall:6.3f}x "
                  f"[{wall_lo:5.3f},{wall_hi:5.3f}] {statistics.median(cpu[name]) * 1e3:7.2f} "
                  f"{c:6.3f}x [{c_lo:5.3f},{c_hi:5.3f}]")
    dist.destroy_process_group()


def main() -> int:
    args = parse()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            sys.exit("capture_overhead.py: --device cuda needs a CUDA GPU "
                     "(torch.cuda.is_available() is False here)")
    if "RANK" not in os.environ:
        return launch(args)
    rank_main(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
