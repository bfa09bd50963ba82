"""Seeds 000-002: Keras ModelParallel-style MLP on the torch backend. The
weights are DTensors sharded over the ranks' 'dp' mesh axis; every rank feeds its
own batch as a plain torch.Tensor, which meets the sharded weights in
subtract (normalization) and matmul: `aten.sub.Tensor: got mixed
torch.Tensor and DTensor`."""

import torch
from torch import nn

from common import batch, finish, reference_mode, scalar, setup

STEPS, ROWS, DIM, HIDDEN = 4, 8, 16, 32


class NormalizedMLP(nn.Module):
    def __init__(self, mesh):
        super().__init__()
        mean = torch.linspace(-0.5, 0.5, DIM)
        w1 = torch.randn(DIM, HIDDEN) / DIM**0.5
        w2 = torch.randn(HIDDEN, 1) / HIDDEN**0.5
        if mesh is not None:  # what ModelParallel's layout map does to the variables
            from torch.distributed.tensor import Replicate, Shard, distribute_tensor

            mean = distribute_tensor(mean, mesh, [Replicate()])
            w1 = distribute_tensor(w1, mesh, [Shard(1)])
            w2 = distribute_tensor(w2, mesh, [Shard(0)])
        self.register_buffer("mean", mean)
        self.w1 = nn.Parameter(w1)
        self.w2 = nn.Parameter(w2)

    def forward(self, x, y):
        h = x - self.mean  # INCIDENT: plain batch meets the DTensor mean
        h = torch.relu(h @ self.w1)
        pred = h @ self.w2
        return ((pred - y) ** 2).mean()


def main():
    rank, world, mesh = setup()
    model = NormalizedMLP(mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(STEPS):
        x, y = batch(step, rank, ROWS, DIM)
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(scalar(loss))
    finish(rank, losses)


if __name__ == "__main__":
    main()
