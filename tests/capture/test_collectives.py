"""Collectives and hangs, on gloo and on ncclsim (NCCL's semantics on the CPU:
completion reported after wait() returned, errors raised asynchronously by a
watchdog that takes the process down; tests/capture/ncclsim). Each scenario
is recorded with `meshscope record` and read back with `check` and the JSON
report, as a user would."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import HANG_GUARD_S, PYTHON, SCENARIOS, cli, record

BACKENDS = ["gloo", "ncclsim"]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    monkeypatch.setenv("MESHSCOPE_SCENARIO_BACKEND", request.param)
    if request.param == "ncclsim" and not os.environ.get("MESHSCOPE_NCCLSIM_DIR"):
        pytest.skip("MESHSCOPE_NCCLSIM_DIR is not set (run through ctest)")
    return request.param


def site(scenario: str, mark: str) -> str:
    path = SCENARIOS / f"{scenario}.py"
    lines = path.read_text().splitlines()
    return f"{path}:{next(i + 1 for i, line in enumerate(lines) if mark in line)}"


def check(run_dir) -> subprocess.CompletedProcess:
    return subprocess.run([cli(), "check", str(run_dir)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)


def report(run_dir) -> dict:
    return json.loads(subprocess.run(
        [cli(), "report", str(run_dir), "--format", "json", "-o", "-"], capture_output=True,
        text=True, timeout=HANG_GUARD_S, check=True).stdout)


def collectives(run_dir, rank: int) -> list[tuple]:
    import sqlite3

    states = ("completed", "failed", "pending", "unwaited")  # collectives.state
    with sqlite3.connect(f"file:{run_dir}/rank-{rank:05d}.msdb?mode=ro", uri=True) as db:
        return [(seq, kind, states[state], (end - start) / 1e9, line)
                for seq, kind, state, start, end, line in db.execute(
                    "SELECT c.seq, k.text, c.state, c.start_ns, c.end_ns, f.line "
                    "FROM collectives c JOIN strings k ON k.id = c.kind_id "
                    "LEFT JOIN stack_frames f ON f.stack_id = c.stack_id AND f.depth = 0 "
                    "ORDER BY c.seq")]


def test_tensor_parallel_hang_is_caught_at_the_training_line(tmp_path, backend):
    """Rank 0 waits in RowwiseParallel's all_reduce (a functional collective
    waited lazily): the watchdog prints every thread's stacks once and records
    a hang at the line that waits; the collective is recorded as the long bar
    it was, and its failure (gloo: the peer left; NCCL: the watchdog's abort)
    is a collective error."""
    rec = record(tmp_path, "h3_tp_extra_batch", "observe", "--watchdog", "3")
    loss_line = site("h3_tp_extra_batch", "# HANG rank 0")
    issued = site("h3_tp_extra_batch", "# ISSUED")
    text = rec.stderr
    assert text.count("meshscope watchdog: rank 0:") == 1, text[-4000:]
    assert f"issued at {issued}, waited for at {loss_line}" in text, text[-4000:]
    assert "MainThread" in text and "loss = (out**2).mean()" in text
    found = check(rec.run_dir)
    assert f"hang: {loss_line}: rank(s) 0 waited in all_reduce on mesh dim dp" in found.stdout, \
        found.stdout
    assert f"collective-error: {loss_line}: rank(s) 0 failed in all_reduce" in found.stdout \
        or "collective-error: " + issued in found.stdout, found.stdout
    # rank 0's last collective, from issue to its end: as long as the wait was
    last = collectives(rec.run_dir, 0)[-1]
    assert last[1] == "all_reduce" and last[2] in ("failed", "pending") and last[3] > 3, last
    if backend == "gloo":
        assert "Connection closed by peer" in found.stdout
    else:  # NCCL's watchdog took rank 0 down (before or after its file was closed)
        stops = {s["rank"]: s for s in report(rec.run_dir)["stops"]}
        assert "SIGABRT" in stops[0]["ended"], stops
    trace = tmp_path / "trace.json"
    subprocess.run([cli(), "export", str(rec.run_dir), "-o", str(trace)], check=True,
                   capture_output=True, timeout=HANG_GUARD_S)
    events = json.loads(trace.read_text())["traceEvents"]
    waits = [e for e in events if e.get("args", {}).get("state") in ("failed", "pending")]
    assert waits and max(e["dur"] for e in waits) > 3e6, waits  # microseconds


def test_one_rank_issued_a_collective_named_with_both_call_sites(tmp_path, backend):
    """Rank 0 all-reduces a metric rank 1 never does; rank 1's next all_reduce
    meets it with another size and the rank aborts. Its file keeps what it
    recorded, and the collective that killed it with its call site."""
    rec = record(tmp_path, "h4_one_rank_metric", "observe")
    assert rec.proc.returncode != 0
    metric, grad = site("h4_one_rank_metric", "# METRIC"), site("h4_one_rank_metric", "# GRAD")
    found = check(rec.run_dir)
    assert (f"divergent: rank 1: collective #1 (step 0) is all_reduce on default_pg (2 ranks), "
            f"8 B at {grad} where rank(s) 0 have all_reduce on default_pg (2 ranks), 32 B at "
            f"{metric}; the same collective with another size") in found.stdout, found.stdout
    stops = {s["rank"]: s for s in report(rec.run_dir)["stops"]}
    aborted = [r for r, s in stops.items() if s["end"] == "aborted"]
    assert aborted, stops
    for r in aborted:
        assert "SIGABRT" in stops[r]["ended"], stops[r]
        kept = collectives(rec.run_dir, r)
        # committed before the abort (on ncclsim its completion may not have been
        # reported yet: pending)
        assert kept[0][:2] == (1, "all_reduce") and kept[0][2] in ("completed", "pending"), kept
        culprit = kept[-1]  # the collective that killed it, with its call site
        assert culprit[2] == "pending" and culprit[4] == int((metric if r == 0 else grad)
                                                              .rsplit(":", 1)[1]), kept
        assert stops[r]["stopped_in"] == "collective-error", stops[r]
        assert f"issued at {metric if r == 0 else grad}" in stops[r]["state"], stops[r]
    if backend == "gloo":
        assert stops[1]["end"] == "aborted" and "op.preamble.length <= op.nbytes" in \
            stops[1]["ended"], stops[1]


def test_killed_rank_is_compared_only_as_far_as_it_recorded(tmp_path, backend):
    rec = record(tmp_path, "h5_killed_rank", "observe")
    found = check(rec.run_dir)
    assert "divergent" not in found.stdout, found.stdout
    assert re.search(r"note: rank 1: killed by SIGKILL without closing its file; its recording "
                     r"reaches into step [23] ", found.stderr), found.stderr
    stops = {s["rank"]: s for s in report(rec.run_dir)["stops"]}
    assert stops[1]["end"] == "killed", stops


def test_live_run_is_checked_on_its_complete_steps(tmp_path, backend):
    run_dir = tmp_path / "run"
    env = {**os.environ, "STEPS": "200", "STEP_S": "0.05"}
    proc = subprocess.Popen(
        [cli(), "record", "-o", str(run_dir), "-n", "2", "--", PYTHON,
         str(SCENARIOS / "h6_slow_training.py")], env=env, cwd=SCENARIOS,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for line in proc.stdout:
            if "rank 1 step 5" in line:
                break
        results = [check(run_dir) for _ in range(3)]
        time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=HANG_GUARD_S)
    for found in results:
        assert found.returncode == 0, found.stdout + found.stderr
        assert "note: rank 0: still recording (step" in found.stderr, found.stderr


SYNC_AND_ASYNC = '''
import sys
sys.path.insert(0, {scenarios!r})
import torch
import torch.distributed as dist
from common import setup

rank, world, mesh = setup()
t = torch.ones(8)
opts = dist.AllreduceOptions()
opts.asyncOp = False  # what dist.all_reduce(t) asks its group for
work = dist.distributed_c10d._get_default_group().allreduce([t], opts)  # SYNC
if work is not None:  # gloo's: waited for, as dist.all_reduce does
    work.wait()
open(f"{{sys.argv[1]}}.{{rank}}", "w").write(type(work).__name__)
handle = dist.all_reduce(t, async_op=True)  # ASYNC
handle.wait()
assert t[0].item() == world * world, t
dist.destroy_process_group()
'''


def test_synchronous_collectives_without_a_work_are_recorded_complete(tmp_path, backend):
    """A synchronous collective returns no Work on NCCL since torch 2.8
    (ProcessGroupNCCL: `return asyncOp ? work : nullptr`), as on ncclsim; on
    gloo it returns one and Python waits for it. Either way both collectives
    are recorded completed, each at its line, and never as unwaited."""
    script = tmp_path / "sync_async.py"
    script.write_text(SYNC_AND_ASYNC.format(scenarios=str(SCENARIOS)))
    proc = subprocess.run([cli(), "record", "-o", str(tmp_path / "run"), "-n", "2", "--",
                           PYTHON, str(script), str(tmp_path / "work")], capture_output=True,
                          text=True,
                          timeout=HANG_GUARD_S, cwd=SCENARIOS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    want = "NoneType" if backend == "ncclsim" else "Work"
    assert [(tmp_path / f"work.{r}").read_text() for r in (0, 1)] == [want, want]
    lines = script.read_text().splitlines()
    sync, asynchronous = (next(i + 1 for i, l in enumerate(lines) if mark in l)
                          for mark in ("# SYNC", "# ASYNC"))
    for r in (0, 1):
        kept = [c for c in collectives(tmp_path / "run", r) if c[1] == "all_reduce"]
        assert [(c[2], c[4]) for c in kept] == [("completed", sync), ("completed", asynchronous)], kept
    assert check(tmp_path / "run").returncode == 0
