"""Seed 003: an optimizer written like Keras' torch optimizers. Parameters are
DTensors and the inputs are distributed correctly, but the optimizer creates
its state as plain full-size tensors and keeps hyperparameters as tensors,
so the `torch._foreach_*` updates mix them with DTensor parameters and
gradients."""

import torch

from common import ShardedMLP, eager_step, setup, train

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


def main():
    rank, world, mesh = setup()
    model = ShardedMLP(mesh, DIM, HIDDEN)
    opt = KerasStyleAdam(model.parameters(), lr=0.01)

    def distribute(x, y):  # the data side is right here: each batch is a shard
        if mesh is None:
            return x, y
        from torch.distributed.tensor import DTensor, Shard

        return DTensor.from_local(x, mesh, [Shard(0)]), DTensor.from_local(y, mesh, [Shard(0)])

    train(rank, STEPS, ROWS, DIM, eager_step(model, opt), prepare=distribute)


if __name__ == "__main__":
    main()
