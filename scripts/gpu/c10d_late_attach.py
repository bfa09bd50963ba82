"""scripts/gpu_check.sh part "c10d": direct c10d collectives on NCCL
(all_reduce three times on 4 MiB, broadcast, barrier, all_to_all_single, a
redistributed DTensor), recorded two ways:
  * `meshscope record -n 1 -- python c10d_late_attach.py RUN_DIR`: attached at
    interpreter start, so NCCL loads meshscope's profiler plugin at its first
    communicator;
  * `python -m torch.distributed.run ... c10d_late_attach.py RUN_DIR`: attached
    late through the Python API, as a user who adds `meshscope.attach()` to a
    script does, after init_process_group(device_id=...) made NCCL's
    communicator eagerly: NCCL never loads the plugin then (it reads
    NCCL_PROFILER_PLUGIN once, at its first communicator); the collectives
    are recorded all the same and the rank's meta says why GPU times are not.

--cpu: gloo on the CPU, to try this script where there is no GPU.

Then reads the run back and prints what it holds as JSON on the last line:
the collectives by kind (count, bytes, issuing ops, call sites, GPU time),
the communicators the NCCL plugin announced, and the plugin's path."""

import json
import os
import sys

import torch
import torch.distributed as dist

import meshscope

run_dir = os.environ.get("MESHSCOPE_RUN_DIR") or sys.argv[1]
local = int(os.environ.get("LOCAL_RANK", "0"))
if "--cpu" in sys.argv:
    device = torch.device("cpu")
    dist.init_process_group("gloo")
else:
    torch.cuda.set_device(local % torch.cuda.device_count())
    device = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", device_id=device)  # eager: NCCL's communicator exists now
if not meshscope.attached():  # else `meshscope record` attached at interpreter start
    meshscope.attach(run_dir)  # late, as in a user's script

from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import Replicate, Shard, distribute_tensor  # noqa: E402

t = torch.ones(1 << 20, device=device)  # 4 MiB
for _ in range(3):
    dist.all_reduce(t)
dist.broadcast(t, src=0)
dist.barrier()
try:  # one rank: NCCL may run it as send/recv to itself (kernels the plugin can time)
    dist.all_to_all_single(torch.empty_like(t), t)
except Exception as error:  # noqa: BLE001 - reported, not fatal
    print(f"all_to_all_single: {error}", file=sys.stderr)
mesh = init_device_mesh(device.type, (dist.get_world_size(),), mesh_dim_names=("tp",))
w = distribute_tensor(torch.randn(64, 64, device=device), mesh, [Shard(0)])
full = w.redistribute(mesh, [Replicate()]).to_local()
if device.type == "cuda":
    torch.cuda.synchronize()
meshscope.detach()
dist.destroy_process_group()

rank = meshscope.load_run(run_dir)["rank_details"][0]
print(json.dumps({
    "collectives": rank["collectives"],
    "communicators": {k: v for k, v in rank["meta"].items() if k.startswith("comm.")},
    "nccl_profiler": rank["meta"].get("nccl_profiler", ""),
}), flush=True)
