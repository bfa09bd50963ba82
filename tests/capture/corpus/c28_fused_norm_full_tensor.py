"""A fused RMSNorm kernel wrapper accepts a DTensor input by gathering it
with full_tensor() and running the plain kernel; its plain output then
meets the DTensor residual stream: `aten.add.Tensor: got mixed torch.Tensor
and DTensor`.

Modelled on linkedin/Liger-Kernel#982, "Changing RMS layer norm to accept
DTensors." (the kernel's forward gathers a DTensor input with
`X = X.full_tensor()` and computes on plain tensors under tensor
parallelism): https://github.com/linkedin/Liger-Kernel/pull/982"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add.Tensor"], "origin": "C", "name": "normed"}


import torch
from torch import nn
from torch.distributed.tensor import DTensor, Replicate, distribute_tensor

from corpus_common import forward_once


def fused_rms_norm(x, eps=1e-6):
    if isinstance(x, DTensor):
        x = x.full_tensor()  # BIRTH
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class Block(nn.Module):
    def __init__(self, mesh, dim=8):
        super().__init__()
        self.w = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))

    def forward(self, x):
        h = x @ self.w
        normed = fused_rms_norm(h)
        return h + normed  # INCIDENT


def main():
    forward_once(Block, 4, 8)


if __name__ == "__main__":
    main()
