"""Run folders as a user meets them: a script that calls meshscope.attach()
run a second time, the default folder of a job without a process group, and
a job on two nodes recorded with one run id and merged into one run."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import meshscope
from conftest import HANG_GUARD_S, PYTHON, SCENARIOS, cli, free_port

ATTACHING_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import meshscope
    meshscope.attach({run_dir})
    x = torch.ones(4) * 2
    meshscope.detach()
    print("trained", float(x.sum()))
""")


def run_script(tmp_path: Path, script: str, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess:
    path = tmp_path / "train.py"
    path.write_text(script)
    return subprocess.run([PYTHON, str(path)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **(env or {})}, timeout=HANG_GUARD_S)


def test_a_script_that_attaches_runs_again_into_a_fresh_folder(tmp_path):
    run_dir = tmp_path / "run"
    script = ATTACHING_SCRIPT.format(run_dir=repr(str(run_dir)))
    first = run_script(tmp_path, script)
    assert first.returncode == 0 and "trained 8.0" in first.stdout, first.stderr[-3000:]
    again = run_script(tmp_path, script)
    assert again.returncode == 0 and "trained 8.0" in again.stdout, again.stderr[-3000:]
    fresh = Path(f"{run_dir}-job{os.getpid()}")
    assert f"{run_dir} holds rank 0's file of an earlier run; recording into {fresh}" \
        in again.stderr
    for folder in (run_dir, fresh):
        assert [r["rank"] for r in meshscope.load_run(folder)["rank_details"]] == [0]


def test_the_default_folder_of_ranks_without_a_process_group_is_new_each_run(tmp_path):
    """Two ranks that attach before (without) a process group agree on the
    folder by the job (master port and launcher); the same job run again
    records beside it instead of failing on its files."""
    script = ATTACHING_SCRIPT.format(run_dir="")
    (tmp_path / "train.py").write_text(script)
    port = str(free_port())

    def job():
        procs = [subprocess.Popen([PYTHON, "train.py"], cwd=tmp_path, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2",
                                       "LOCAL_RANK": str(r), "MASTER_PORT": port})
                 for r in range(2)]
        outs = [p.communicate(timeout=HANG_GUARD_S) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0 and "trained 8.0" in out, err[-3000:]

    job()
    job()
    runs = sorted((tmp_path / "meshscope-runs").iterdir())
    assert len(runs) == 2, runs
    assert runs[0].name.endswith(f"-port{port}-job{os.getpid()}")
    assert runs[1].name == runs[0].name + f"-job{os.getpid()}"
    for run in runs:
        assert [r["rank"] for r in meshscope.load_run(run)["rank_details"]] == [0, 1]


def test_two_nodes_recorded_with_one_run_id_merge_into_one_run(tmp_path):
    """The README's two-node recipe, both nodes on this machine: torchrun
    with a static rendezvous per node, `meshscope record --run-id` on each,
    then `meshscope merge`."""
    port = str(free_port())
    out = tmp_path / "out"
    out.mkdir()
    nodes = []
    for node in range(2):
        command = [cli(), "record", "-o", str(tmp_path / f"node{node}"), "--run-id",
                   "job-2026.11_a", "--", PYTHON, "-m", "torch.distributed.run", "--nnodes", "2",
                   "--node_rank", str(node), "--nproc_per_node", "1", "--master_addr",
                   "127.0.0.1", "--master_port", port, str(SCENARIOS / "s0_clean.py")]
        nodes.append(subprocess.Popen(command, cwd=SCENARIOS, text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE,
                                      env={**os.environ, "SCENARIO_OUT": str(out)}))
    for proc in nodes:
        _, err = proc.communicate(timeout=HANG_GUARD_S)
        assert proc.returncode == 0, err[-3000:]
        assert "run recorded in" in err
    merged = tmp_path / "merged"
    proc = subprocess.run([cli(), "merge", "-o", str(merged), str(tmp_path / "node0"),
                           str(tmp_path / "node1")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = meshscope.load_run(merged)
    assert [r["rank"] for r in run["rank_details"]] == [0, 1]
    info = subprocess.run([cli(), "info", str(merged)], capture_output=True, text=True)
    assert info.returncode == 0 and "job-2026.11_a" in info.stdout, info.stdout + info.stderr
    check = subprocess.run([cli(), "check", str(merged)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
