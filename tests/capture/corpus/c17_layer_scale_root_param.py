"""A block scales its MLP branch by a learned per-channel LayerScale vector
kept as a parameter of the block itself; the parallelize_module plan can
only name the block's Linear submodules, so the vector stays a plain
parameter while the MLP output is a DTensor (use_local_output=False):
`aten.mul.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/pytorch#124019, "[FSDP+TP] RuntimeError: 'weight' must
be 2-D" (with a plan naming only part of the model, `aten.mm.default: got
mixed torch.Tensor and DTensor`: "Is it because I haven't written tensor
parallelism for all layers?"): https://github.com/pytorch/pytorch/issues/124019"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul.Tensor"], "origin": "A", "name": "self.gamma",
          "plan_hint": "(block.gamma = nn.Parameter(distribute_tensor(block.gamma, mesh, "
                       "[Replicate()])))"}


import torch
from torch import nn
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

from corpus_common import finish, result, setup


class ScaledMLPBlock(nn.Module):
    def __init__(self, dim=8, init=1e-2):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(init * torch.ones(dim))  # BIRTH

    def forward(self, x):
        h = self.fc2(torch.relu(self.fc1(x)))
        return self.gamma * h  # INCIDENT


def main():
    _, mesh = setup()
    plan = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel(use_local_output=False)}
    block = parallelize_module(ScaledMLPBlock(), mesh, plan)
    result(block(torch.randn(4, 8)))
    finish()


if __name__ == "__main__":
    main()
