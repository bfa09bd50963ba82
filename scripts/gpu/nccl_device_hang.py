"""A collective that hangs on the device, not on the host (scripts/gpu_check.sh
part `hang`): one rank, NCCL; the current stream sleeps SLEEP_S seconds
(default 8) in a kernel, then an all_reduce is issued behind it. wait()
returns on the host at once (NCCL's semantics); the work completes on the
GPU only after the sleep. meshscope's watchdog (--watchdog 3) must report
it at the all_reduce's line while it is pending on the device, and its
record must span the sleep. Prints JSON facts on its last line."""

import json
import os
import time

import torch
import torch.distributed as dist


def cycles_per_second() -> float:
    """torch.cuda._sleep spins a number of GPU clock cycles: calibrated here."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(100_000_000)
    end.record()
    end.synchronize()
    return 100_000_000 / (start.elapsed_time(end) / 1000)


def main():
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)  # warm: the communicator exists
    torch.cuda.synchronize()
    sleep_s = float(os.environ.get("SLEEP_S", "8"))
    torch.cuda._sleep(int(cycles_per_second() * sleep_s))
    issued = time.monotonic()
    dist.all_reduce(t)  # HANG ON THE DEVICE: behind the sleeping kernel
    returned = time.monotonic() - issued
    torch.cuda.synchronize()
    print(json.dumps({"host_wait_s": returned, "device_s": time.monotonic() - issued}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
