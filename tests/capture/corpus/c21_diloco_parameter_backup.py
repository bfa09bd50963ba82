"""DiLoCo backs up the parameters before its inner steps into plain tensors
allocated with torch.empty(*p.shape) and copies the FSDP-sharded DTensor
parameters into them: `aten.copy_.default: got mixed torch.Tensor and DTensor`.

Modelled on meta-pytorch/torchft#168, "Support DTensor params in
local_sgd/diloco" (the `original_parameters` backups were plain tensors made with
torch.empty; saving into them and the pseudogradient
`p.data - self.original_parameters[name]` met the DTensor parameters):
https://github.com/meta-pytorch/torchft/pull/168"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::copy_"], "origin": "H", "name": "backup"}


import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


class DiLoCo:
    def __init__(self, model):
        self.model = model
        self.original_parameters = {}
        for name, p in model.named_parameters():
            self.original_parameters[name] = torch.empty(*p.shape)  # BIRTH

    @torch.no_grad()
    def save_parameters(self):
        for name, p in self.model.named_parameters():
            backup = self.original_parameters[name]
            backup.copy_(p.data)  # INCIDENT


def main():
    _, mesh = setup("dp")
    model = nn.Linear(4, 8, bias=False)
    model.weight = nn.Parameter(distribute_tensor(model.weight.detach(), mesh, [Shard(0)]))
    diloco = DiLoCo(model)
    diloco.save_parameters()
    result(diloco.original_parameters)
    finish()


if __name__ == "__main__":
    main()
