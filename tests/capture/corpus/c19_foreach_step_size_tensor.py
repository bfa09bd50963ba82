"""A hand-written foreach Adam keeps its per-parameter step sizes in a plain
tensor made with torch.tensor(...) inside step() and hands it to
`torch._foreach_addcdiv_` with the DTensor parameters:
`aten._foreach_addcdiv_.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/pytorch#126670, "Fused AdamW not supported with FSDP2" (the
learning rate kept as a tensor met FSDP2's DTensor parameters in the optimizer
step; pytorch/pytorch#126750 taught DTensor to replicate a tensor lr):
https://github.com/pytorch/pytorch/issues/126670"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::_foreach_addcdiv_"], "origin": "E", "name": "step_size"}


import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


class ForeachAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            (b1, b2), params = group["betas"], group["params"]
            grads = [p.grad for p in params]
            states = [self.state[p] for p in params]
            for s, p in zip(states, params):
                if not s:
                    s.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                s["step"] += 1
            ms, vs = [s["m"] for s in states], [s["v"] for s in states]
            torch._foreach_lerp_(ms, grads, 1 - b1)
            torch._foreach_mul_(vs, b2)
            torch._foreach_addcmul_(vs, grads, grads, 1 - b2)
            denom = torch._foreach_add(torch._foreach_sqrt(vs), group["eps"])
            lrs = [-group["lr"] / (1 - b1 ** s["step"]) for s in states]
            step_size = torch.tensor(lrs)  # BIRTH
            torch._foreach_addcdiv_(params, ms, denom, step_size)  # INCIDENT


def main():
    _, mesh = setup("dp")
    w1 = nn.Parameter(distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]))
    w2 = nn.Parameter(distribute_tensor(torch.randn(4, 2), mesh, [Shard(0)]))
    opt = ForeachAdam([w1, w2])
    (w1.sum() + (w2 * w2).sum()).backward()
    opt.step()
    result([w1, w2])
    finish()


if __name__ == "__main__":
    main()
