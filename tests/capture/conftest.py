"""Shared helpers of the capture tests: run scenarios the way a user would,
with `meshscope record`, and read the runs back with meshscope.load_run()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

SCENARIOS = Path(__file__).parent / "scenarios"
PYTHON = sys.executable
# a hang guard only (a stuck collective), not a performance limit
HANG_GUARD_S = 600


def cli() -> str:
    path = os.environ.get("MESHSCOPE_CLI")
    if not path:
        pytest.skip("MESHSCOPE_CLI is not set (run through ctest)")
    return path


class Recorded:
    def __init__(self, proc: subprocess.CompletedProcess, run_dir: Path, out: Path):
        self.proc, self.run_dir, self.out = proc, run_dir, out
        import meshscope

        self.run = meshscope.load_run(run_dir) if run_dir.exists() else None

    @property
    def stderr(self) -> str:
        return self.proc.stderr

    def ranks(self) -> list[dict[str, Any]]:
        return self.run["rank_details"]

    def losses(self, rank: int) -> list[float]:
        return json.loads((self.out / f"rank{rank}.json").read_text())["losses"]


def record(tmp_path: Path, scenario: str, policy: str, *extra: str, nproc: int = 2) -> Recorded:
    run_dir = tmp_path / f"run-{policy}"
    out = tmp_path / f"out-{policy}"
    out.mkdir()
    env = {**os.environ, "SCENARIO_OUT": str(out)}
    proc = subprocess.run(
        [cli(), "record", "-o", str(run_dir), "--policy", policy, "-n", str(nproc), *extra,
         "--", PYTHON, str(SCENARIOS / f"{scenario}.py")],
        env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=SCENARIOS)
    return Recorded(proc, run_dir, out)


def reference(tmp_path: Path, scenario: str) -> list[float]:
    out = tmp_path / "reference"
    out.mkdir()
    subprocess.run([PYTHON, str(SCENARIOS / f"{scenario}.py"), "--reference"], check=True,
                   env={**os.environ, "SCENARIO_OUT": str(out)}, capture_output=True,
                   timeout=HANG_GUARD_S, cwd=SCENARIOS)
    return json.loads((out / "reference.json").read_text())["losses"]


def free_port() -> int:
    """A rendezvous port for ranks the tests start themselves, as `meshscope
    record` picks one: free now and below the kernel's ephemeral range, so
    that no connection or listener of the tests running beside this one
    takes it before rank 0 listens on it."""
    import random
    import socket

    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(64):
        port = random.randint(max(1025, low - 12000), low - 1)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_without_agent(tmp_path: Path, scenario: str, nproc: int = 2) -> list[dict[str, Any]]:
    """The scenario's ranks started directly (no meshscope anywhere)."""
    out = tmp_path / "plain"
    out.mkdir()
    port = free_port()
    procs = []
    for rank in range(nproc):
        env = {**os.environ, "SCENARIO_OUT": str(out), "RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([PYTHON, str(SCENARIOS / f"{scenario}.py")], env=env,
                                      cwd=SCENARIOS, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=HANG_GUARD_S)
        assert p.returncode == 0, err[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]


def check_findings(run_dir: Path, kind: str) -> list[str]:
    """The `meshscope check` findings of one kind, without the kind's prefix."""
    proc = subprocess.run([cli(), "check", str(run_dir)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode in (0, 1), proc.stderr
    return [line.split(": ", 1)[1] for line in proc.stdout.splitlines()
            if line.startswith(kind + ": ")]


def marker_line(scenario: str) -> int:
    lines = (SCENARIOS / f"{scenario}.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if "# INCIDENT" in line)


# ---- the agent in one process (test_agent*.py) ----

@pytest.fixture(scope="module")
def mesh():
    """A world of one (gloo) and its mesh. It needs no rendezvous: an
    in-process store, not a probed TCP port another test running beside this
    one could take meanwhile."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    os.environ.update(RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,), mesh_dim_names=("model",))
    dist.destroy_process_group()


@pytest.fixture
def run_dir(tmp_path):
    """The run folder of a test that attaches; detached after it."""
    import meshscope

    yield tmp_path / "run"
    meshscope.detach()


def incidents(run_dir):
    import meshscope

    return meshscope.load_run(run_dir)["rank_details"][0]["incidents"]


def child_process(code: str, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


CHILD_PRELUDE = """
    import os, sys, time, torch, torch.distributed as dist
    import meshscope
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    os.environ.update(RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))
    meshscope.attach(sys.argv[1], policy="auto")
    w = distribute_tensor(torch.ones(64, 64), mesh, [Shard(0)])
"""
