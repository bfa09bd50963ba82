"""Seed 003: an optimizer written like Keras' torch optimizers. Parameters are
DTensors and the inputs are distributed correctly, but the optimizer creates
its state as plain full-size tensors and keeps hyperparameters as tensors,
so the `torch._foreach_*` updates mix them with DTensor parameters and
gradients."""

import torch
from torch import nn

from common import batch, finish, scalar, setup

STEPS, ROWS, DIM, HIDDEN = 4, 8, 16, 32


class KerasStyleAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
        super().__init__(params, dict(lr=lr, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params]
            states = [self.state[p] for p in params]
            for state, p in zip(states, params):
                if not state:
                    state["m"] = torch.zeros(p.shape)  # should be torch.zeros_like(p)
                    state["v"] = torch.zeros(p.shape)
                    state["t"] = 0
                state["t"] += 1
            ms, vs = [s["m"] for s in states], [s["v"] for s in states]
            t = states[0]["t"]
            torch._foreach_mul_(ms, group["beta_1"])
            torch._foreach_add_(ms, grads, alpha=1 - group["beta_1"])  # INCIDENT: state m
            torch._foreach_mul_(vs, group["beta_2"])
            torch._foreach_addcmul_(vs, grads, grads, value=1 - group["beta_2"])
            denom = torch._foreach_sqrt(vs)
            torch._foreach_add_(denom, group["epsilon"])
            # hyperparameters kept as a tensor, one step size per parameter
            step_size = torch.tensor([-group["lr"] / (1 - group["beta_1"] ** t)] * len(params))
            torch._foreach_addcdiv_(params, ms, denom, step_size)


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
        pred = torch.relu(x @ self.w1) @ self.w2
        return ((pred - y) ** 2).mean()


def main():
    rank, world, mesh = setup()
    model = MLP(mesh)
    opt = KerasStyleAdam(model.parameters(), lr=0.01)
    losses = []
    for step in range(STEPS):
        x, y = batch(step, rank, ROWS, DIM)
        if mesh is not None:  # the data side is right here: each batch is a shard
            from torch.distributed.tensor import DTensor, Shard

            x = DTensor.from_local(x, mesh, [Shard(0)])
            y = DTensor.from_local(y, mesh, [Shard(0)])
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(scalar(loss))
    finish(rank, losses)


if __name__ == "__main__":
    main()
