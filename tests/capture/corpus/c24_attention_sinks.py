"""An attention with learned per-head sinks (gpt-oss style) keeps `sinks`
as a plain parameter outside the tensor-parallel plan while its attention
logits are DTensors; concatenating the sink logits onto the scores mixes
them: `aten.cat.default: got mixed torch.Tensor and DTensor`.

Modelled on huggingface/transformers#42906, "fix `Dtensor` and `tensor`
mismatch" (the gpt-oss attention sinks and the attention tensors disagree on
being DTensors under the TP plan):
https://github.com/huggingface/transformers/pull/42906"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::cat"], "origin": "A", "name": "sinks",
          # no sharding-plan call: the model is built with DTensors by hand
          "unplaced": "no parallelize_module, distribute_module or fully_shard call was seen"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


class SinkAttention(nn.Module):
    def __init__(self, mesh, heads=2, dim=8):
        super().__init__()
        self.wq = nn.Parameter(distribute_tensor(torch.randn(dim, dim), mesh, [Replicate()]))
        self.sinks = nn.Parameter(torch.zeros(heads))  # BIRTH

    def forward(self, x):
        scores = (x @ self.wq) @ x.transpose(1, 2)
        sinks = self.sinks.reshape(-1, 1, 1).expand(-1, x.shape[1], 1)
        logits = torch.cat([scores, sinks], dim=-1)  # INCIDENT
        return torch.softmax(logits, dim=-1)[..., :-1]


def main():
    _, mesh = setup()
    attn = SinkAttention(mesh)
    result(attn(distribute_tensor(torch.randn(2, 4, 8), mesh, [Replicate()])))
    finish()


if __name__ == "__main__":
    main()
