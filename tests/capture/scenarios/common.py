"""Shared plumbing of the capture scenarios (tests/capture/test_scenarios.py).

Every scenario runs two ways:
  * distributed: `meshscope record -n 2 -- python sN_*.py` (gloo, 2 ranks, CPU);
    each rank gets its own slice of the data, as in real data parallelism;
  * reference: `python sN_*.py --reference`, one process, plain tensors, the
    global batch (both ranks' slices concatenated).
Losses go to $SCENARIO_OUT/<rank>.json (or reference.json) for the test to
compare."""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any

import torch
from torch import nn

WORLD = 2  # the reference emulates this many ranks


def reference_mode() -> bool:
    return "--reference" in sys.argv


def setup() -> tuple[int, int, Any]:
    """(rank, world, mesh); mesh is None in reference mode."""
    torch.manual_seed(0)
    if reference_mode():
        return 0, 1, None
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group(_backend(), timeout=datetime.timedelta(seconds=120))
    # One data-parallel dim: each rank reads its own batch, and the weights are
    # sharded over the same ranks (FSDP-style; Keras ModelParallel with a
    # batch axis). Mixed incidents of input data are per-rank shards.
    mesh = init_device_mesh(_use_device(), (dist.get_world_size(),), mesh_dim_names=("dp",))
    return dist.get_rank(), dist.get_world_size(), mesh


def rank_slice(step: int, rank: int, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7919 * step + 104729 * rank + 13)
    x = torch.randn(rows, cols, generator=g, device="cpu")
    y = x.sum(dim=1, keepdim=True) * 0.1 + torch.randn(rows, 1, generator=g, device="cpu") * 0.01
    return _to_default_device(x, y)


def batch(step: int, rank: int, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's batch; in reference mode the global batch of all ranks."""
    if reference_mode():
        parts = [rank_slice(step, r, rows, cols) for r in range(WORLD)]
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    return rank_slice(step, rank, rows, cols)


def scalar(loss: torch.Tensor) -> float:
    from torch.distributed.tensor import DTensor

    if isinstance(loss, DTensor):
        loss = loss.full_tensor()
    return float(loss.item())


def finish(rank: int, losses: list[float], **extra: Any) -> None:
    out = os.environ.get("SCENARIO_OUT")
    if out:
        name = "reference" if reference_mode() else f"rank{rank}"
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"losses": losses, **extra}, f)
    print(f"rank {rank} losses {losses}", flush=True)
    if not reference_mode():
        import torch.distributed as dist

        dist.destroy_process_group()


def sharded_weights(mesh: Any, dim: int, hidden: int) -> tuple[nn.Parameter, nn.Parameter]:
    """An MLP's two weights, sharded column- then row-wise over the mesh the way
    a model-parallel layout does (plain tensors in reference mode)."""
    w1 = torch.randn(dim, hidden) / dim**0.5
    w2 = torch.randn(hidden, 1) / hidden**0.5
    if mesh is not None:
        from torch.distributed.tensor import Shard, distribute_tensor

        w1 = distribute_tensor(w1, mesh, [Shard(1)])
        w2 = distribute_tensor(w2, mesh, [Shard(0)])
    return nn.Parameter(w1), nn.Parameter(w2)


class ShardedMLP(nn.Module):
    def __init__(self, mesh: Any, dim: int, hidden: int):
        super().__init__()
        self.w1, self.w2 = sharded_weights(mesh, dim, hidden)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        pred = torch.relu(x @ self.w1) @ self.w2  # INCIDENT (s4): plain batch @ sharded weight
        return ((pred - y) ** 2).mean()


def eager_step(model: nn.Module, opt: torch.optim.Optimizer) -> Any:
    """The usual step: zero_grad, loss = model(x, y), backward, optimizer step."""

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    return step


