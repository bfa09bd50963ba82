"""A metric all-reduced on rank 0 only, then the gradients on every rank: rank
1's gradient all_reduce (8 B) meets rank 0's metric all_reduce (32 B). gloo
aborts rank 1 (std::terminate on "op.preamble.length <= op.nbytes. 8 vs 4",
SIGABRT); rank 0's all_reduce then fails. NCCL hangs or reads the wrong data.

Modelled on https://github.com/Lightning-AI/pytorch-lightning/issues/7129
(metrics reduced only when rank == 0: "stuck there until a NCCL timeout"),
https://github.com/pytorch/gloo/pull/456 (the EnforceNotMet size mismatch is
"likely due to a bug in the user code"),
https://github.com/pytorch/pytorch/issues/97191 and
https://github.com/PrimeIntellect-ai/prime-diloco/issues/68."""

import torch
import torch.distributed as dist

from common import setup


def main():
    rank, world, mesh = setup()
    loss = torch.ones(4)
    dist.all_reduce(loss)
    if rank == 0:
        metric = torch.ones(8)
        dist.all_reduce(metric)  # METRIC: rank 0 only
    grad = torch.ones(2)
    dist.all_reduce(grad)  # GRAD: every rank
    print("done", rank, flush=True)


if __name__ == "__main__":
    main()
