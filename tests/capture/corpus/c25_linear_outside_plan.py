"""A parallelize_module plan covers only the first projection of a block
(ColwiseParallel with use_local_output=False, so its output stays a DTensor);
the second projection is left out of the plan, and its plain weight meets
the DTensor activations: `aten.mm.default: got mixed torch.Tensor and
DTensor`.

Modelled on pytorch/pytorch#124019, "[FSDP+TP] RuntimeError: 'weight' must
be 2-D" (the follow-up `aten.mm.default: got mixed torch.Tensor and DTensor`
with a plan naming one layer only: "Is it because I haven't written tensor
parallelism for all layers?"): https://github.com/pytorch/pytorch/issues/124019"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mm", "aten::matmul", "aten::linear"], "origin": "A",
          "name": "self.proj.weight",
          "plan_hint": "add 'proj': ColwiseParallel() or RowwiseParallel() to the "
                       "parallelize_module plan"}


import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

from corpus_common import finish, result, setup


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, 2 * dim, bias=False)
        self.proj = nn.Linear(2 * dim, dim, bias=False)  # BIRTH

    def forward(self, x):
        h = torch.relu(self.fc(x))
        return self.proj(h)  # INCIDENT


def main():
    _, mesh = setup()
    block = parallelize_module(Block(), mesh, {"fc": ColwiseParallel(use_local_output=False)})
    result(block(torch.randn(4, 8)))
    finish()


if __name__ == "__main__":
    main()
