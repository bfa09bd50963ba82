"""A full (plain) state dict read with torch.load is handed to
load_state_dict of a model whose weight is already a DTensor; the copy
inside load_state_dict mixes them: `aten.copy_.default: got mixed
torch.Tensor and DTensor`. The tensor is never held by a variable of its
own: the user's name for it is the dict entry, `state['weight']`.

Modelled on pytorch/pytorch#129635, "DSD for TorchTune LoRA" (loading a
full state dict into an FSDP model raised 'aten.copy_.default: got mixed
torch.Tensor and DTensor', pytorch#128745):
https://github.com/pytorch/pytorch/pull/129635"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::copy_"], "origin": "F", "name": "state['weight']"}


import io

import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


def main():
    _, mesh = setup()
    buf = io.BytesIO()
    torch.save({"weight": torch.randn(8, 4)}, buf)
    buf.seek(0)
    head = nn.Linear(4, 8, bias=False)
    head.weight = nn.Parameter(distribute_tensor(head.weight.detach(), mesh, [Shard(0)]))
    state = torch.load(buf)  # BIRTH
    head.load_state_dict(state)  # INCIDENT
    result(head.weight)
    finish()


if __name__ == "__main__":
    main()
