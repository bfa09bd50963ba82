"""A hand-written momentum optimizer keeps its momentum buffers as plain
tensors made with torch.zeros while the parameters are DTensors; the first
step's in-place add meets the DTensor gradient.

Modelled on facebookresearch/optimizers#79, "RuntimeError:
aten._foreach_add_.List: got mixed torch.Tensor and DTensor when using
momentum": https://github.com/facebookresearch/optimizers/issues/79"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add_.Tensor"], "origin": "E", "name": "buf"}


import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


class Momentum(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros(p.shape)  # BIRTH
                buf = state["buf"]
                buf.mul_(group["momentum"]).add_(p.grad)  # INCIDENT
                p.add_(buf, alpha=-group["lr"])


def main():
    _, mesh = setup()
    w = nn.Parameter(distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]))
    opt = Momentum([w])
    for _ in range(2):
        (w * w).sum().backward()
        opt.step()
        opt.zero_grad()
    result([w, opt.state[w]["buf"]])
    finish()


if __name__ == "__main__":
    main()
