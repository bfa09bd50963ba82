"""A generation script attaches the attention's KV cache (a registered
buffer made with torch.zeros, empty along the sequence) after
parallelize_module has run, so no plan distributes it; appending the
DTensor keys of the tensor-parallel projection to it with torch.cat mixes
them: `aten.cat.default: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/torchchat#1154, "[Distributed] Enable KV cache" (the KV
cache of the tensor-parallel model had been turned off in distributed runs;
it is set up by setup_caches once the model is built, its size depends on
the TP degree): https://github.com/pytorch/torchchat/pull/1154"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::cat"], "origin": "A", "name": "self.k_cache",
          "plan_hint": "(no parallelize_module plan distributes buffers: "
                       "attn.kv_cache.k_cache = distribute_tensor("}


import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

from corpus_common import finish, result, setup


class KVCache(nn.Module):
    def __init__(self, batch, dim):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, 0, dim))  # BIRTH

    def update(self, k_val):
        self.k_cache = torch.cat([self.k_cache, k_val], dim=1)  # INCIDENT
        return self.k_cache


class Attention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.wk = nn.Linear(dim, dim, bias=False)
        self.kv_cache = None

    def forward(self, x):
        return self.kv_cache.update(self.wk(x))


def main():
    _, mesh = setup()
    attn = parallelize_module(Attention(), mesh, {"wk": ColwiseParallel(use_local_output=False)})
    attn.kv_cache = KVCache(batch=2, dim=8)
    result(attn(torch.randn(2, 3, 8)))
    finish()


if __name__ == "__main__":
    main()
