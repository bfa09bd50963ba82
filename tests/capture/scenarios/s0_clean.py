"""A clean DTensor training loop: tensor-parallel MLP, inputs distributed with
DTensor.from_local, torch.optim.Adam. No incident; recording it with policy
`observe` must not change a single bit of the losses."""

import torch
from torch import nn

from common import batch, finish, setup

STEPS, ROWS, DIM, HIDDEN = 5, 8, 16, 32


def main():
    rank, world, mesh = setup()
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    model = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(STEPS):
        # the same rows on every rank, as Replicate() says: with each rank's
        # own rows here, the row-wise layer's bias trained apart on the two
        # ranks (meshscope's replica check found it: issue #43)
        x, y = batch(step, 0, ROWS, DIM)
        x = DTensor.from_local(x, mesh, [Replicate()])
        opt.zero_grad()
        out = model(x)  # RowwiseParallel hands back the local (replicated) output
        loss = ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    finish(rank, losses, hex=[float(v).hex() for v in losses])


if __name__ == "__main__":
    main()
