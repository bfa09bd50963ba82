"""A healthy data-parallel loop in which rank 1 is SIGKILLed during step
KILL_AT (default 3), as the OOM killer does: its last ~200 ms of records never
reach its file. Rank 0's next all_reduce then fails. Nothing diverged: the
end of rank 1's recording is no divergence.

Modelled on https://github.com/pytorch/pytorch/issues/101463 ("If one rank
of a training job is killed/dies, some ranks of a training job get stuck"),
https://github.com/sgl-project/sglang/pull/20287 (the OOM killer silently
SIGKILLs workers) and https://github.com/pytorch/pytorch/issues/150916."""

import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn

from common import batch, setup


def main():
    rank, world, mesh = setup()
    kill_at = int(os.environ.get("KILL_AT", "3"))
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(8):
        x, y = batch(step, rank, 8, 16)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)  # gradient averaging, as DDP does
        if rank == 1 and step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # KILLED
        opt.step()
        time.sleep(0.1)  # a step's compute: what the rank did reaches its file


if __name__ == "__main__":
    main()
