"""A checkpoint written with torch.save holds full, plain tensors; after the
model is sharded, the head weight read back with torch.load is handed to
`load_state_dict` of a module whose parameter is now a DTensor:
`aten.copy_.default: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/pytorch#136336, "FSDP2 error loading `PreTrainedModel`'s
`torch.Tensor` state_dict into `DTensor`" (a plain state dict from
`torch.load`/`from_pretrained` loaded into FSDP2's DTensor parameters):
https://github.com/pytorch/pytorch/issues/136336"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::copy_"], "origin": "F", "name": "head_weight"}


import io

import torch
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from corpus_common import finish, result, setup


def main():
    _, mesh = setup("dp")
    checkpoint = io.BytesIO()
    torch.save({"lm_head.weight": torch.randn(8, 4)}, checkpoint)
    checkpoint.seek(0)
    lm_head = nn.Linear(4, 8, bias=False)
    lm_head.weight = nn.Parameter(distribute_tensor(lm_head.weight.detach(), mesh, [Shard(0)]))
    state = torch.load(checkpoint)  # BIRTH
    head_weight = state["lm_head.weight"]
    lm_head.load_state_dict({"weight": head_weight})  # INCIDENT
    result(lm_head.weight)
    finish()


if __name__ == "__main__":
    main()
