"""A healthy tensor-parallel loop slow enough to be checked while it runs:
STEPS steps (default 40) of STEP_S seconds (default 0.25). The ranks are at
different points of the loop whenever `check` reads them; only their
complete steps can be compared. Prints `rank R step S` after every step."""

import os
import time

import torch

from common import setup, tensor_parallel_mlp


def main():
    rank, world, mesh = setup()
    model, opt = tensor_parallel_mlp(mesh)
    for step in range(int(os.environ.get("STEPS", "40"))):
        opt.zero_grad()
        loss = (model(torch.randn(8, 16)) ** 2).mean()
        loss.backward()
        opt.step()
        os.write(1, f"rank {rank} step {step}\n".encode())
        time.sleep(float(os.environ.get("STEP_S", "0.25")) * (1 + rank))


if __name__ == "__main__":
    main()
