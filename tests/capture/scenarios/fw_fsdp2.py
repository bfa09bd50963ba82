"""FSDP2 as pytorch/examples' distributed/FSDP2 example uses it, on CPU:
`fully_shard` on each block and then on the root over a 2-rank data-parallel
mesh, each rank training on its own batch; the parameters are DTensors
sharded on dim 0 and the loss a plain tensor. The framework matrix's healthy
run: no incident, and the losses of the same run without meshscope.

Modelled on https://github.com/pytorch/examples/tree/main/distributed/FSDP2
(fully_shard per transformer block, then the root).
"""

from __future__ import annotations

import torch
from torch import nn

from common import eager_step, train

DIM, HIDDEN, LAYERS, STEPS = 16, 32, 2, 3


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


def main() -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
    torch.manual_seed(0)
    model = nn.Sequential(*(Block() for _ in range(LAYERS)), nn.Linear(DIM, 1))
    for block in model[:LAYERS]:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(model(x), y)

    train(rank, STEPS, 8, DIM, eager_step(loss_of, optimizer))  # each rank its own batch


if __name__ == "__main__":
    main()
