"""Collectives as the agent records them in one process: the NCCL profiler
plugin pointed at and taken back, functional and direct c10d collectives
with kind, group, bytes and call site."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import meshscope
from conftest import CHILD_PRELUDE, child_process


def test_attach_points_nccl_at_the_profiler_plugin_and_detach_takes_it_back(
        mesh, run_dir, monkeypatch):
    from meshscope import _nccl

    monkeypatch.delenv("NCCL_PROFILER_PLUGIN", raising=False)
    monkeypatch.delenv("MESHSCOPE_NCCL_PROFILER", raising=False)
    meshscope.attach(run_dir)
    value = os.environ.get("NCCL_PROFILER_PLUGIN")
    meshscope.detach()
    assert "NCCL_PROFILER_PLUGIN" not in os.environ
    meta = meshscope.load_run(run_dir)["rank_details"][0]["meta"]
    if os.environ.get("MESHSCOPE_NCCL_PLUGIN_BUILT"):  # a CUDA build: the plugin is staged
        assert value == _nccl.plugin_path() and Path(value).name == _nccl.PLUGIN_FILE
        assert meta["nccl_profiler"] == value
    else:
        assert value is None and meta["nccl_profiler"].startswith("off (")


def test_a_users_nccl_profiler_plugin_and_the_opt_out_are_respected(mesh, tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_PROFILER_PLUGIN", "/opt/their/libnccl-profiler.so")
    with meshscope.capture(tmp_path / "theirs"):
        assert os.environ["NCCL_PROFILER_PLUGIN"] == "/opt/their/libnccl-profiler.so"
    assert os.environ["NCCL_PROFILER_PLUGIN"] == "/opt/their/libnccl-profiler.so"
    meta = meshscope.load_run(tmp_path / "theirs")["rank_details"][0]["meta"]
    assert meta["nccl_profiler"] == "/opt/their/libnccl-profiler.so (set by the user)"

    monkeypatch.delenv("NCCL_PROFILER_PLUGIN")
    monkeypatch.setenv("MESHSCOPE_NCCL_PROFILER", "0")
    with meshscope.capture(tmp_path / "off"):
        assert "NCCL_PROFILER_PLUGIN" not in os.environ
    meta = meshscope.load_run(tmp_path / "off")["rank_details"][0]["meta"]
    assert meta["nccl_profiler"] == "off (MESHSCOPE_NCCL_PROFILER=0)"


def _collectives(rank_file):
    import sqlite3

    with sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True) as db:
        return db.execute("SELECT k.text, g.text, c.bytes, c.end_ns >= c.start_ns "
                          "FROM collectives c JOIN strings k ON k.id = c.kind_id "
                          "LEFT JOIN strings g ON g.id = c.group_id ORDER BY c.seq").fetchall()


def test_functional_collectives_are_recorded_with_kind_group_and_bytes(mesh, run_dir):
    from torch.distributed import _functional_collectives as funcol

    session = meshscope.attach(run_dir)
    t = torch.ones(8)  # 32 bytes
    funcol.all_reduce(t, "sum", (mesh, 0)).wait()  # DTensor's way: a (mesh, dim) pair
    funcol.all_reduce(t, "sum", group=(mesh, 0)).wait()  # the same group, by keyword
    funcol.all_gather_tensor(torch.ones(2, 3), 0, mesh).wait()  # the mesh itself
    with pytest.raises(Exception) as raised:
        funcol.all_reduce(t, "no such op", (mesh, 0))
    meshscope.detach()
    with pytest.raises(type(raised.value)):  # the same error without meshscope
        funcol.all_reduce(t, "no such op", (mesh, 0))
    rows = _collectives(session.rank_file)
    assert rows[:2] == [("all_reduce", "mesh dim model", 32, 1)] * 2
    kind, group, size, ordered = rows[2]
    assert (kind, size, ordered) == ("all_gather_tensor", 24, 1) and group  # torch's group name
    assert rows[3] == ("all_reduce", "mesh dim model", 32, 1)  # the call that raised
    assert _states(session.rank_file) == ["completed"] * 3 + ["failed"]


STATES = ("completed", "failed", "pending", "unwaited")  # collectives.state (kCollectiveStates)


def _states(rank_file):
    import sqlite3

    states = STATES
    with sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True) as db:
        return [states[s] for (s,) in db.execute("SELECT state FROM collectives ORDER BY seq")]


def test_functional_collectives_are_recorded_while_the_nccl_plugin_listens(tmp_path):
    """Once NCCL's profiler plugin has taken the agent's collective sink, the
    functional-collective wrapper still records every collective, GPU ones
    included: what NCCL runs under it only adds its GPU time to that record
    (tests/plugins/test_nccl_profiler_agent.py), so a plugin that sees nothing
    (NCCL reports no events for a one-rank communicator) loses nothing."""
    code = CHILD_PRELUDE + """
    import ctypes
    from meshscope import _capture
    from torch.distributed import _functional_collectives as funcol
    record = _capture.collective(lambda t, group: t, "all_reduce", 0, str)
    record(torch.ones(4), (mesh, 0))
    getter = ctypes.CDLL(_capture.__file__).meshscope_collective_sink
    getter.restype = ctypes.c_void_p
    assert getter()  # what NCCL's plugin does first: the agent now says a plugin listens
    assert _capture.collective_plugin_listening()
    funcol.all_reduce(torch.ones(2), "sum", (mesh, 0)).wait()  # gloo, CPU
    if torch.cuda.is_available():
        record(torch.ones(8, device="cuda"), group=(mesh, 0))
    meshscope.detach()
    print("cuda" if torch.cuda.is_available() else "cpu")
    """
    child = child_process(code, str(tmp_path / "run"))
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    (rank_file,) = (tmp_path / "run").glob("rank-*.msdb")
    # (the prelude's distribute_tensor scatters directly through c10d)
    rows = [(kind, size) for kind, _, size, _ in _collectives(rank_file) if kind == "all_reduce"]
    cuda = [("all_reduce", 32)] if out.strip() == "cuda" else []
    assert rows == [("all_reduce", 16), ("all_reduce", 8)] + cuda, (rows, out)


def test_direct_c10d_collectives_are_recorded_with_kind_bytes_group_and_call_site(
        mesh, run_dir):
    """dist.all_reduce, broadcast, all_gather_into_tensor, barrier called by
    the program itself (no DTensor, no functional collective): each recorded
    once, tied to its c10d op and the line that called it. The c10d calls
    inside functional collectives are not counted again."""
    from torch.distributed import _functional_collectives as funcol

    meshscope.attach(run_dir)
    t = torch.ones(16)  # 64 bytes
    line = inspect.currentframe().f_lineno + 1
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    dist.all_gather_into_tensor(torch.empty(16), t)
    dist.barrier()
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    funcol.all_reduce(t, "sum", (mesh, 0)).wait()  # recorded once, as before
    meshscope.detach()
    rank = meshscope.load_run(run_dir, op_names=True)["rank_details"][0]
    collectives = rank["collectives"]
    here = os.path.basename(__file__)
    assert collectives["all_reduce"]["count"] == 3  # two direct, one functional
    assert collectives["all_reduce"]["ops"] == {"c10d::allreduce_": 2}
    assert collectives["all_reduce"]["bytes"] == 3 * 64
    sites = {site.rsplit("/", 1)[-1]: n for site, n in collectives["all_reduce"]["sites"].items()}
    # the functional one: its own call site
    assert sites == {f"{here}:{line}": 1, f"{here}:{line + 4}": 1, f"{here}:{line + 6}": 1}
    for kind, op, size, offset in (("broadcast", "c10d::broadcast_", 64, 1),
                                   ("all_gather_into_tensor", "c10d::_allgather_base_", 64, 2),
                                   ("barrier", "c10d::barrier", 0, 3)):
        entry = collectives[kind]
        assert (entry["count"], entry["bytes"], entry["ops"]) == (1, size, {op: 1}), (kind, entry)
        assert [s.rsplit("/", 1)[-1] for s in entry["sites"]] == [f"{here}:{line + offset}"]
        assert list(entry["groups"]) == ["default_pg (1 rank)"], entry
    assert rank["op_names"]["c10d::allreduce_"] == 2
