"""A custom autograd Function scales the gradient in its backward with a
per-feature weight it makes there as a plain tensor, while the gradient
flowing back is a DTensor: `aten.mul.Tensor: got mixed torch.Tensor and
DTensor` raised inside backward, where the plain tensor was made by the
user's own backward code (not by autograd's engine).

Modelled on pytorch/pytorch#143134 (a custom torch.autograd.Function mixing
an auxiliary loss with DTensors in tensor-parallel training; its backward
sees DTensor gradients) and pytorch/pytorch#118461 (a plain tensor made in
backward meets DTensor gradients: "got mixed torch.Tensor and DTensor"):
https://github.com/pytorch/pytorch/issues/143134
https://github.com/pytorch/pytorch/issues/118461"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul"], "origin": "B", "name": "weights"}


import torch
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


class ScaleGrad(torch.autograd.Function):
    """Identity forward; backward scales each feature's gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        weights = torch.linspace(0.5, 1.5, grad.shape[-1])  # BIRTH
        return grad * weights  # INCIDENT


def main():
    _, mesh = setup()
    w = distribute_tensor(torch.randn(4, 8), mesh, [Replicate()]).requires_grad_()
    ScaleGrad.apply(w).sum().backward()
    result(w.grad)
    finish()


if __name__ == "__main__":
    main()
