"""A rotary embedding computes its angles in forward from position ids made
with torch.arange, a plain tensor, and multiplies them into the DTensor
queries of a tensor-parallel attention: `aten.mul.Tensor: got mixed
torch.Tensor and DTensor`.

Modelled on huggingface/transformers#45028, "FSDP + TP & native save/load
distributed" (its review thread on `apply_rotary_pos_emb`, where the cos/sin
computed from the position ids meet DTensor queries under TP):
https://github.com/huggingface/transformers/pull/45028"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul.Tensor"], "origin": "B", "name": "cos"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import forward_once


class RotaryQuery(nn.Module):
    def __init__(self, mesh, dim=8, theta=0.5):
        super().__init__()
        self.wq = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))
        self.theta = theta

    def forward(self, x):
        q = x @ self.wq
        position_ids = torch.arange(x.shape[0])  # BIRTH
        cos = torch.cos(position_ids[:, None] * self.theta)
        return q * cos  # INCIDENT


def main():
    forward_once(RotaryQuery, 6, 8)


if __name__ == "__main__":
    main()
