"""The ranks take different paths into collectives: both all-reduce the
loss, then rank 0 all-reduces a metric while rank 1 broadcasts a flag from
itself. Neither collective can complete; both ranks block inside C++ (a
hang until gloo's timeout). Prints `rank R pid P blocked` before blocking."""

import datetime
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    loss = torch.ones(4)
    dist.all_reduce(loss)
    os.write(1, f"rank {rank} pid {os.getpid()} blocked\n".encode())
    if rank == 0:
        metric = torch.zeros(2)
        dist.all_reduce(metric)  # MISMATCH rank 0
    else:
        flag = torch.zeros(1)
        dist.broadcast(flag, src=1)  # MISMATCH rank 1


if __name__ == "__main__":
    main()
