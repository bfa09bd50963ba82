"""An RMSNorm inside a tensor-parallel block is left out of the
parallelize_module plan: its weight stays a plain parameter while the
hidden states reaching it are DTensors (the projection before it keeps
use_local_output=False): `aten.mul.Tensor: got mixed torch.Tensor and
DTensor`.

Modelled on linkedin/Liger-Kernel#826, "Tensor Parallel support" (with TP
enabled, training fails in `self.input_layernorm(hidden_states)`; the fix,
linkedin/Liger-Kernel#982, notes that RMS norm parameters are not sharded by
the usual TP plans while their inputs are DTensors):
https://github.com/linkedin/Liger-Kernel/issues/826"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul.Tensor"], "origin": "A", "name": "self.weight",
          "plan_hint": "'norm': SequenceParallel()"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

from corpus_common import finish, result, setup


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # BIRTH

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x  # INCIDENT


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=False)
        self.norm = RMSNorm(dim)

    def forward(self, x):
        return self.norm(self.proj(x))


def main():
    _, mesh = setup()
    plan = {"proj": RowwiseParallel(input_layouts=Replicate(), use_local_output=False)}
    block = parallelize_module(Block(), mesh, plan)
    result(block(torch.randn(4, 8)))
    finish()


if __name__ == "__main__":
    main()
