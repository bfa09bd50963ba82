"""An EMA gathers its shadow weights with `full_tensor()` when it is created, so
the shadow is a plain tensor, and later moves it toward the FSDP-sharded DTensor
parameters with `shadow.lerp_(param, 1 - decay)`: `aten.lerp_.Scalar: got mixed
torch.Tensor and DTensor`.

Modelled on NVIDIA/Model-Optimizer#1326, "Add DMD2 distillation for Qwen-Image
(fastgen)" (its ExponentialMovingAverage builds the shadow from `_gather_full(p)`
of the FSDP2 parameters and lerps it toward the live weights), and on
NCAR/miles-credit#414, "EMA support under FSDP2 (sharded shadow)" (a shadow of
plain tensors mixed with DTensor shards):
https://github.com/NVIDIA/Model-Optimizer/pull/1326"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::lerp_"], "origin": "C", "name": "shadow"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from corpus_common import finish, result, setup


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = {}
        for name, p in model.named_parameters():
            self.shadow[name] = p.detach().full_tensor()  # BIRTH

    @torch.no_grad()
    def update(self, model):
        for name, p in model.named_parameters():
            shadow = self.shadow[name]
            shadow.lerp_(p, 1 - self.decay)  # INCIDENT


def main():
    _, mesh = setup("dp")
    model = nn.Linear(4, 8, bias=False)
    model.weight = nn.Parameter(distribute_tensor(model.weight.detach(), mesh, [Shard(0)]))
    ema = EMA(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(distribute_tensor(torch.randn(3, 4), mesh, [Replicate()])).sum().backward()
    opt.step()
    ema.update(model)
    result(ema.shadow)
    finish()


if __name__ == "__main__":
    main()
