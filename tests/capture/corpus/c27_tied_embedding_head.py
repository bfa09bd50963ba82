"""A language model ties its output head to the token embedding, but the
parallelize_module plan names only the block's projection: the embedding
weight stays a plain parameter, and the tied head multiplies the DTensor
hidden states by it: `aten.linear.default: got mixed torch.Tensor and
DTensor`.

Modelled on pytorch/pytorch#156535, "FSDP2 - Tensor incompatibility" (the
embedding layer is not sharded, "I am assuming it remains an ordinary
torch.Tensor and is therefore throwing things off"):
https://github.com/pytorch/pytorch/issues/156535"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::linear", "aten::mm", "aten::matmul"], "origin": "A",
          "name": "self.tok.weight",
          "plan_hint": "add 'tok': ColwiseParallel() or RowwiseParallel() to the "
                       "parallelize_module plan"}


import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

from corpus_common import finish, result, setup


class TinyLM(nn.Module):
    def __init__(self, vocab=16, dim=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)  # BIRTH
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, tokens):
        h = self.proj(self.tok(tokens))
        return F.linear(h, self.tok.weight)  # INCIDENT


def main():
    _, mesh = setup()
    plan = {"proj": ColwiseParallel(output_layouts=Replicate(), use_local_output=False)}
    model = parallelize_module(TinyLM(), mesh, plan)
    result(model(torch.randint(0, 16, (2, 4))))
    finish()


if __name__ == "__main__":
    main()
