"""A block's residual stream is a DTensor, but its feed-forward output comes
back from RowwiseParallel as a plain local tensor (use_local_output defaults
to True): the residual add mixes them: `aten.add.Tensor: got mixed
torch.Tensor and DTensor`.

Modelled on facebookresearch/lingua#62, "[BUGFIX] Issue with
TransformerBlock parallel plan and residual connections." (the outputs of
`attention.wo` and `feed_forward.w2` are plain tensors, AsyncCollectiveTensor,
beside DTensor residuals; the fix sets use_local_output=False):
https://github.com/facebookresearch/lingua/pull/62"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add.Tensor"], "origin": "C", "name": "out"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

from corpus_common import finish, result, setup


class FeedForward(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.w1 = nn.Linear(dim, 4 * dim, bias=False)
        self.w2 = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, h):
        out = self.w2(torch.relu(self.w1(h)))  # BIRTH
        return h + out  # INCIDENT


def main():
    _, mesh = setup()
    ffn = parallelize_module(FeedForward(), mesh, {"w1": ColwiseParallel(),
                                                   "w2": RowwiseParallel()})
    result(ffn(distribute_tensor(torch.randn(4, 8), mesh, [Replicate()])))
    finish()


if __name__ == "__main__":
    main()
