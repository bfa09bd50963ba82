"""Seed 000: a torch.compile'd training step with DTensor parameters and a
plain input batch. Dynamo traces the step and calls aten ops directly,
bypassing framework wrappers; the mixed operands reach DTensor dispatch
either in the compiled graph or, when meshscope's mode is active, in eager
fallback. Either way the incident must be recorded (or fail with a clear
message), never hang."""

import torch
from torch import nn

from common import batch, finish, scalar, setup

STEPS, ROWS, DIM, HIDDEN = 3, 8, 16, 32


class MLP(nn.Module):
    def __init__(self, mesh):
        super().__init__()
        w1 = torch.randn(DIM, HIDDEN) / DIM**0.5
        w2 = torch.randn(HIDDEN, 1) / HIDDEN**0.5
        if mesh is not None:
            from torch.distributed.tensor import Shard, distribute_tensor

            w1 = distribute_tensor(w1, mesh, [Shard(1)])
            w2 = distribute_tensor(w2, mesh, [Shard(0)])
        self.w1 = nn.Parameter(w1)
        self.w2 = nn.Parameter(w2)

    def forward(self, x, y):
        pred = torch.relu(x @ self.w1) @ self.w2  # INCIDENT: plain batch @ sharded weight
        return ((pred - y) ** 2).mean()


def main():
    rank, world, mesh = setup()
    model = MLP(mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    @torch.compile(backend="eager")
    def train_step(x, y):
        loss = model(x, y)
        loss.backward()
        return loss

    losses = []
    for step in range(STEPS):
        x, y = batch(step, rank, ROWS, DIM)
        opt.zero_grad()
        loss = train_step(x, y)
        opt.step()
        losses.append(scalar(loss))
    finish(rank, losses)


if __name__ == "__main__":
    main()
