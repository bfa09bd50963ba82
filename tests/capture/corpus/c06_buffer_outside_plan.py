"""A module's buffer stays a plain tensor when the sharding is applied to
its parameters only; forward multiplies the DTensor activations by it:
`aten.mul.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on NVIDIA-NeMo/RL#1051, "Qwen3-32B RL with DTensor backend
generate the error: ... got mixed torch.Tensor and DTensor" (a plain tensor
reaching a DTensor op inside a model's forward under the DTensor policy
worker): https://github.com/NVIDIA-NeMo/RL/issues/1051"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul.Tensor"], "origin": "A", "name": "self.scale",
          "plan_hint": "(no parallelize_module plan distributes buffers: model.scale = "
                       "distribute_tensor(model.scale, mesh, [Replicate()]))",
          # a buffer stays a buffer: never made a trainable nn.Parameter
          "fix": "self.scale = distribute_tensor(self.scale, x.device_mesh, [Replicate()])  # still a buffer"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import forward_once


class Scaled(nn.Module):
    def __init__(self, mesh, dim=8):
        super().__init__()
        self.w = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))
        self.register_buffer("scale", torch.full((dim,), 0.5))  # BIRTH

    def forward(self, x):
        return (x @ self.w) * self.scale  # INCIDENT


def main():
    forward_once(Scaled, 3, 8)


if __name__ == "__main__":
    main()
