"""A norm left out of a sequence-parallel plan: replicas that drift apart.

Modelled on pytorch/examples distributed/tensor_parallelism/fsdp_tp_example.py
(https://github.com/pytorch/examples/blob/main/distributed/tensor_parallelism/fsdp_tp_example.py):
a Llama-style model, tensor- and sequence-parallel on a "tp" mesh dim and
fully sharded on "dp", whose per-layer plan forgets `ffn_norm`. Nothing
raises: the norm runs on each rank's sequence shard, its weight's gradient
covers that shard only and is never reduced across the tensor-parallel
ranks, and the replicas of `layers.N.ffn_norm.weight` drift apart from the
first update, as users report of norms under sequence parallelism:
- https://github.com/NVIDIA/TransformerEngine/issues/441 (norm weights
  differ across TP ranks after optimizer.step())
- https://github.com/NVIDIA/Megatron-LM/issues/1446 (final_layernorm
  gradients differ across TP ranks with TP+SP)
- https://github.com/EleutherAI/gpt-neox/pull/1257 (norm gradients not
  synchronized across TP ranks: the loss flatlines)

Variants (SCENARIO_PLAN): "broken" leaves ffn_norm out; "full" is the
example's own plan; SCENARIO_FIX holds Python lines run after the broken
plan (the fix meshscope printed), with model, tp_mesh, parallelize_module
and SequenceParallel in scope. SCENARIO_STEP_PAUSE_S makes each step last
longer, like a real job's, so `meshscope record` reports the drift while the
job still runs.
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn

from common import finish

DIM, HIDDEN, VOCAB, SEQ, LAYERS, STEPS = 32, 64, 128, 16, 2, 4


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.w1(x)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ffn_norm = nn.RMSNorm(DIM)
        self.feed_forward = FeedForward()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def main() -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (1, world), mesh_dim_names=("dp", "tp"))
    tp_mesh, dp_mesh = mesh["tp"], mesh["dp"]
    torch.manual_seed(0)  # the same initial weights on every rank
    model = Transformer()
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    plan = os.environ.get("SCENARIO_PLAN", "broken")
    for block in model.layers:
        layer_plan = {
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        }
        if plan == "full":
            layer_plan["ffn_norm"] = SequenceParallel()
        parallelize_module(block, tp_mesh, layer_plan)  # DRIFT: no ffn_norm in the broken plan
    fix = os.environ.get("SCENARIO_FIX", "")
    if fix:
        exec(fix, {"model": model, "tp_mesh": tp_mesh, "parallelize_module": parallelize_module,
                   "SequenceParallel": SequenceParallel})
    fully_shard(model, mesh=dp_mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=True)
    losses = []
    for step in range(STEPS):
        torch.manual_seed(step + dp_mesh.get_local_rank())  # one batch per tp group
        tokens = torch.randint(VOCAB, (4, SEQ))
        loss = model(tokens).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        time.sleep(float(os.environ.get("SCENARIO_STEP_PAUSE_S", "0")))  # a longer job
    norm = model.layers[0].ffn_norm.weight.detach().full_tensor()
    finish(rank, losses, ffn_norm_sum=float(norm.sum()))


if __name__ == "__main__":
    main()
