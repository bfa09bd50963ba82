"""A rotary-embedding cache precomputed in __init__ and kept as a plain
attribute (not a registered buffer, so no plan or `fully_shard` moves it)
meets the DTensor queries in forward: `aten.mul.Tensor: got mixed
torch.Tensor and DTensor`.

Modelled on pytorch/torchtitan#3458, "[RoPE] Move centralized freqs_cis to
each transform layer" (where the RoPE cache lives and on which device and
mesh it is initialized under parallelism):
https://github.com/pytorch/torchtitan/pull/3458"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul.Tensor"], "origin": "H", "name": "self.freqs_cis"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import forward_once


class Rotary(nn.Module):
    def __init__(self, mesh, seq=6, dim=8):
        super().__init__()
        self.wq = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))
        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))  # BIRTH
        self.freqs_cis = torch.cat([freqs, freqs]).cos().expand(seq, dim).contiguous()

    def forward(self, x):
        q = x @ self.wq
        return q * self.freqs_cis  # INCIDENT


def main():
    forward_once(Rotary, 6, 8)


if __name__ == "__main__":
    main()
