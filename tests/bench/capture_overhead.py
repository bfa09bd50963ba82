"""Capture overhead on a DTensor training loop, measured side by side in one run.

    .venv/bin/python tests/bench/capture_overhead.py [--rounds 120] [--steps 20]
        [--warm 6 --settle 2] [--dim 256 --hidden 1024 --batch 32] [--pin]
        [--device cuda --world 1] [--steady-heap] [--only 3] [--parts] [--json PATH]

Starts 2 ranks (gloo, CPU; --device cuda: NCCL, rank i on GPU i % GPUs, step
times taken after a device synchronize). Each rank trains a tensor-parallel MLP (Colwise
then Rowwise Linear layers, Adam) under five configurations, interleaved in
rounds, in a new order each round, so machine noise hits all of them alike: no instrumentation,
CommDebugMode, torch.profiler(record_shapes=True), meshscope observe at level
dtensor, meshscope observe at level all. Each block enters its configuration
(meshscope: attach(), so a new run file), runs --warm untimed steps, times
--steps steps, leaves it and runs --settle untimed steps: entering and leaving
happen once per training run, not per step, and their side effects (detach()
returning memory the next steps fault in again) would otherwise land on
whichever configuration comes next. The first ~100 ms after attach() are
slower (caches filling, the writer creating the file and its first
commit): --warm 6 keeps them out of the per-step ratio, and the "entry ms"
column shows what entering plus the warm steps cost beyond the same steps
uninstrumented, once per run. For each it prints the median step
time and its ratio to the uninstrumented loop (rank 0): the median over rounds
of (block time / uninstrumented block time of the same round), so slow drift
cancels, with a 95 % bootstrap confidence interval of that median. Two
clocks: wall time, and the process's CPU time over all its threads (the
agent's writer thread counts; time spent waiting for the other rank does not,
so it is the less noisy of the two on a shared machine). The "train" column
is the CPU time of the training thread alone (from /proc/self/task: the
agent's per-op work runs there) and "writer us" meshscope's own threads
(its writer and its collective monitor) per step. On a shared 2-core machine one 20-step block reads 10-15 % off
its neighbour in either direction (standard deviation of the per-round
ratio, any configuration): 30 rounds leave a 95 % interval of about +-6 %
around the median, too wide to tell 1.03x from 1.07x; 120 rounds (the
default, about 4 minutes) about +-3 %. --json PATH keeps every round's
values. --only 3,9,10,11,12 splits the agent's cost in parts
(MESHSCOPE_BENCH_HOOK, each a superset of the one before): 9 the dispatcher
hook off (the adapters, the collective wrappers and the writer alone), 10
the hook passing every op on untouched (its boxed fallback), 11 also
scanning each op's operands, 12 also plain ops' provenance and c10d
collectives, with DTensor ops run under the GIL but not recorded; 3 adds
recording them. 13 is 3 with each part of a recorded DTensor op timed in
the process (MESHSCOPE_BENCH_HOOK=phases, the CPU's time-stamp counter): it
prints ns per op by phase after the table, a breakdown that needs neither a
profiler on the machine nor the difference of two noisy ratios, and the
same for the adapters' C++ calls (a functional collective's issue and
wait, to_local's provenance, the step's bookkeeping): calls a step and the
agent's own us a call, the original each wraps left out, and apart from it
("+N moved") what a call releases that torch would have released itself,
only earlier (a functional collective's Work, the DTensor specs only the
agent's cache still held). 14 runs the
uninstrumented loop again as its own block (an A/A pair): what every column
reads for no difference at all, in the same run. 15 is 3 with every op
through the dispatcher hook's boxed fallback (MESHSCOPE_BENCH_BOXED=1),
none through its own unboxed kernels of common ops: what those save. The faults column
counts the minor page faults of a timed step: memory the training keeps
returning to the kernel and touching anew (an agent that frees the training
thread's allocations on another thread caused hundreds per step). The
switches column counts the training thread's voluntary/involuntary context
switches per step: whether a configuration's threads preempt it more.

--parts splits the training thread's CPU time of a timed step into its
parts (zero_grad, forward, the loss, backward, the optimizer step) and
prints, per configuration and part, the median us and what the
configuration adds there: the median over rounds of the difference to the
uninstrumented block of the same round, with a 95 % bootstrap interval. A
difference of CPU time in one part is far steadier than a ratio of whole
steps (the A/A block reads within 1-25 us a part, the optimizer's within
60, where its step ratio moves by 1-2 %), so it says where an overhead
lands: the forward's adapters and collectives, the backward's ops, the
optimizer's. Six more clock reads
a step, in every configuration alike; off unless asked."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The shape of the MLP training() builds; shared with
    capture_instructions.py and capture_profile.py."""
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2, help="Colwise/Rowwise pairs")
    p.add_argument("--batch", type=int, default=32)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=120,
                   help="rounds of blocks; the 95%% interval narrows as 1/sqrt(rounds)")
    p.add_argument("--steps", type=int, default=20, help="steps per configuration per round")
    add_model_arguments(p)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--warm", type=int, default=6,
                   help="steps after entering a configuration, not in the per-step ratio")
    p.add_argument("--settle", type=int, default=2,
                   help="untimed steps after leaving one (e.g. detach() returning memory)")
    p.add_argument("--pin", action="store_true",
                   help="pin rank r to CPU core r (fewer migrations; needs as many cores as ranks)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: NCCL, one GPU per rank (NCCL refuses two ranks on one GPU)")
    p.add_argument("--only", default="", help="comma-separated configuration numbers "
                   "(0 = no instrumentation, always run), e.g. --only 3,4")
    p.add_argument("--steady-heap", action="store_true",
                   help="fix glibc's mmap and trim thresholds in the ranks (MALLOC_MMAP_THRESHOLD_, "
                   "MALLOC_TRIM_THRESHOLD_), for every configuration alike: with the defaults, "
                   "whether the 512 KiB tensors of a step come back from the heap or from fresh "
                   "pages changes from block to block, 0 or several hundred page faults a step "
                   "with or without instrumentation, and that noise swamps a few percent")
    p.add_argument("--parts", action="store_true",
                   help="also time each part of a step (zero_grad, forward, loss, backward, "
                   "optimizer) on the training thread's CPU clock and print what each "
                   "configuration adds to each part")
    p.add_argument("--json", default="",
                   help="write every round's values (rank 0) to this file")
    return p.parse_args()


