"""The pinned Python environment that the capture agent builds against.

These fail when scripts/setup.sh produced something other than what
requirements.txt pins, or when torch no longer behaves the way meshscope is
built to observe (the mixed torch.Tensor/DTensor error).
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest
import torch
import torch.distributed as dist

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pinned(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(rf"^{re.escape(name)}==(\S+)", line.strip())
        if m:
            return m.group(1)
    raise AssertionError(f"{name} is not pinned in requirements.txt")


def test_torch_is_the_pinned_version() -> None:
    assert torch.__version__.split("+")[0] == pinned("torch")


def test_torch_ships_its_cmake_config() -> None:
    config = pathlib.Path(torch.utils.cmake_prefix_path) / "Torch" / "TorchConfig.cmake"
    assert config.is_file(), config


@pytest.fixture()
def gloo_world_of_one():
    # in-process store: no probed TCP port that a test beside this one could take
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_mixed_tensor_and_dtensor_raises_the_error_we_diagnose(gloo_world_of_one) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    weight = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    with pytest.raises(RuntimeError, match="got mixed torch.Tensor and DTensor"):
        torch.sub(weight, torch.ones(4, 4))
