"""A SOAP/Shampoo-style optimizer keeps one preconditioner factor per dimension of
each parameter, made inside step() with torch.zeros(d, d) because no `*_like`
fits their shape, and updates it from the DTensor gradient:
`aten.lerp_.Scalar: got mixed torch.Tensor and DTensor`.

Modelled on HomebrewML/HeavyBall#15, "[Feature] Make HeavyBall compatible with
FSDP2 (DTensor)" (SOAP and PSGD-Kron preconditioners under FSDP2's DTensor
parameters): https://github.com/HomebrewML/HeavyBall/issues/15"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::lerp_"], "origin": "E", "name": "left",
          # the fix cannot go at the op: `left` is written in place and kept in the state
          "unplaced": "is changed in place and kept elsewhere"}


import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


class SOAPFactors(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, shampoo_beta=0.95):
        super().__init__(params, dict(lr=lr, shampoo_beta=shampoo_beta))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "GG" not in state:
                    state["GG"] = [torch.zeros(d, d) for d in p.shape]  # BIRTH
                grad = p.grad
                left, right = state["GG"]
                left.lerp_(grad @ grad.T, 1 - group["shampoo_beta"])  # INCIDENT
                right.lerp_(grad.T @ grad, 1 - group["shampoo_beta"])
                p.add_(grad, alpha=-group["lr"])


def main():
    _, mesh = setup("dp")
    w = nn.Parameter(distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]))
    opt = SOAPFactors([w])
    (w * w).sum().backward()
    opt.step()
    result([w, opt.state[w]["GG"]])
    finish()


if __name__ == "__main__":
    main()
