"""The replica check: at sampled optimizer steps, before the update, the
content fingerprints of the training state that other ranks must hold equal
(core/analysis/replica_drift.h compares them across ranks offline; no
collective is added to the training):

- a DTensor parameter, its gradient and its optimizer state: the local shard,
  keyed by the rank's coordinates on the mesh dims it is not replicated on
  ("dp=0"), so ranks that differ only on replicated dims are compared;
- in a tensor-parallel job (a DTensor among the optimizer's parameters), a
  plain parameter, its gradient and state: replicated by intent on every
  rank (key "").

Fingerprints run on the tensor's device (capture/agent/incidents/
fingerprint.h); each returns 8 bytes to the host, so a sampled step costs one
pass over the parameters, gradients and states and a wait per tensor. The
steps 0, N, 2N, ... are sampled (MESHSCOPE_REPLICA_CHECK, every:50 by
default): an unreduced gradient or different initial values show at step 0,
a rank-dependent update at the first sampled step after it.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

from meshscope import _capture


def _placement_text(placements: Iterable[Any], names: tuple[str, ...] | None) -> str:
    dims = ", ".join(str(p) for p in placements)
    return f"[{dims}] on {','.join(names)}" if names else f"[{dims}]"


def replica_key(tensor: torch.Tensor) -> str | None:
    """Which ranks must hold `tensor`'s local values equal: its coordinates
    on the mesh dims it is sharded or partial on ("" when replicated on every
    dim); None when this rank is outside its mesh."""
    mesh = tensor.device_mesh
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return None
    names = mesh.mesh_dim_names or tuple(str(d) for d in range(mesh.ndim))
    return ",".join(f"{names[d]}={coordinate[d]}" for d, p in enumerate(tensor.placements)
                    if not p.is_replicate())


class ReplicaCheck:
    """Called by the optimizer adapter before each step; records on the
    sampled ones."""

    def __init__(self, every: int, roots: Iterable[torch.nn.Module]) -> None:
        self.every = every
        self._roots = roots

    def due(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def record(self, optimizer: Any, step: int) -> None:
        from torch.distributed.tensor import DTensor

        params = [p for group in optimizer.param_groups for p in group["params"]]
        tensor_parallel = any(isinstance(p, DTensor) for p in params)
        names: dict[int, tuple[str, str]] = {}
        for root in self._roots:
            modules = dict(root.named_modules())
            for name, p in root.named_parameters():
                owner = modules.get(name.rpartition(".")[0])
                names.setdefault(id(p), (name, type(owner).__name__ if owner is not None else ""))
        for index, p in enumerate(params):
            if not isinstance(p, DTensor) and (not tensor_parallel
                                               or type(p).__name__ == "FlatParameter"):
                continue  # not replicated by intent (FSDP1's flat shards are per rank)
            name, module = names.get(id(p), (f"param_groups[*][{index}]", ""))
            self._one(step, name, "param", module, p)
            if p.grad is not None:
                self._one(step, name, "grad", module, p.grad)
            for key, value in optimizer.state.get(p, {}).items():
                if isinstance(value, torch.Tensor) and value.numel() > 1:
                    self._one(step, name, f"state {key}", module, value)

    @staticmethod
    def _own_shard(tensor: Any) -> bool:
        """Held by this rank alone: sharded on every dim of a mesh that spans
        the world (a Colwise or Rowwise weight), so no other rank has its key
        and fingerprinting it would compare nothing."""
        import torch.distributed as dist

        return (not any(p.is_replicate() for p in tensor.placements)
                and tensor.device_mesh.size() == dist.get_world_size())

    @staticmethod
    def _one(step: int, name: str, role: str, module: str, tensor: torch.Tensor) -> None:
        from torch.distributed.tensor import DTensor

        if isinstance(tensor, DTensor):
            key = replica_key(tensor)
            if key is None or ReplicaCheck._own_shard(tensor):
                return
            mesh = tensor.device_mesh
            placements = _placement_text(tensor.placements, mesh.mesh_dim_names)
            local = tensor._local_tensor  # not to_local(): the adapters record that call
        else:
            key, placements, local = "", "plain", tensor
        _capture.record_replica(step, name, role, key, placements, module, local.detach())
