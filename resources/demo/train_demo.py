"""meshscope's bundled demo: a Keras-style model-parallel MLP on 2 ranks
(gloo, CPU) that hits every failure of the seed notes.

  * the weights are DTensors sharded over the 'model' mesh axis (what Keras
    ModelParallel's layout map does);
  * a DataLoader feeds each rank its own batch as plain tensors, which meet
    the sharded weights in subtract and matmul (seeds 000-002, 004);
  * a causal-style mask is created inside forward as a plain tensor;
  * the optimizer, written like Keras' torch optimizers, keeps its state as
    plain full-size tensors and its step sizes as a tensor in
    torch._foreach_* updates (seed 003).

Run it under meshscope (scripts/demo.sh does):
    meshscope record --policy auto -n 2 -- python resources/demo/train_demo.py
With policy `auto` it trains; with `observe` PyTorch raises and meshscope
says which operand, from where, and how to fix it."""

import datetime

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.utils.data import DataLoader, TensorDataset

STEPS, ROWS, DIM, HIDDEN = 12, 16, 32, 64


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
                    state["m"] = torch.zeros(p.shape)  # plain: should be zeros_like(p)
                    state["v"] = torch.zeros(p.shape)
                    state["t"] = 0
                state["t"] += 1
            ms, vs, t = [s["m"] for s in states], [s["v"] for s in states], states[0]["t"]
            torch._foreach_mul_(ms, group["beta_1"])
            torch._foreach_add_(ms, grads, alpha=1 - group["beta_1"])
            torch._foreach_mul_(vs, group["beta_2"])
            torch._foreach_addcmul_(vs, grads, grads, value=1 - group["beta_2"])
            denom = torch._foreach_sqrt(vs)
            torch._foreach_div_(denom, (1 - group["beta_2"] ** t) ** 0.5)  # bias correction
            torch._foreach_add_(denom, group["epsilon"])
            step_size = torch.tensor([-group["lr"] / (1 - group["beta_1"] ** t)] * len(params))
            torch._foreach_addcdiv_(params, ms, denom, step_size)


class ModelParallelMLP(nn.Module):
    def __init__(self, mesh):
        super().__init__()
        self.register_buffer("mean", distribute_tensor(torch.linspace(-1, 1, DIM), mesh,
                                                       [Replicate()]))
        self.w1 = nn.Parameter(distribute_tensor(torch.randn(DIM, HIDDEN) / DIM**0.5, mesh,
                                                 [Shard(1)]))
        self.w2 = nn.Parameter(distribute_tensor(torch.randn(HIDDEN, 1) / HIDDEN**0.5, mesh,
                                                 [Shard(0)]))

    def forward(self, x, y):
        h = x - self.mean  # the seed's aten.sub.Tensor
        keep = torch.ones(HIDDEN)  # a mask made inside forward
        keep[::8] = 0.5
        h = torch.relu(h @ self.w1) * keep
        return ((h @ self.w2 - y) ** 2).mean()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
    torch.manual_seed(0)
    model = ModelParallelMLP(mesh)
    opt = KerasStyleAdam(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(100 + rank)  # every rank: its own data
    x = torch.randn(STEPS * ROWS, DIM, generator=g)
    y = x[:, :4].sum(dim=1, keepdim=True) * 0.5
    for step, (xb, yb) in enumerate(DataLoader(TensorDataset(x, y), batch_size=ROWS)):
        opt.zero_grad()
        loss = model(xb, yb)
        loss.backward()
        opt.step()
        value = loss.full_tensor().item() if hasattr(loss, "full_tensor") else loss.item()
        if rank == 0 and step % 4 == 0:
            print(f"step {step:3d}  loss {value:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
