"""Seed 000: a torch.compile'd training step with DTensor parameters and a
plain input batch. Dynamo traces the step and calls aten ops directly,
bypassing framework wrappers; the mixed operands reach DTensor dispatch
either in the compiled graph or, when meshscope's mode is active, in eager
fallback. Either way the incident must be recorded (or fail with a clear
message), never hang."""

import torch

from common import ShardedMLP, setup, train

STEPS, ROWS, DIM, HIDDEN = 3, 8, 16, 32


def main():
    rank, world, mesh = setup()
    model = ShardedMLP(mesh, DIM, HIDDEN)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    @torch.compile(backend="eager")
    def train_step(x, y):
        loss = model(x, y)
        loss.backward()
        return loss

    def step(x, y):
        opt.zero_grad()
        loss = train_step(x, y)
        opt.step()
        return loss

    train(rank, STEPS, ROWS, DIM, step)


if __name__ == "__main__":
    main()
