"""Seeds 000-002: Keras ModelParallel-style MLP on the torch backend. The
weights are DTensors sharded over the ranks' 'dp' mesh axis; every rank feeds its
own batch as a plain torch.Tensor, which meets the sharded weights in
subtract (normalization) and matmul: `aten.sub.Tensor: got mixed
torch.Tensor and DTensor`."""

import torch
from torch import nn

from common import eager_step, setup, sharded_weights, train

STEPS, ROWS, DIM, HIDDEN = 4, 8, 16, 32


class NormalizedMLP(nn.Module):
    def __init__(self, mesh):
        super().__init__()
        mean = torch.linspace(-0.5, 0.5, DIM)
        if mesh is not None:  # what ModelParallel's layout map does to the variables
            from torch.distributed.tensor import Replicate, distribute_tensor

            mean = distribute_tensor(mean, mesh, [Replicate()])
        self.register_buffer("mean", mean)
        self.w1, self.w2 = sharded_weights(mesh, DIM, HIDDEN)

    def forward(self, x, y):
        h = x - self.mean  # INCIDENT: plain batch meets the DTensor mean
        h = torch.relu(h @ self.w1)
        pred = h @ self.w2
        return ((pred - y) ** 2).mean()


def main():
    rank, world, mesh = setup()
    model = NormalizedMLP(mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    train(rank, STEPS, ROWS, DIM, eager_step(model, opt))


if __name__ == "__main__":
    main()
