"""A mixture-of-experts router computes its scores and top-k expert ids as
DTensors, but builds the boolean routing map with torch.zeros inside
forward, a plain tensor; scattering the DTensor expert ids into it mixes
them: `aten.scatter_.value: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/torchtitan#3450, "[MoE] Using routing map instead of
histc to count number_tokens_per_expert" (Router.forward builds a boolean
routing map with scatter_ from the top-k expert ids of a router that runs on
DTensors): https://github.com/pytorch/torchtitan/pull/3450"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::scatter_"], "origin": "B", "name": "routing_map"}


import torch
from torch import nn
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import forward_once


class Router(nn.Module):
    def __init__(self, mesh, dim=8, experts=4, top_k=2):
        super().__init__()
        self.gate = nn.Parameter(distribute_tensor(torch.randn(dim, experts), mesh, [Replicate()]))
        self.top_k = top_k

    def forward(self, x):
        scores = torch.softmax(x @ self.gate, dim=-1)
        _, expert_ids = torch.topk(scores, self.top_k, dim=-1)
        routing_map = torch.zeros(scores.shape, dtype=torch.bool)  # BIRTH
        routing_map.scatter_(-1, expert_ids, True)  # INCIDENT
        return routing_map.sum(0)


def main():
    forward_once(Router, 6, 8)


if __name__ == "__main__":
    main()
