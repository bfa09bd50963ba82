"""A document mask for attention is built inside forward from plain
positions and applied to DTensor scores under tensor parallelism:
`aten.masked_fill.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/torchtitan#1440, "[deepseek] fix FlexAttention + TP"
("Without this PR, FlexAttention mask function will receive a mixed of
plain tensors and DTensors"): https://github.com/pytorch/torchtitan/pull/1440"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::masked_fill"], "origin": "B", "name": "blocked"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import forward_once


class DocumentAttention(nn.Module):
    def __init__(self, mesh, dim=8):
        super().__init__()
        self.wq = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))

    def forward(self, x):
        scores = (x @ self.wq) @ x.transpose(0, 1)
        doc_ids = torch.arange(x.shape[0]) // 3  # BIRTH
        blocked = doc_ids[:, None] != doc_ids[None, :]
        return scores.masked_fill(blocked, -1e9)  # INCIDENT


def main():
    forward_once(DocumentAttention, 6, 8)


if __name__ == "__main__":
    main()
