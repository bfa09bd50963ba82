"""Weights loaded as plain tensors are copied into DTensor parameters with
`param.data.copy_(loaded_weight)`: `aten.copy_.default: got mixed
torch.Tensor and DTensor`.

Modelled on verl-project/verl#864, "RuntimeError: aten.copy_.default: got
mixed torch.Tensor and DTensor" while loading model weights
(https://github.com/verl-project/verl/issues/864), and on
JIA-Lab-research/Seg-Zero#105, the same error from vLLM's
`default_weight_loader` (https://github.com/JIA-Lab-research/Seg-Zero/issues/105)."""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::copy_"], "origin": "F", "name": "loaded_weight"}


import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


def default_weight_loader(param, loaded_weight):
    param.data.copy_(loaded_weight)  # INCIDENT


def main():
    _, mesh = setup()
    param = nn.Parameter(distribute_tensor(torch.zeros(8, 4), mesh, [Shard(0)]))
    checkpoint = {"w": torch.randn(8, 4)}  # BIRTH
    default_weight_loader(param, checkpoint["w"])
    result(param)
    finish()


if __name__ == "__main__":
    main()
