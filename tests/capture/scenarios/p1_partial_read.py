"""A Partial DTensor read as a number on one rank: rank 0 logs the mean
absolute weight of a sharded weight every step, `float(w.abs().mean())`.
The mean over a sharded dim is Partial: float() (item()) returns rank 0's
unreduced share, a plausible number that is not the mean, and nothing
raises. meshscope records the read with its line and prints once that it is
a share; the fix is full_tensor() on every rank (a collective), then the
rank-0 log line.

Modelled on public reports of the same read:
- https://github.com/pytorch/pytorch/issues/144054 (item() on a DTensor only
  grabs the local tensor: a row-wise norm is Partial)
- https://github.com/pytorch/pytorch/issues/166638 (clip_grad_norm_'s total
  norm under FSDP2 is a Partial DTensor; .item() gives one rank's share)

SCENARIO_FIX: Python lines run on every rank with `t` (the Partial value)
in scope; they set `value`, which rank 0 logs instead.
"""

from __future__ import annotations

import os

import torch

from common import finish

STEPS = 3


def main() -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    w = torch.nn.Parameter(distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]))
    optimizer = torch.optim.SGD([w], lr=0.1)
    fix = os.environ.get("SCENARIO_FIX", "")
    logged, truth = [], []
    for _ in range(STEPS):
        loss = (w * w).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            truth.append(float(w.full_tensor().abs().mean()))  # every rank: a collective
            if fix:
                scope = {"t": w.abs().mean()}
                exec(fix, scope)
                if rank == 0:
                    logged.append(scope["value"])
            elif rank == 0:
                logged.append(float(w.abs().mean()))  # INCIDENT: rank 0's share only
    finish(rank, [float(loss.full_tensor())], logged=logged, truth=truth)


if __name__ == "__main__":
    main()
