"""Gradient clipping over a parameter list that mixes the tensor-parallel DTensor
parameters with a small parameter left out of the plan: the left-out parameter's
gradient is a plain tensor and meets the DTensor clip coefficient:
`aten.mul_.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on huggingface/accelerate#4219, "Clip grad norm support for dtensors"
(plain and DTensor gradients in one `clip_grad_norm_`):
https://github.com/huggingface/accelerate/pull/4219"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul_.Tensor"], "origin": "A", "name": "g",
          "plan_hint": "gradient of parameter weight of Linear not in the sharding plan",
          "fix": "gate.weight = nn.Parameter(distribute_tensor(gate.weight, mesh",
          "unplaced": "no parallelize_module, distribute_module or fully_shard call was seen"}

import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


def clip_grad_norm(params, max_norm):
    grads = [p.grad for p in params if p.grad is not None]
    total_norm = torch.stack([g.norm() for g in grads]).norm()
    clip_coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(clip_coef)  # INCIDENT


def main():
    _, mesh = setup()
    proj = nn.Linear(4, 8, bias=False)
    proj.weight = nn.Parameter(distribute_tensor(proj.weight.detach(), mesh, [Shard(0)]))
    gate = nn.Linear(4, 1, bias=False)  # BIRTH: its weight stays out of the plan
    loss = proj.weight.sum().full_tensor() + gate(torch.randn(3, 4)).sum()
    loss.backward()
    clip_grad_norm([gate.weight, proj.weight], 1.0)
    result([gate.weight.grad, proj.weight.grad])
    finish()


if __name__ == "__main__":
    main()
