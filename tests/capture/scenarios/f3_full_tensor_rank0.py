"""Logging on rank 0 only: rank 0 gathers a sharded loss with
full_tensor(), a collective rank 1 never joins; rank 1 finishes and leaves,
and rank 0 dies in the all-gather with gloo's "Connection closed by peer".
Modelled on https://github.com/areal-project/AReaL/pull/187 ("full_tensor()
should happen in all rank, not just rank 0")."""

import datetime

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
    loss = distribute_tensor(torch.arange(8.0), mesh, [Shard(0)])
    if dist.get_rank() == 0:
        print("loss", loss.full_tensor().sum().item())  # FAILURE rank 0 only


if __name__ == "__main__":
    main()
