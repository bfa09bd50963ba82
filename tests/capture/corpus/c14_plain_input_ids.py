"""A model whose parameters were all made DTensors with distribute_module
(no input_fn) is called with a plain batch of token ids: the embedding
lookup meets the DTensor table: `aten.embedding.default: got mixed
torch.Tensor and DTensor`.

Modelled on verl-project/verl#4756, "RuntimeError: aten.embedding.default:
got mixed torch.Tensor and DTensor" (input_ids reach the sharded model as
plain tensors during generation: "the discrepancy between the tensor type of
inputs and models"): https://github.com/verl-project/verl/issues/4756"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::embedding"], "origin": "D", "name": "input_ids"}


import torch
from torch import nn
from torch.distributed.tensor import distribute_module

from corpus_common import finish, result, setup


class TinyLM(nn.Module):
    def __init__(self, vocab=16, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids):
        return self.head(self.embed(input_ids))  # INCIDENT


def main():
    _, mesh = setup()
    model = distribute_module(TinyLM(), mesh)
    input_ids = torch.randint(0, 16, (2, 4))  # BIRTH: this rank's batch
    result(model(input_ids))
    finish()


if __name__ == "__main__":
    main()
