"""Seed 004: a DataLoader feeds token ids into an embedding table that is a
DTensor; the lookup `table[ids]` is `aten.index.Tensor` with a plain index
tensor: `aten.index.Tensor: got mixed torch.Tensor and DTensor`."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from common import WORLD, _to_default_device, finish, reference_mode, scalar, setup

STEPS, ROWS, VOCAB, DIM = 4, 8, 50, 16


def rank_dataset(rank: int) -> TensorDataset:
    g = torch.Generator().manual_seed(31 + rank)
    ids = torch.randint(0, VOCAB, (STEPS * ROWS,), generator=g, device="cpu")
    targets = torch.randn(STEPS * ROWS, 1, generator=g, device="cpu")
    return TensorDataset(*_to_default_device(ids, targets))  # drawn on the CPU: same data


class Embedder(nn.Module):
    def __init__(self, mesh):
        super().__init__()
        table = torch.randn(VOCAB, DIM) * 0.1
        head = torch.randn(DIM, 1) / DIM**0.5
        if mesh is not None:
            from torch.distributed.tensor import Replicate, Shard, distribute_tensor

            table = distribute_tensor(table, mesh, [Shard(1)])
            head = distribute_tensor(head, mesh, [Replicate()])
        self.table = nn.Parameter(table)
        self.head = nn.Parameter(head)


def loaders(rank: int):
    if reference_mode():  # global batches: every rank's rows, in rank order
        per_rank = [iter(DataLoader(rank_dataset(r), batch_size=ROWS)) for r in range(WORLD)]
        for _ in range(STEPS):
            parts = [next(it) for it in per_rank]
            yield torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    else:
        yield from DataLoader(rank_dataset(rank), batch_size=ROWS)


def main():
    rank, world, mesh = setup()
    model = Embedder(mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for ids, target in loaders(rank):
        opt.zero_grad()
        emb = model.table[ids]  # INCIDENT: DataLoader ids index a DTensor
        pred = emb @ model.head
        loss = ((pred - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(scalar(loss))
    finish(rank, losses)


if __name__ == "__main__":
    main()
