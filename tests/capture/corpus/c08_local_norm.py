"""Gradient scaling computed from the local shard: the per-row norm comes
from `grad.to_local()`, a plain tensor, and divides the DTensor gradient:
`aten.div.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on ByteDance-Seed/VeOmni#1086, "[dist, parallel] fix: correct DDP
gradient sync under Ulysses SP" (norms computed from
`param.grad.to_local()`; the review explains why a local norm covers one
rank's shard only): https://github.com/ByteDance-Seed/VeOmni/pull/1086"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::div.Tensor"], "origin": "C", "name": ""}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


def scale_rows(grad):
    norm = grad.to_local().norm(dim=1, keepdim=True)  # BIRTH
    return grad / (norm + 1e-6)  # INCIDENT


def main():
    _, mesh = setup()
    w = nn.Parameter(distribute_tensor(torch.randn(4, 8), mesh, [Replicate()]))
    (w * w).sum().backward()
    result(scale_rows(w.grad))
    finish()


if __name__ == "__main__":
    main()
