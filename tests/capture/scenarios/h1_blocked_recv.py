"""Both ranks block inside C++: each waits in a gloo recv for a message the
other never sends (the shape of a collective mismatch). Python cannot act on
a signal there; stopping the job is the launcher's and the agent's job.
Prints `rank R pid P blocked` once it is about to block."""

import datetime
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    t = torch.zeros(4)
    os.write(1, f"rank {rank} pid {os.getpid()} blocked\n".encode())  # one write: no interleaving
    dist.recv(t, src=1 - rank)  # never sent


if __name__ == "__main__":
    main()
