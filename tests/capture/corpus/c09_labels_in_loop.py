"""Labels made in the training loop stay plain while the logits of a
tensor-parallel head are DTensors; the loss meets them:
`aten.nll_loss_forward.default: got mixed torch.Tensor and DTensor`.

Modelled on meta-pytorch/torchtune#2856, the loss step
`self._loss_fn(weight, outputs, labels)` with model outputs as DTensors:
https://github.com/meta-pytorch/torchtune/issues/2856"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::nll_loss"], "origin": "H", "name": "labels"}


import torch
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


def main():
    _, mesh = setup()
    head = distribute_tensor(torch.randn(8, 5), mesh, [Replicate()])
    for step in range(2):
        hidden = distribute_tensor(torch.randn(4, 8), mesh, [Replicate()])
        labels = torch.randint(0, 5, (4,))  # BIRTH
        logits = F.log_softmax(hidden @ head, dim=-1)
        result(F.nll_loss(logits, labels))  # INCIDENT
    finish()


if __name__ == "__main__":
    main()
