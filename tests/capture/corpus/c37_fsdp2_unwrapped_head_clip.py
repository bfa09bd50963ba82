"""FSDP2 applied to the transformer block only: `fully_shard(model.block)`
but never `fully_shard(model)`, so the root's own head keeps plain
parameters while the block's are DTensors. torch.nn.utils.clip_grad_norm_
takes the norms of all gradients in one foreach op, where the head's plain
gradients meet the block's DTensor ones: `aten._foreach_norm.Scalar: got
mixed torch.Tensor and DTensor`.

Modelled on pyg-team/pytorch_geometric#10317, "Fix gradient clipping failure
with DTensor parameters" (clip_grad_norm_ over a parameter list mixing
torch.Tensor and DTensor gradients):
https://github.com/pyg-team/pytorch_geometric/pull/10317"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::_foreach_norm", "aten::_foreach_mul_"],
          "origin": "A", "name": "model.head.weight.grad",
          "plan_hint": "(fully_shard(model.head, mesh=mesh) for its module, or fully_shard(model)",
          "fix": "fully_shard(model.head, mesh=mesh)  # then fully_shard(model) for the root"}

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

from corpus_common import finish, result, setup


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(8, 8)
        self.head = nn.Linear(8, 2)  # BIRTH

    def forward(self, x):
        return self.head(torch.relu(self.block(x)))


def main():
    _, mesh = setup("fsdp")
    model = Model()
    fully_shard(model.block, mesh=mesh)
    model(torch.randn(4, 8)).sum().backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # INCIDENT
    result([p.grad for p in model.parameters()])
    finish()


if __name__ == "__main__":
    main()