# The configurations, in the order --only numbers them (training() builds them).
# 5 and 6 break the GPU-only per-op cost of level dtensor down (its CUDA event
# pairs, MESHSCOPE_DEVICE_TIMING): they run only when --only names them.
CONFIGURATIONS = ("no instrumentation", "CommDebugMode", "torch.profiler(record_shapes=True)",
                  "meshscope observe, level dtensor", "meshscope observe, level all",
                  "meshscope level dtensor, GPU op timing every step",
                  "meshscope level dtensor, GPU op timing off",
                  "meshscope level dtensor, replica check every step",
                  "meshscope level dtensor, replica check off",
                  "meshscope, hook off (adapters only)", "meshscope, hook passes every op",
                  "meshscope, hook scans operands", "meshscope, DTensor ops unrecorded",
                  "meshscope level dtensor, hook phases timed",
                  "no instrumentation (again)",
                  "meshscope level dtensor, every op boxed")
PHASES = CONFIGURATIONS[13]
AGAIN = CONFIGURATIONS[14]  # the A/A pair's second half: the noise floor of every column
DEFAULT_CONFIGURATIONS = 5


def selected(names, only: str) -> list:
    """The configurations --only keeps (the uninstrumented one always)."""
    if not only:
        return list(names)[:DEFAULT_CONFIGURATIONS]
    keep = {0, *(int(i) for i in only.split(","))}
    return [name for i, name in enumerate(names) if i in keep]


