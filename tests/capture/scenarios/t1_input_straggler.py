"""One rank whose input pipeline is slower than the others': every step it
waits STALL_S seconds (default 0.06) for its batch (a slow disk, a decode, a
remote read on one host) before the tensor-parallel forward, and the other
rank waits for it in the forward's collectives. Nothing fails and no
incident is raised; each step is simply as slow as that rank.

Modelled on public reports:
- https://github.com/traceopt-ai/traceml/issues/252: a 150 ms/batch
  dataloader stall injected on one rank of a 4-GPU DDP run, which the
  user expects a tool to name as the rank the others wait for;
- https://github.com/pytorch/pytorch/issues/59433: "Why the time costs on
  different ranks are different?", answered that straggler processes are
  expected, with nothing in PyTorch to say which rank it is.

STALL_RANK picks the slow rank (default 1); -1 makes every rank stall
alike (a balanced run: no straggler). STEPS (default 8) steps."""

import os
import time

from common import batch, finish, setup, tensor_parallel_mlp

ROWS, DIM = 8, 16
STEPS = int(os.environ.get("STEPS", "8"))
STALL_S = float(os.environ.get("STALL_S", "0.06"))
STALL_RANK = int(os.environ.get("STALL_RANK", "1"))


def load_batch(step: int, rank: int):
    if STALL_RANK in (rank, -1):
        time.sleep(STALL_S)  # this host's input pipeline
    return batch(step, 0, ROWS, DIM)


def main():
    rank, world, mesh = setup()
    from torch.distributed.tensor import DTensor, Replicate

    model, opt = tensor_parallel_mlp(mesh)
    losses = []
    for step in range(STEPS):
        x, y = load_batch(step, rank)
        x = DTensor.from_local(x, mesh, [Replicate()])
        opt.zero_grad()
        loss = ((model(x).sum(dim=1, keepdim=True) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    finish(rank, losses)


if __name__ == "__main__":
    main()
