"""Rank-dependent data replicated: a random mask drawn per rank inside a
layer's forward, without a shared seed, meets a replicated activation.
DTensor (or the auto policy, or Keras' promotion mode) replicates the plain
tensor, trusting every rank to hold the same values; they do not, and each
rank trains on its own mask. meshscope's fingerprints find the promotion
INVALID; the fix it prints must make the values identical (the mesh's RNG, a
broadcast), never a from_local(..., [Replicate()]) that keeps them apart.

Modelled on RNG state that drifts apart across tensor-parallel ranks:
- https://github.com/NVIDIA/Megatron-LM/pull/206 (torch's RNG state out of
  sync between TP ranks; dropout masks differ)
- https://github.com/pytorch/pytorch/pull/103910 (DTensor's RNG tracker for
  tensor parallelism: random ops that agree across the mesh)

SCENARIO_MASK: "direct" (the noise itself comes from torch.rand) or
"derived" (a 0/1 mask computed from it). SCENARIO_FIX: Python lines run
right after the mask is made (the fix meshscope printed), with the mask's
name, mesh, torch and dist in scope.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from common import finish

DIM, STEPS = 8, 2


class NoisyLayer(nn.Module):
    def __init__(self, mesh) -> None:
        super().__init__()
        from torch.distributed.tensor import Replicate, distribute_tensor

        self.mesh = mesh
        self.weight = nn.Parameter(distribute_tensor(torch.eye(DIM), mesh, [Replicate()]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        h = x @ self.weight
        scope = {"mesh": self.mesh, "torch": torch, "dist": dist}
        if os.environ.get("SCENARIO_MASK", "direct") == "direct":
            noise = torch.rand(h.shape)  # per rank: no shared seed
            exec(os.environ.get("SCENARIO_FIX", ""), scope | {"noise": noise}, scope)
            noise = scope.get("noise", noise)
            return h * noise  # INCIDENT: a plain per-rank tensor replicated
        mask = (torch.rand(h.shape) > 0.5).float()
        exec(os.environ.get("SCENARIO_FIX", ""), scope | {"mask": mask}, scope)
        mask = scope.get("mask", mask)
        return h * mask  # INCIDENT: a plain per-rank tensor replicated


def main() -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    layer = NoisyLayer(mesh)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)  # the bug: each rank's RNG on its own
    losses = []
    for _ in range(STEPS):
        x = DTensor.from_local(torch.ones(4, DIM), mesh, [Replicate()])
        loss = layer(x).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.full_tensor()))
    finish(rank, losses)


if __name__ == "__main__":
    main()
