"""A sequence-parallel norm returns a DTensor (use_local_output=False) and
the block adds the plain input back as its residual:
`aten.add.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/pytorch#131346, "[tp] improve SequenceParallel and its
documentation" (SequenceParallel's handling of plain torch.Tensor inputs
confused users; it fixes pytorch/pytorch#129355):
https://github.com/pytorch/pytorch/pull/131346"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add.Tensor"], "origin": "D", "name": "x"}


import torch
from torch import nn
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

from corpus_common import finish, result, setup


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x) + x  # INCIDENT


def main():
    rank, mesh = setup()
    block = parallelize_module(Block(), mesh, {"norm": SequenceParallel(use_local_output=False)})
    x = torch.randn(2, 4, 8)  # BIRTH: this rank's shard of the sequence
    result(block(x))
    finish()


if __name__ == "__main__":
    main()
