"""Tensor parallelism with uneven data: rank 0 has one more batch than rank 1,
so it runs one more forward and waits forever in the all_reduce that
RowwiseParallel issues (a functional collective, waited lazily through an
AsyncCollectiveTensor when the loss first uses the output). Rank 1 has
finished; it saves for LINGER seconds (default 12) and exits, and rank 0's
wait then fails with gloo's "Connection closed by peer" (on NCCL: a hang
until its watchdog takes the process down).

Modelled on https://github.com/pytorch/pytorch/issues/33148 ("instances
processing more input batches will hang, as the peer with least input batch
will not join those additional allreduce operations"),
https://github.com/k2-fsa/snowfall/issues/152 and
https://github.com/meta-pytorch/torchrec/pull/4158. The model is
pytorch/examples' distributed/tensor_parallelism/tensor_parallel_example.py
in miniature. Prints `rank R step S` after every step."""

import os
import time

import torch

from common import setup, tensor_parallel_mlp


def main():
    rank, world, mesh = setup()
    model, opt = tensor_parallel_mlp(mesh)
    batches = 4 if rank == 0 else 3  # the data loader of rank 0 has one more batch
    for step in range(batches):
        x = torch.randn(8, 16)
        opt.zero_grad()
        out = model(x)  # ISSUED: RowwiseParallel's all_reduce, waited for lazily
        loss = (out**2).mean()  # HANG rank 0: the first use of the output waits for it
        loss.backward()
        opt.step()
        os.write(1, f"rank {rank} step {step}\n".encode())
    if rank == 1:
        time.sleep(float(os.environ.get("LINGER", "12")))  # saving a checkpoint


if __name__ == "__main__":
    main()
