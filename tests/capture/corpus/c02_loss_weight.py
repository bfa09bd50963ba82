"""The loss is computed outside the model with a projection weight the
script made itself as a plain tensor, against the model's DTensor hidden
states: `aten.mm.default: got mixed torch.Tensor and DTensor` in the loss
step.

Modelled on meta-pytorch/torchtune#2856, "DTensor/torch.Tensor Mixed Type
Error in Llama4 LoRA Fine-tuning" (the error raised from `_loss_step`,
`self._loss_fn(weight, outputs, labels)`):
https://github.com/meta-pytorch/torchtune/issues/2856"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mm", "aten::matmul"], "origin": "H", "name": "weight"}


import torch
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


def chunked_loss(weight, hidden, labels):
    logits = hidden @ weight  # INCIDENT
    return torch.nn.functional.cross_entropy(logits, labels)


def main():
    _, mesh = setup()
    proj = torch.randn(16, 10)  # BIRTH
    hidden = distribute_tensor(torch.randn(4, 16), mesh, [Replicate()])
    labels = distribute_tensor(torch.tensor([1, 2, 3, 4]), mesh, [Replicate()])
    result(chunked_loss(proj, hidden, labels))
    finish()


if __name__ == "__main__":
    main()
