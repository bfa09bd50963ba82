"""A redistribution to a Shard dim the tensor does not have: DTensor fails
deep inside with `IndexError: list index out of range`, which names neither
the dim nor the tensor. Modelled on https://github.com/pytorch/pytorch/pull/112404
("Previously, an index error ... is thrown and the error is not clear")."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor


def main():
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
    weight = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)])
    column = weight.redistribute(mesh, [Shard(2)])  # FAILURE
    print(column.shape)


if __name__ == "__main__":
    main()
