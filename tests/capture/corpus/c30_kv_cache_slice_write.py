"""A generation script allocates the attention's KV cache (registered
buffers made with torch.zeros) after parallelize_module has run, so no plan
distributes it; writing the DTensor keys of the tensor-parallel projection
into a slice of it mixes them: `aten.copy_.default: got mixed torch.Tensor
and DTensor`.

Modelled on pytorch/torchchat#1154, "[Distributed] Enable KV cache" (KV
cache was turned off in distributed runs; its size depends on the TP degree
and its instantiation moves into the attention layer that owns it):
https://github.com/pytorch/torchchat/pull/1154"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::copy_"], "origin": "A", "name": "k_out",
          "plan_hint": "(no parallelize_module plan distributes buffers",
          "unplaced": "is a view of the buffer"}


import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

from corpus_common import finish, result, setup


class KVCache(nn.Module):
    def __init__(self, batch, max_len, dim):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, max_len, dim))  # BIRTH

    def update(self, start, k_val):
        k_out = self.k_cache
        k_out[:, start:start + k_val.shape[1]] = k_val  # INCIDENT
        return k_out


class Attention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.wk = nn.Linear(dim, dim, bias=False)
        self.kv_cache = None

    def forward(self, x, start):
        return self.kv_cache.update(start, self.wk(x))


def main():
    _, mesh = setup()
    attn = parallelize_module(Attention(), mesh, {"wk": ColwiseParallel(use_local_output=False)})
    attn.kv_cache = KVCache(batch=2, max_len=8, dim=8)
    result(attn(torch.randn(2, 3, 8), 0))
    finish()


if __name__ == "__main__":
    main()