def train(rank: int, steps: int, rows: int, dim: int, step_fn: Any, prepare: Any = None) -> None:
    """Runs `step_fn(x, y) -> loss` on this rank's batches and writes the losses."""
    losses = []
    for step in range(steps):
        x, y = batch(step, rank, rows, dim)
        if prepare is not None:
            x, y = prepare(x, y)
        losses.append(_after_step(rank, step, scalar(step_fn(x, y))))
    finish(rank, losses)


def tensor_parallel_mlp(mesh: Any) -> tuple[nn.Module, torch.optim.Optimizer]:
    """pytorch/examples' tensor-parallel toy model in miniature: Linear(16,
    32) ColwiseParallel, ReLU, Linear(32, 16) RowwiseParallel (whose output
    all_reduce is waited for lazily), and its SGD optimizer."""
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


# scripts/gpu_check.sh runs the scenarios on a GPU. (Kept at the end of the
# file: the golden reports name lines above.)


def _backend() -> str:
    """MESHSCOPE_SCENARIO_BACKEND: gloo (default), nccl, "cpu:gloo,cuda:nccl", or
    ncclsim (NCCL's semantics on the CPU: scenarios/ncclsim.py)."""
    backend = os.environ.get("MESHSCOPE_SCENARIO_BACKEND", "gloo")
    if backend == "ncclsim":
        import ncclsim

        ncclsim.register()
    return backend


def _to_default_device(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    device = torch.get_default_device()
    return tensors if device.type == "cpu" else tuple(t.to(device) for t in tensors)


def _use_device() -> str:
    """MESHSCOPE_SCENARIO_DEVICE: cpu (default) or cuda. With cuda, GPU
    LOCAL_RANK % GPUs becomes the default device of new tensors, so models and
    state land there; the data is still drawn on the CPU (the same values)."""
    device = os.environ.get("MESHSCOPE_SCENARIO_DEVICE", "cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("MESHSCOPE_SCENARIO_DEVICE=cuda needs a CUDA GPU")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.set_default_device("cuda")
    return device


def _after_step(rank: int, step: int, loss: float) -> float:
    """SCENARIO_DELETE_RUN_AT_STEP=N: rank 0 deletes the run folder after
    step N, as a user cleaning up by mistake would; SCENARIO_FILL_DISK_AT_STEP=N:
    rank 0 fills the disk the run folder is on after step N, as another
    program writing there would (a ballast file beside the folder);
    SCENARIO_FAULT_DISK_AT_STEP=N with SCENARIO_FAULT_DISK_FILE=PATH: after
    step N every rank flushes its recording, then rank 0 creates PATH, the
    trigger of a `MESHSCOPE_FAULT_DISK=...-when=PATH` fault, so the disk fails
    at that point of the job whatever the writer's batches were
    (test_store_faults.py)."""
    run_dir = os.environ.get("MESHSCOPE_RUN_DIR")
    at = os.environ.get("SCENARIO_DELETE_RUN_AT_STEP")
    if at is not None and rank == 0 and step == int(at) and run_dir:
        import shutil

        shutil.rmtree(run_dir)
    at = os.environ.get("SCENARIO_FILL_DISK_AT_STEP")
    if at is not None and rank == 0 and step == int(at) and run_dir:
        chunk = b"\0" * 4096
        ballast = os.path.join(os.path.dirname(os.path.abspath(run_dir)), "ballast")
        with open(ballast, "wb", buffering=0) as f:
            try:
                while f.write(chunk):
                    pass
            except OSError:  # ENOSPC: the disk is full
                pass
    at, trigger = os.environ.get("SCENARIO_FAULT_DISK_AT_STEP"), os.environ.get(
        "SCENARIO_FAULT_DISK_FILE")
    if at is not None and trigger and step == int(at):
        import torch.distributed as dist

        capture = sys.modules.get("meshscope._capture")
        if capture is not None:
            capture.flush()
        dist.barrier()
        if rank == 0:
            open(trigger, "w").close()
        dist.barrier()
    return loss
