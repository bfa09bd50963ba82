"""Plumbing of the public-report corpus (tests/capture/test_birth_corpus.py):
each script is a two-rank CPU (gloo) reduction of a public report of
"got mixed torch.Tensor and DTensor". A script marks the line where the
plain tensor is born with `# BIRTH` and the op that meets a DTensor with
`# INCIDENT`; the test records it with `meshscope record -n 2 --policy auto`
and checks the op, the origin class, the birth line and the user's name for
the tensor."""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def setup(dim_name: str = "tp"):
    """(rank, mesh) of a one-dimensional mesh over both ranks."""
    torch.manual_seed(0)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    return dist.get_rank(), init_device_mesh("cpu", (dist.get_world_size(),),
                                             mesh_dim_names=(dim_name,))


def finish() -> None:
    dist.barrier()
    dist.destroy_process_group()


def forward_once(make_module, rows: int, cols: int) -> None:
    """Builds make_module(mesh) and calls it once on a replicated DTensor
    batch of rows x cols: the scripts whose incident is inside forward."""
    from torch.distributed.tensor import Replicate, distribute_tensor

    _, mesh = setup()
    make_module(mesh)(distribute_tensor(torch.randn(rows, cols), mesh, [Replicate()]))
    finish()
