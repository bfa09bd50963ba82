"""Attention on head-sharded q, k, v: F.scaled_dot_product_attention
decomposes on CPU into aten._scaled_dot_product_flash_attention_for_cpu, an
op DTensor has no sharding strategy for, and the run dies with
`NotImplementedError: Operator ... does not have a sharding strategy
registered.` Modelled on public reports of that error:
https://github.com/intel/torch-xpu-ops/issues/1556 (the fused sdpa kernel
in PyTorch's own tensor-parallel example) and
https://github.com/modelscope/DiffSynth-Studio/issues/477 (flash attention
under tensor parallelism)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor


def main():
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    q = distribute_tensor(torch.randn(2, 4, 8, 16), mesh, [Shard(1)])  # heads sharded
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)  # FAILURE
    print(out.shape)


if __name__ == "__main__":
    main()
