"""The agent in child processes it must survive or leave readable: SIGKILL,
SIGTERM, a full file cap, an unusable run folder, DataLoader fork workers,
and the pytest plugin failing a test with a swallowed incident."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import meshscope
from conftest import CHILD_PRELUDE, child_process


def test_sigkilled_rank_leaves_a_readable_database(tmp_path):
    run = tmp_path / "run"
    proc = child_process(CHILD_PRELUDE + """
    for i in range(50):
        w = w + torch.ones(64, 64)
    meshscope._capture.flush()
    print("flushed", flush=True)
    time.sleep(60)
    """, str(run))
    assert proc.stdout.readline().strip() == "flushed", proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    got = meshscope.load_run(run)
    assert len(got["rank_details"][0]["incidents"]) == 50
    assert got["ranks"][0]["status"] != "closed" if "status" in got["ranks"][0] else True


def test_sigterm_flushes_the_rank_file(tmp_path):
    run = tmp_path / "run"
    proc = child_process(CHILD_PRELUDE + """
    for i in range(20):
        w = w + torch.ones(64, 64)
    print("ready", flush=True)
    time.sleep(60)
    """, str(run))
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    assert proc.returncode == -signal.SIGTERM
    got = meshscope.load_run(run)
    assert len(got["rank_details"][0]["incidents"]) == 20


def test_a_full_file_cap_degrades_to_counted_drops_and_training_goes_on(tmp_path):
    run = tmp_path / "run"
    proc = child_process(CHILD_PRELUDE + """
    for i in range(3000):
        w = w + torch.ones(64, 64)
    meshscope._capture.flush()
    st = meshscope.stats()
    print("done", st["drops"]["file_cap"], float(w.full_tensor()[0, 0]), flush=True)
    """, str(run), MESHSCOPE_MAX_FILE_BYTES="200000")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    _, drops, value = out.split()
    assert int(drops) > 0 and float(value) == 3001.0  # training unaffected
    assert err.count("meshscope") >= 1 and "write" in err.lower()


def test_unusable_run_directory_leaves_training_unrecorded_under_the_loader(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {**os.environ, "MESHSCOPE_RUN_DIR": str(blocker / "run"), "MESHSCOPE_ATTACH": "always"}
    loader = Path(meshscope.__file__).parent / "_loader"
    env["PYTHONPATH"] = f"{loader}:{env['PYTHONPATH']}"
    proc = subprocess.run([sys.executable, "-c", "print('trained')"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "trained" in proc.stdout
    # attached without a file: its policy still runs (tests/capture/test_store_faults.py)
    assert "meshscope: rank 0 is not recording" in proc.stderr and str(blocker) in proc.stderr


def test_dataloader_fork_workers_do_not_corrupt_the_store(tmp_path):
    run = tmp_path / "run"
    proc = child_process(CHILD_PRELUDE + """
    from torch.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(torch.ones(64, 64)), batch_size=8, num_workers=2,
                        multiprocessing_context="fork")
    for (batch,) in loader:
        w = w + torch.ones(64, 64)
    meshscope.detach()
    print("ok", flush=True)
    """, str(run))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    got = meshscope.load_run(run)
    assert len(got["rank_details"][0]["incidents"]) == 8
    assert got["problems"] == []


def test_pytest_plugin_fails_a_test_with_a_swallowed_incident(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import os, socket, torch, torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor

        def setup_module():
            s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0",
                              WORLD_SIZE="1")
            dist.init_process_group("gloo")

        def test_swallows():
            w = distribute_tensor(torch.ones(4, 4), init_device_mesh("cpu", (1,)), [Shard(0)])
            try:
                w - torch.ones(4, 4)
            except RuntimeError:
                pass

        def test_clean():
            assert True
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "meshscope.pytest",
                           "--meshscope-policy", "observe", "--meshscope-dir",
                           str(tmp_path / "runs"), "-p", "no:cacheprovider", "test_user.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout
    assert "unreconciled mixed torch.Tensor/DTensor incident" in proc.stdout
    assert "aten::sub.Tensor at" in proc.stdout and "test_user.py" in proc.stdout