def rank_environments(world: int) -> list[dict[str, str]]:
    """The environment of each rank of a local process group (a free port);
    shared with capture_instructions.py."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [{**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
             "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"} for rank in range(world)]


def one_rank(run, args: argparse.Namespace) -> int:
    """Runs `run(args)` as the one rank of a local process group (its
    environment set here unless a launcher set it); shared with
    hook_cache.py and adapter_calls.py."""
    if "RANK" not in os.environ:
        os.environ.update(rank_environments(1)[0])
    run(args)
    return 0


# glibc tunables for --steady-heap: tensors up to 32 MiB come from the heap
# and freed memory stays there (the defaults adapt both as the run goes).
STEADY_HEAP = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def launch(args: argparse.Namespace) -> int:
    extra = STEADY_HEAP if args.steady_heap else {}
    procs = [subprocess.Popen([sys.executable, *sys.argv], env={**env, **extra})
             for env in rank_environments(args.world)]
    return max(p.wait() for p in procs)


def training(args: argparse.Namespace):
    """This rank's process group, the tensor-parallel MLP training step, the
    device sync and the configurations: name -> (context factory, entered
    per step?). Shared with capture_instructions.py."""
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
    dist.init_process_group("nccl" if cuda else "gloo")
    if getattr(args, "pin", False):
        os.sched_setaffinity(0, {dist.get_rank() % os.cpu_count()})
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

    def sync() -> None:  # a GPU step's time is when its kernels are done
        if cuda:
            torch.cuda.synchronize()

    def step(parts: list[int] | None = None) -> None:
        """One training step; with `parts`, adds the training thread's CPU
        ns of each of STEP_PARTS to it (without, the clock is int(): 0)."""
        clock = int if parts is None else time.thread_time_ns
        t0 = clock()
        opt.zero_grad()
        t1 = clock()
        out = model(x)
        t2 = clock()
        loss = ((out - y) ** 2).mean()
        del out  # as in one expression: not kept through backward
        t3 = clock()
        loss.backward()
        t4 = clock()
        opt.step()
        t5 = clock()
        if parts is not None:
            for i, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5))):
                parts[i] += b - a

    runs = tempfile.mkdtemp(prefix="meshscope-bench-")
    counter = [0]

    @contextlib.contextmanager
    def meshscope_level(level: str, device_timing: str = "", replica_check: str = "",
                        bench_hook: str = "", boxed: bool = False):
        counter[0] += 1
        os.environ["MESHSCOPE_DEVICE_TIMING"] = device_timing  # "": the default sampling
        os.environ["MESHSCOPE_REPLICA_CHECK"] = replica_check
        os.environ["MESHSCOPE_BENCH_HOOK"] = bench_hook  # "": the whole hook
        os.environ["MESHSCOPE_BENCH_BOXED"] = "1" if boxed else ""
        meshscope.attach(os.path.join(runs, f"{level}-{counter[0]}"), policy="observe", level=level)
        try:
            yield
        finally:
            meshscope.detach()

    def profiler():
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        return profile(activities=activities, record_shapes=True)

    # CommDebugMode's module tracker handles one forward per context (torch
    # 2.11 raises IndexError on the second), so it wraps each step, as people
    # use it.
    configs = dict(zip(CONFIGURATIONS, [
        (contextlib.nullcontext, False),
        (CommDebugMode, True),
        (profiler, False),
        (lambda: meshscope_level("dtensor"), False),
        (lambda: meshscope_level("all"), False),
        (lambda: meshscope_level("dtensor", "all"), False),
        (lambda: meshscope_level("dtensor", "off"), False),
        (lambda: meshscope_level("dtensor", "", "all"), False),
        (lambda: meshscope_level("dtensor", "", "off"), False),
    ] + [(lambda cut=cut: meshscope_level("dtensor", bench_hook=cut), False)
         for cut in ("off", "pass", "scan", "unrecorded", "phases")]
        + [(contextlib.nullcontext, False)]
        + [(lambda: meshscope_level("dtensor", boxed=True), False)]))
    return step, sync, configs


# The parts of a step --parts times on the training thread's CPU clock.
STEP_PARTS = ("zero_grad", "forward", "loss", "backward", "optimizer")


def part_table(parts: dict[str, list[list[float]]], names: list[str],
               resamples: int = 2000) -> list[str]:
    """--parts: per configuration, the training thread's CPU us a step in
    each part of the step (median over rounds) and what the configuration
    adds there: the median over rounds of (its us - the uninstrumented
    block's us in the same round), with a 95 % bootstrap interval."""
    base = parts[names[0]]
    width = max(len(n) for n in names)
    lines = [f"{'configuration':{width}s} " + " ".join(f"{p:>24s}" for p in STEP_PARTS)]
    for name in names:
        rows = parts[name]
        cells = []
        for i in range(len(STEP_PARTS)):
            us = statistics.median(r[i] for r in rows)
            if name == names[0]:
                cells.append(f"{us:8.1f}{'':16s}")
                continue
            diff, lo, hi = median_interval([r[i] - b[i] for r, b in zip(rows, base)], resamples)
            cells.append(f"{us:8.1f} {diff:+6.1f} [{lo:+.0f},{hi:+.0f}]")
        lines.append(f"{name:{width}s} " + " ".join(f"{c:>24s}" for c in cells))
    return lines


def thread_role(tid: int, comm: str, main_tid: int) -> str:
    """A rank's thread by what it does (shared with capture_profile.py)."""
    if tid == main_tid:
        return "training thread"
    if comm.startswith("meshscope"):
        return "meshscope threads"
    return "other threads (gloo, ...)"


_ROLE_KEYS = {"training thread": "training", "meshscope threads": "writer",
              "other threads (gloo, ...)": "other"}


def thread_cpu_ns(task_dir: str = "/proc/self/task") -> dict[str, int]:
    """CPU time (ns) of this process's threads so far, by thread_role():
    training, writer and other. Empty where /proc has no schedstat."""
    out = dict.fromkeys(_ROLE_KEYS.values(), 0)
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return {}
    for tid in tids:
        try:
            with open(os.path.join(task_dir, tid, "comm")) as f:
                name = f.read().strip()
            with open(os.path.join(task_dir, tid, "schedstat")) as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
        out[_ROLE_KEYS[thread_role(int(tid), name, os.getpid())]] += ns
    return out


def median_interval(values: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    """The median of `values` with its 95 % bootstrap interval."""
    rng = random.Random(0)
    boot = sorted(statistics.median(rng.choices(values, k=len(values)))
                  for _ in range(resamples))
    return (statistics.median(values), boot[int(0.025 * resamples) - 1],
            boot[int(0.975 * resamples) - 1])


def paired(values: list[float], against: list[float],
           resamples: int = 2000) -> tuple[float, float, float]:
    """The ratio of `values` to the uninstrumented block of the same round
    (drift cancels): median over rounds with a 95 % bootstrap interval."""
    return median_interval([v / b for v, b in zip(values, against)], resamples)


def hook_phases() -> dict[str, float]:
    """The agent's per-phase ns per op so far (MESHSCOPE_BENCH_HOOK=phases)."""
    import meshscope

    stats = meshscope.stats()
    phases = dict(stats.get("hook_phases", {}))
    if phases:  # plain ops that kept provenance (a count since attach, as plain_ops)
        phases["provenance_ops"] = float(stats.get("provenance_ops", 0))
    return phases


def phase_counter(key: str) -> str:
    """The count a hook_phases() "..._ns" value is an average over: the
    recorded DTensor ops, the plain ops, or an adapter call's own calls."""
    if key == "plain_ns":
        return "plain_ops"
    if key.startswith(ADAPTER):
        return key.removesuffix("_ns").removesuffix("_moved") + "_calls"
    return "dtensor_ops"


def add_phases(total: dict[str, float], before: dict, after: dict) -> None:
    """Adds the ns of each phase between two hook_phases() readings (each an
    average per op, or per adapter call, since attach()) and the ops and
    calls counted between them."""
    counters = {phase_counter(k) for k in after if k.endswith("_ns")} | (
        {"provenance_ops"} & after.keys())
    for counter in counters:
        total[counter] = total.get(counter, 0.0) + after.get(counter, 0.0) - before.get(counter, 0.0)
    for k in after:
        if k.endswith("_ns"):
            counter = phase_counter(k)
            total[k] = (total.get(k, 0.0) + after[k] * after.get(counter, 0.0)
                        - before.get(k, 0.0) * before.get(counter, 0.0))


# hook_phases() keys of the adapters' calls (HookPhases::Adapter):
# "adapter_<call>_ns" per call, "adapter_<call>_calls", and
# "adapter_<call>_moved_ns" per call: releasing what torch would have
# released itself (HookPhases::Moved), left out of the call's own time.
ADAPTER = "adapter_"

# The agent's own phases of a recorded DTensor op (hook_phases.h), in the
# order the hook runs them; the op itself ("op_ns") is not the agent's.
AGENT_PHASES = ("gil_ns", "enter_ns", "outputs_ns", "stack_ns", "operands_ns", "submit_ns",
                "done_ns")


def print_phases(total: dict[str, float], steps: int) -> None:
    """Configuration 13's breakdown: ns per recorded DTensor op by phase, the
    plain ops' own hook time, and what they add up to per step."""
    ops, plain = total.get("dtensor_ops", 0.0), total.get("plain_ops", 0.0)
    if not ops:
        return
    parts = [k for k in AGENT_PHASES if k in total]
    ours = sum(total[k] for k in parts) / ops
    print(f"hook phases ({CONFIGURATIONS[13]}): {ops / steps:.0f} DTensor ops a step, ns per op: "
          + ", ".join(f"{k[:-3]} {total[k] / ops:.0f}" for k in parts)
          + f"; the agent's {ours:.0f} (the op itself {total['op_ns'] / ops:.0f})")
    per_plain = total["plain_ns"] / plain if plain else 0.0
    kept = (f" ({total['provenance_ops'] / steps:.0f} keeping provenance)"
            if "provenance_ops" in total else "")
    print(f"  plain ops: {plain / steps:.0f} a step{kept}, {per_plain:.0f} ns each in the hook; "
          f"the agent's time a step: {(ours * ops + per_plain * plain) / steps / 1e3:.0f} us "
          f"(DTensor ops {ours * ops / steps / 1e3:.0f}, plain {per_plain * plain / steps / 1e3:.0f})")
    calls = [(k[len(ADAPTER):-len("_calls")], total[k]) for k in sorted(total)
             if k.startswith(ADAPTER) and k.endswith("_calls") and total[k] > 0]
    if calls:
        cells = [(name, n / steps, total[f"{ADAPTER}{name}_ns"] / n,
                  total.get(f"{ADAPTER}{name}_moved_ns", 0.0) / n) for name, n in calls]
        print("  adapter calls, the agent's own time (the call they wrap left out): "
              + ", ".join(f"{name} {per_step:.1f} a step x {ns / 1e3:.1f} us"
                          + (f" (+{moved / 1e3:.1f} moved)" if moved >= 50 else "")
                          for name, per_step, ns, moved in cells)
              + f"; the adapters' time a step: "
              f"{sum(per_step * ns for _, per_step, ns, _ in cells) / 1e3:.0f} us, and "
              f"{sum(per_step * moved for _, per_step, _, moved in cells) / 1e3:.0f} us moved "
              "(releasing what torch would have released itself, only later)")


def training_switches(status: str = "") -> tuple[int, int]:
    """The training thread's context switches so far, (voluntary, involuntary),
    from its /proc status (or `status`, a file of that form); (0, 0) where there
    is none. Involuntary ones are preemptions: another thread (the other rank,
    gloo's, meshscope's) took the core."""
    try:
        with open(status or f"/proc/self/task/{os.getpid()}/status") as f:
            fields = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
        return (int(fields["voluntary_ctxt_switches"]),
                int(fields["nonvoluntary_ctxt_switches"]))
    except (OSError, KeyError, ValueError):
        return (0, 0)


def rank_main(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    step, sync, configs = training(args)
    rank = dist.get_rank()
    backend = dist.get_backend()
    configs = {name: configs[name] for name in selected(configs, args.only)}
    for _ in range(5):
        step()
    # The model's set-up leaves a full garbage collection due (~130 ms): it
    # would land in round 0's first block, always the same configuration.
    gc.collect()
    times: dict[str, list[float]] = {name: [] for name in configs}
    cpu: dict[str, list[float]] = {name: [] for name in configs}
    entry: dict[str, list[float]] = {name: [] for name in configs}  # enter + warm steps
    faults: dict[str, list[float]] = {name: [] for name in configs}  # minor page faults
    # CPU ms per step of the training thread and of meshscope's writer
    training_cpu: dict[str, list[float]] = {name: [] for name in configs}
    writer_cpu: dict[str, list[float]] = {name: [] for name in configs}
    # the training thread's context switches per step: (voluntary, involuntary)
    switches: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    # --parts: the training thread's CPU us a step in each of STEP_PARTS
    parts: dict[str, list[list[float]]] = {name: [] for name in configs}
    names = list(configs)
    phases: dict[str, float] = {}  # configuration 13: ns summed by phase over timed steps
    for r in range(args.rounds):
        # a new order each round (the same on every rank): no configuration
        # always follows the same one (leaving torch.profiler has after-effects)
        order = random.Random(r).sample(names, len(names))
        for name in order:
            make, per_step = configs[name]
            outer = contextlib.nullcontext if per_step else make
            inner = make if per_step else contextlib.nullcontext
            entered = time.perf_counter()
            with outer():
                for _ in range(args.warm):  # first-step costs are not per-step
                    with inner():
                        step()
                sync()
                dist.barrier()
                threads = thread_cpu_ns()  # outside the timed span
                start_switches = training_switches()
                start, start_cpu = time.perf_counter(), time.process_time()
                start_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                entry[name].append(start - entered)
                before = hook_phases() if name == PHASES else {}
                part_ns = [0] * len(STEP_PARTS) if args.parts else None
                for _ in range(args.steps):
                    with inner():
                        step(part_ns)
                sync()
                if part_ns:
                    parts[name].append([ns / 1e3 / args.steps for ns in part_ns])
                if name == PHASES:
                    add_phases(phases, before, hook_phases())
                cpu[name].append((time.process_time() - start_cpu) / args.steps)
                faults[name].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                                     - start_faults) / args.steps)
                end_switches = training_switches()
                switches[name].append(tuple((e - s) / args.steps
                                            for e, s in zip(end_switches, start_switches)))
                dist.barrier()
                times[name].append((time.perf_counter() - start) / args.steps)
                after = thread_cpu_ns()
                if threads and after:
                    for role, out in (("training", training_cpu), ("writer", writer_cpu)):
                        out[name].append((after[role] - threads[role]) / 1e6 / args.steps)
            for _ in range(args.settle):  # what leaving it costs lands here, untimed
                step()
    if rank == 0:
        base, base_cpu, base_entry = (values[CONFIGURATIONS[0]] for values in (times, cpu, entry))

        print(f"DTensor MLP: {args.layers}x(Colwise {args.dim}->{args.hidden}, Rowwise "
              f"{args.hidden}->{args.dim}), batch {args.batch}, Adam, {dist.get_world_size()} "
              f"ranks {backend} on {args.device}{', pinned' if args.pin else ''}; "
              f"{args.rounds} rounds x "
              f"{args.steps} steps{'; steady heap' if args.steady_heap else ''}")
        print("ratio: median over rounds of (step time / uninstrumented step time of the same "
              "round) [95% bootstrap CI]; cpu: the process's CPU time, all threads; "
              "train: the training thread's CPU time; writer us: meshscope's threads (writer, monitor) "
              "per step; faults: minor page faults per step (median); switches: the training thread's "
              "voluntary/involuntary context switches per step (median)")
        print(f"entry ms: entering plus the {args.warm} warm steps, beyond the same steps "
              "uninstrumented (median over rounds; once per training run)")
        print(f"{'configuration':36s} {'ms/step':>8s} {'ratio':>7s} {'95% CI':>13s} "
              f"{'cpu ms':>7s} {'ratio':>7s} {'95% CI':>13s} {'train':>7s} {'writer us':>9s} "
              f"{'faults':>7s} {'switches':>9s} {'entry ms':>9s}")
        base_training = training_cpu[CONFIGURATIONS[0]]
        for name in names:
            wall, wall_lo, wall_hi = paired(times[name], base)
            c, c_lo, c_hi = paired(cpu[name], base_cpu)
            per_step = configs[name][1]
            extra = statistics.median(e - b for e, b in zip(entry[name], base_entry))
            train = (f"{paired(training_cpu[name], base_training)[0]:6.3f}x"
                     if base_training else "      -")
            writer = (f"{statistics.median(writer_cpu[name]) * 1e3:9.0f}"
                      if writer_cpu[name] else "        -")
            print(f"{name:36s} {statistics.median(times[name]) * 1e3:8.2f} {wall:6.3f}x "
                  f"[{wall_lo:5.3f},{wall_hi:5.3f}] {statistics.median(cpu[name]) * 1e3:7.2f} "
                  f"{c:6.3f}x [{c_lo:5.3f},{c_hi:5.3f}] {train} {writer} "
                  f"{statistics.median(faults[name]):7.0f} "
                  f"{statistics.median(v for v, _ in switches[name]):4.1f}/"
                  f"{statistics.median(i for _, i in switches[name]):<4.1f} "
                  f"{'per step' if per_step else f'{extra * 1e3:8.1f}':>9s}")
        if args.parts:
            print("training thread CPU us a step by part: median over rounds; beside it what the "
                  "configuration adds there, median over rounds of the difference to the "
                  "uninstrumented block of the same round [95% bootstrap CI]")
            for line in part_table(parts, names):
                print(line)
        if phases:
            print_phases(phases, args.rounds * args.steps)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"args": vars(args), "configurations": names,
                           "wall_s": times, "cpu_s": cpu, "training_cpu_ms": training_cpu,
                           "writer_cpu_ms": writer_cpu, "faults": faults, "switches": switches,
                           "entry_s": entry, "parts_us": parts, "step_parts": STEP_PARTS,
                           "hook_phases_ns": phases}, f, indent=1)
            print(f"per-round values: {args.json}")
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
