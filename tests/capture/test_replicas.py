"""Replica drift (core/analysis/replica_drift.h, meshscope/_replicas.py): the
state ranks must hold equal, fingerprinted at sampled optimizer steps and
compared across ranks by `check`. Scenario: scenarios/d1_sp_norm_drift.py,
a norm left out of a sequence-parallel plan (its sources are cited there).
The fix `check` prints is run and compared with the example's own plan."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import HANG_GUARD_S, Recorded, cli, record

SCENARIO = "d1_sp_norm_drift"


def check(run_dir: Path) -> tuple[list[tuple[str, str]], str]:
    """`meshscope check`: its findings as (kind, message), and its summary."""
    proc = subprocess.run([cli(), "check", str(run_dir)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode in (0, 1), proc.stderr
    findings = [tuple(line.split(": ", 1)) for line in proc.stdout.splitlines() if ": " in line]
    return findings, proc.stderr


def record_plan(tmp_path: Path, plan: str, fix: str = "", label: str = "") -> Recorded:
    os.environ["SCENARIO_PLAN"] = plan
    os.environ["SCENARIO_FIX"] = fix
    try:
        sub = tmp_path / (label or f"{plan}{'-fixed' if fix else ''}")
        sub.mkdir()
        rec = record(sub, SCENARIO, "observe")
    finally:
        del os.environ["SCENARIO_PLAN"], os.environ["SCENARIO_FIX"]
    assert rec.proc.returncode == 0, rec.stderr[-3000:]
    return rec


def drift_findings(rec: Recorded) -> list[str]:
    return [message for kind, message in check(rec.run_dir)[0] if kind == "drift"]


def test_a_norm_left_out_of_the_sequence_parallel_plan_drifts_and_the_printed_fix_repairs_it(
        tmp_path, monkeypatch):
    monkeypatch.setenv("SCENARIO_STEP_PAUSE_S", "2")  # the job outlives record's first look
    broken = record_plan(tmp_path, "broken")
    monkeypatch.delenv("SCENARIO_STEP_PAUSE_S")
    # said while the job still ran, before its end summary
    live = broken.stderr.find("meshscope: replica drift (the job goes on, silently wrong): "
                              "layers.0.ffn_norm.weight [dp=0] differs across ranks 0 | 1 from step 0")
    assert 0 <= live < broken.stderr.find("meshscope: run recorded in"), broken.stderr[-4000:]
    assert "replicas that drift apart (2 parameter(s)" in broken.stderr, broken.stderr[-3000:]
    # nothing raised: the ranks trained on with different norm weights
    sums = [json.loads((broken.out / f"rank{r}.json").read_text())["ffn_norm_sum"]
            for r in (0, 1)]
    assert sums[0] != sums[1], sums
    findings = drift_findings(broken)
    names = sorted(f.split(" ")[0] for f in findings)
    assert names == ["layers.0.ffn_norm.weight", "layers.1.ffn_norm.weight"], findings
    text = next(f for f in findings if f.startswith("layers.0.ffn_norm.weight"))
    assert "(RMSNorm" in text and "across ranks 0 | 1 from step 0 (grad first)" in text, text
    assert "never reduced across them" in text and "SequenceParallel" in text, text
    assert 'parallelize_module(model, tp_mesh, {"layers.0.ffn_norm": SequenceParallel()})' \
        in text, text

    # the example's own plan: no drift, and the reference losses
    full = record_plan(tmp_path, "full")
    findings_full, summary = check(full.run_dir)
    assert findings_full == [], findings_full
    # the default samples every 50th step: step 0 here, where the drift shows already
    assert "replicated tensor(s) compared at 1 sampled step(s)" in summary, summary
    # the printed fixes, run as the user would: the same training as the full plan
    fixes = "\n".join(f.rsplit(", e.g. ", 1)[1] for f in findings)
    fixed = record_plan(tmp_path, "broken", fixes)
    assert drift_findings(fixed) == []
    for r in (0, 1):
        assert fixed.losses(r) == full.losses(r), (r, fixed.losses(r), full.losses(r))
    assert broken.losses(0) != full.losses(0)


def test_the_check_samples_steps_and_can_be_turned_off(tmp_path, monkeypatch):
    """MESHSCOPE_REPLICA_CHECK: every:N samples the steps 0, N, 2N...; off
    records nothing (and so finds nothing)."""
    monkeypatch.setenv("MESHSCOPE_REPLICA_CHECK", "every:2")
    sampled = record_plan(tmp_path, "broken")
    steps = {r["step"] for r in replica_rows(sampled.run_dir)}
    assert steps == {0, 2}, steps
    monkeypatch.setenv("MESHSCOPE_REPLICA_CHECK", "off")
    off = record_plan(tmp_path, "broken", label="off")
    assert replica_rows(off.run_dir) == []
    assert drift_findings(off) == []


def test_a_bad_setting_says_what_and_where(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHSCOPE_REPLICA_CHECK", "every:0")
    os.environ["SCENARIO_PLAN"] = "broken"
    try:
        rec = record(tmp_path, SCENARIO, "observe")
    finally:
        del os.environ["SCENARIO_PLAN"]
    assert rec.proc.returncode != 0
    assert "MESHSCOPE_REPLICA_CHECK='every:0': use all, off or every:N" in rec.stderr


def replica_rows(run_dir: Path) -> list[dict]:
    import sqlite3

    rows = []
    for f in sorted(run_dir.glob("rank-*.msdb")):
        db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        try:
            rows += [{"step": s} for (s,) in db.execute("SELECT step FROM replicas")]
        finally:
            db.close()
    return rows


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
