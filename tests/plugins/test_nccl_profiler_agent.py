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
import threading
import time

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


def test_a_communicator_made_before_attach_is_recorded_from_attach_on(tmp_path, driver):
    """init_process_group(device_id=...) makes NCCL create the world
    communicator eagerly, before a late meshscope.attach(); DeviceMesh splits
    sub-groups after it. NCCL reports tasks and kernels from its own threads."""
    assert not meshscope.attached()
    world = driver.fake_nccl_init(0xEA51, 0, 1)
    assert world, "a communicator made before attach must still be followed"
    all_reduce(driver, world, 500_000)  # no agent: recorded nowhere
    run_dir = tmp_path / "run"
    meshscope.attach(run_dir)
    try:
        time.sleep(0.03)  # the plugin asks for the agent again at most every 10 ms
        api = driver.fake_nccl_api_call(world, b"AllReduce", COUNT, b"ncclFloat32")
        on_nccl_thread = threading.Thread(target=all_reduce, args=(driver, world, 1_000_000, api))
        on_nccl_thread.start()
        on_nccl_thread.join()
        split = driver.fake_nccl_init(0x5B17, 0, 1)
        all_reduce(driver, split, 2_000_000)
        driver.fake_nccl_finalize(split)
        driver.fake_nccl_finalize(world)
    finally:
        meshscope.detach()
    rank = meshscope.load_run(run_dir)["rank_details"][0]
    assert rank["collectives"]["AllReduce"]["count"] == 2
    assert rank["collectives"]["AllReduce"]["device_ns"] == 2 * 5000
    assert rank["meta"][f"comm.{0xEA51:016x}"] == "name=driver comm rank=0 size=1 nodes=1"
    assert f"comm.{0x5B17:016x}" in rank["meta"]


def test_nccl_under_a_torch_collective_adds_its_gpu_time_without_a_second_record(
        tmp_path, driver):
    """A functional collective (as DTensor's redistributions call them) that
    NCCL runs: one record, of torch's kind, group and bytes, carrying NCCL's
    GPU time; not a second "AllReduce" record beside it."""
    meshscope.attach(tmp_path / "run")
    try:
        comm = driver.fake_nccl_init(0xF00D, 0, 1)
        apis = []

        def original(tensor, op, group):  # what funcol does: NCCL is called inside
            apis.append(driver.fake_nccl_api_call(comm, b"AllReduce", COUNT, b"ncclFloat32"))
            return tensor.clone()

        wrapped = _capture.collective(original, "all_reduce", 1, lambda group: "mesh dim tp")
        wrapped(torch.ones(COUNT), "sum", None)
        all_reduce(driver, comm, 7_000_000, api=apis[0])  # the kernel ends after the call
        driver.fake_nccl_finalize(comm)
    finally:
        meshscope.detach()
    collectives = meshscope.load_run(tmp_path / "run")["rank_details"][0]["collectives"]
    assert set(collectives) == {"all_reduce"}, collectives
    assert collectives["all_reduce"]["count"] == 1
    assert collectives["all_reduce"]["bytes"] == COUNT * 4
    assert collectives["all_reduce"]["device_ns"] == 5000
    assert collectives["all_reduce"]["groups"] == {"mesh dim tp": 1}


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
