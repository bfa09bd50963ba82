"""Class-imbalance weights for the loss are made in the training script with
torch.tensor(...) and passed as `weight=` to `F.nll_loss` over the DTensor
log-probabilities of a tensor-parallel head: `aten.nll_loss_forward.default: got
mixed torch.Tensor and DTensor`.

Modelled on pytorch/pytorch#185167, "DTensor: `F.nll_loss(weight=...,
reduction='mean')` over a sharded batch returns wrong result" (class weights
passed to `F.nll_loss` next to DTensor inputs in a class-imbalanced loss):
https://github.com/pytorch/pytorch/issues/185167"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::nll_loss"], "origin": "H", "name": "class_weights"}


import torch
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


def main():
    _, mesh = setup()
    head = distribute_tensor(torch.randn(8, 5), mesh, [Replicate()])
    class_counts = [50, 10, 5, 30, 5]
    class_weights = torch.tensor([1.0 / c for c in class_counts])  # BIRTH
    for step in range(2):
        hidden = distribute_tensor(torch.randn(4, 8), mesh, [Replicate()])
        labels = distribute_tensor(torch.randint(0, 5, (4,)), mesh, [Replicate()])
        logp = F.log_softmax(hidden @ head, dim=-1)
        result(F.nll_loss(logp, labels, weight=class_weights))  # INCIDENT
    finish()


if __name__ == "__main__":
    main()
