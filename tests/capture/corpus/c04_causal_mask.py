"""An attention block builds its causal mask inside forward from
torch.ones/triu, a plain tensor, and adds it to DTensor scores:
`aten.add.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on the cases PyTorch's own guide for this error describes
(pytorch/pytorch#162651, "[DTensor] Add guide for what to do about mixed
torch.Tensor and DTensor operations": a tensor created inside a
tensor-parallel module's forward): https://github.com/pytorch/pytorch/pull/162651"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add.Tensor"], "origin": "B", "name": "mask",
          "inside": "Attention.forward()"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import forward_once


class Attention(nn.Module):
    def __init__(self, mesh, dim=8):
        super().__init__()
        self.qk = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))

    def forward(self, x):
        scores = x @ self.qk @ x.transpose(0, 1)
        mask = torch.triu(torch.full((x.shape[0], x.shape[0]), -1e9), 1)  # BIRTH
        return torch.softmax(scores + mask, -1)  # INCIDENT


class Block(nn.Module):
    """The attention inside a transformer block: the evidence names the
    innermost module whose forward made the mask, not the block."""

    def __init__(self, mesh):
        super().__init__()
        self.attn = Attention(mesh)

    def forward(self, x):
        return self.attn(x)


def main():
    forward_once(Block, 5, 8)


if __name__ == "__main__":
    main()
