"""Where the time goes in a healthy run, recorded as a user would: the
op statistics, each rank's steps split into time outside collectives and
with one in flight, the slowest rank of each step, and `check --fail-on
straggler` naming the rank the others wait for (scenario t1, whose
docstring cites the public reports it models)."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import HANG_GUARD_S, cli, record

STALL_S = 0.06


def record_t1(tmp_path, stall_rank: int):
    os.environ["STALL_RANK"] = str(stall_rank)
    try:
        rec = record(tmp_path, "t1_input_straggler", "observe")
    finally:
        del os.environ["STALL_RANK"]
    assert rec.proc.returncode == 0, rec.stderr[-3000:]
    return rec


def check(run_dir, *args):
    return subprocess.run([cli(), "check", str(run_dir), *args], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)


def json_report(tmp_path, run_dir):
    out = tmp_path / "report.json"
    proc = subprocess.run([cli(), "report", str(run_dir), "-o", str(out)], capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_a_rank_with_a_slow_input_pipeline_is_named_the_straggler(tmp_path):
    rec = record_t1(tmp_path, stall_rank=1)
    # not a finding of the default gate: a slow rank is not an error
    assert check(rec.run_dir).returncode == 0
    proc = check(rec.run_dir, "--fail-on", "straggler")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("straggler: ")]
    assert len(lines) == 1, proc.stdout
    assert lines[0].startswith("straggler: rank 1 is the slowest rank in "), lines[0]
    assert "they wait for it in their collectives" in lines[0]

    time = json_report(tmp_path, rec.run_dir)["time"]
    # the overview puts the slow rank first; its steps are longer outside
    # collectives by about the stall, and rank 0 spends them in collectives
    ranks = {r["rank"]: r for r in time["ranks"]}
    assert time["ranks"][0]["rank"] == 1
    assert ranks[1]["steps"] == ranks[0]["steps"] == 8
    stall_ns = STALL_S * 1e9
    # (bounds with room for a busy 2-core machine: the ranks share it)
    assert ranks[1]["median_outside_collectives_ns"] - ranks[0]["median_outside_collectives_ns"] \
        > 0.6 * stall_ns
    assert ranks[0]["median_collective_ns"] - ranks[1]["median_collective_ns"] > 0.6 * stall_ns
    # every step's wall time is about the same on both ranks: they finish together
    assert abs(ranks[0]["median_step_ns"] - ranks[1]["median_step_ns"]) < 0.35 * stall_ns
    slowest = [s["rank"] for s in time["slowest"]]
    assert len(slowest) == 8 and slowest.count(1) >= 6, slowest
    # op statistics: the tensor-parallel forward's ops with their placements
    ops = {o["name"]: o for o in time["ops"]}
    mm = [o for name, o in ops.items() if name.startswith("aten::") and "mm" in name]
    assert mm, sorted(ops)
    assert any("Shard(dim=" in p or "Replicate()" in p for o in mm for p in o["placements"]), mm
    assert all(o["ranks"] == 2 and o["count"] >= 16 for o in mm), mm
    collectives = [o for o in time["ops"] if o["collective"]]
    assert collectives and all(o["bytes"] > 0 for o in collectives), collectives

    # the Markdown report says the same in prose
    md = tmp_path / "report.md"
    subprocess.run([cli(), "report", str(rec.run_dir), "-o", str(md)], check=True,
                   timeout=HANG_GUARD_S)
    text = md.read_text()
    assert "## Where the time goes" in text
    assert "**Straggler:** rank 1 is the slowest rank in" in text


def test_ranks_that_stall_alike_have_no_straggler(tmp_path):
    rec = record_t1(tmp_path, stall_rank=-1)
    proc = check(rec.run_dir, "--fail-on", "straggler")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    time = json_report(tmp_path, rec.run_dir)["time"]
    assert time["stragglers"] == []
    for r in time["ranks"]:
        # the stall is outside collectives on both
        assert r["median_outside_collectives_ns"] > 0.6 * STALL_S * 1e9, r
