"""An attention written out by hand masks padded keys with torch.where; the
boolean condition is built inside forward with torch.ones and filled from
the sequence lengths, a plain tensor, while the scores are DTensors:
`aten.where.ScalarOther: got mixed torch.Tensor and DTensor`.

Modelled on intel/torch-xpu-ops#1555, "[distributed] RuntimeError:
aten.add.Tensor: got mixed torch.Tensor and DTensor" (in PyTorch's
tensor-parallel transformer tests, "The root cause is the mask tensor, which
is not converted to DTensor", on the math attention path):
https://github.com/intel/torch-xpu-ops/issues/1555"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::where"], "origin": "B", "name": "key_valid"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


class PaddedAttention(nn.Module):
    def __init__(self, mesh, lengths, dim=8):
        super().__init__()
        self.wk = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))
        self.lengths = lengths

    def forward(self, x):
        scores = (x @ self.wk) @ x.transpose(1, 2)
        key_valid = torch.ones(x.shape[0], 1, x.shape[1], dtype=torch.bool)  # BIRTH
        for i, n in enumerate(self.lengths):
            key_valid[i, :, n:] = False
        return torch.softmax(torch.where(key_valid, scores, -1e9), -1)  # INCIDENT


def main():
    _, mesh = setup()
    attn = PaddedAttention(mesh, lengths=[5, 3])
    result(attn(distribute_tensor(torch.randn(2, 5, 8), mesh, [Replicate()])))
    finish()


if __name__ == "__main__":
    main()
