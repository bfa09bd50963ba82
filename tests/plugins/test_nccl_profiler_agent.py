"""The NCCL profiler plugin and the real capture agent in one process, as on
a GPU machine but without one: the plugin is dlopen'ed (as NCCL would) and
driven by the fake NCCL of tests/plugins/fake_nccl.h through ctypes. A
collective lands in the rank's SQLite file tied to the op that issued it,
read back with meshscope.load_run (RankReader) and `meshscope summary`."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess

import pytest
import torch

import meshscope
from meshscope import _capture

COUNT = 256  # float32 elements: 1024 bytes


@pytest.fixture
def driver():
    lib = ctypes.CDLL(os.environ["FAKE_NCCL_DRIVER"])
    lib.fake_nccl_open.argtypes = [ctypes.c_char_p]
    lib.fake_nccl_init.restype = ctypes.c_void_p
    lib.fake_nccl_init.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_int]
    lib.fake_nccl_api_call.restype = ctypes.c_void_p
    lib.fake_nccl_api_call.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                       ctypes.c_char_p]
    lib.fake_nccl_run_task.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                                       ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int,
                                       ctypes.c_uint64, ctypes.c_uint64]
    lib.fake_nccl_finalize.argtypes = [ctypes.c_void_p]
    assert lib.fake_nccl_open(os.environ["MESHSCOPE_NCCL_PLUGIN"].encode()) == 0
    return lib


def all_reduce(driver, comm, gpu_start: int, api=None):
    """NCCL's part of one all_reduce: the call (unless made already), its
    task and two kernel channels over [gpu_start, gpu_start + 5000] ns."""
    if api is None:
        api = driver.fake_nccl_api_call(comm, b"AllReduce", COUNT, b"ncclFloat32")
    driver.fake_nccl_run_task(comm, api, b"AllReduce", COUNT, b"ncclFloat32", 2, gpu_start,
                              gpu_start + 5000)


def test_collectives_land_in_the_rank_file_tied_to_their_op(tmp_path, driver):
    run_dir = tmp_path / "run"
    meshscope.attach(run_dir, level="all")  # every op, custom ones included
    try:
        comm = driver.fake_nccl_init(0x5EED, 0, 1)
        assert comm, "the plugin found no sink: is meshscope_collective_sink global?"
        pending = []

        @torch.library.custom_op("meshscope_test::fake_all_reduce", mutates_args=())
        def fake_all_reduce(x: torch.Tensor, finish_inside: bool) -> torch.Tensor:
            # finished inside: the collective waits for its op to be recorded
            if finish_inside:
                all_reduce(driver, comm, 1_000_000)
            else:
                pending.append(driver.fake_nccl_api_call(comm, b"AllReduce", COUNT,
                                                         b"ncclFloat32"))
            return x.clone()

        fake_all_reduce(torch.ones(4), True)
        fake_all_reduce(torch.ones(4), False)
        all_reduce(driver, comm, 2_000_000, api=pending[0])  # after its op was recorded
        all_reduce(driver, comm, 3_000_000)  # outside any op
        driver.fake_nccl_finalize(comm)
    finally:
        meshscope.detach()

    rank = meshscope.load_run(run_dir)["rank_details"][0]
    entry = rank["collectives"]["AllReduce"]
    assert entry["count"] == 3
    assert entry["bytes"] == 3 * COUNT * 4
    assert entry["device_ns"] == 3 * 5000
    assert entry["ops"] == {"meshscope_test::fake_all_reduce": 2}
    assert rank["meta"][f"comm.{0x5EED:016x}"] == "name=driver comm rank=0 size=1 nodes=1"

    summary = subprocess.run([os.environ["MESHSCOPE_CLI"], "summary", "--json", str(run_dir)],
                             capture_output=True, text=True, check=True).stdout
    ranks = json.loads(summary)["ranks"]
    assert (ranks[0]["collectives"], ranks[0]["collective_bytes"]) == (3, 3 * COUNT * 4)


def test_plugin_stays_off_without_an_attached_agent(driver, capfd):
    assert not meshscope.attached()
    assert not driver.fake_nccl_init(1, 0, 1)
    assert "no meshscope agent is attached" in capfd.readouterr().err


def test_sink_is_null_when_detached_and_reachable_when_attached(tmp_path):
    sink = ctypes.CDLL(_capture.__file__).meshscope_collective_sink
    sink.restype = ctypes.c_void_p
    assert not sink()
    meshscope.attach(tmp_path / "run")
    try:
        assert sink()
    finally:
        meshscope.detach()
    assert not sink()
