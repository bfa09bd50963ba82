"""An op DTensor has no sharding strategy for, called on a sharded DTensor:
NotImplementedError "Operator aten.X does not have a sharding strategy
registered". Whether running it on each rank's shard (local_map) is the
same computation depends on the op's arguments: along a dim no operand is
sharded on it is; along the sharded dim (GLU halves it, logcumsumexp scans
it) or over the whole tensor (median) it computes something else, and the
fix must gather that dim first. The fix meshscope prints is run as printed
and its result compared with the single-process reference.

Modelled on public reports:
- https://github.com/pytorch/pytorch/issues/124990 (aten.diagonal: no
  sharding strategy registered on a Shard(0) DTensor)
- https://github.com/pytorch/pytorch/issues/147724 (aten.select.int has no
  strategy; ops without one are added op by op)
- https://github.com/pytorch/pytorch/issues/152249 (aten.masked_fill_ in
  torch.norm's backward: the workaround runs the op on to_local() shards,
  right only because the norm's dim is not the sharded one)

SCENARIO_OP: glu (along the sharded dim), glu_rows (the same call on a
Shard(0) tensor: local_map is right), median (no dim: the whole tensor),
logcumsumexp (a scan along the sharded dim). SCENARIO_MODE=1: the call runs
under a pass-through TorchDispatchMode, as everything does under Keras'
promotion mode. SCENARIO_FIX: the printed fix,
run at the call's line with `h`, torch, F, local_map, Shard and Replicate in
scope; a fix that assigns `out` replaces the call.
"""

from __future__ import annotations

import contextlib
import os

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from common import finish, reference_mode

SHARD_DIM = {"glu": 1, "glu_rows": 0, "median": 0, "logcumsumexp": 0}


def call(op: str, h: torch.Tensor) -> torch.Tensor:
    if op.startswith("glu"):
        return F.glu(h, dim=-1)  # INCIDENT glu: no sharding strategy
    if op == "median":
        return torch.median(h)  # INCIDENT median: no sharding strategy
    return torch.logcumsumexp(h, dim=0)  # INCIDENT logcumsumexp: no sharding strategy


class PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def main() -> None:
    op = os.environ.get("SCENARIO_OP", "glu")
    torch.manual_seed(0)
    h = torch.randn(8, 6)
    rank = 0
    scope = {"torch": torch, "F": F}
    if not reference_mode():
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        from torch.distributed.tensor.experimental import local_map

        dist.init_process_group("gloo")
        rank = dist.get_rank()
        mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
        h = distribute_tensor(h, mesh, [Shard(SHARD_DIM[op])])
        scope |= {"local_map": local_map, "Shard": Shard, "Replicate": Replicate}
    scope["h"] = h
    exec(os.environ.get("SCENARIO_FIX", ""), scope)
    h, out = scope["h"], scope.get("out")
    mode = PassThrough() if os.environ.get("SCENARIO_MODE") else contextlib.nullcontext()
    try:
        with mode:
            if out is None:
                out = call(op, h)
    except NotImplementedError as e:
        print(f"rank {rank}: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
        finish(rank, [])
        return
    if hasattr(out, "full_tensor"):
        out = out.full_tensor()
    finish(rank, [float(v) for v in out.flatten()])


if __name__ == "__main__":
    main()
