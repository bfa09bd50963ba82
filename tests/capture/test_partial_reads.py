"""Partial DTensors read as numbers (scenarios/p1_partial_read.py, its sources
cited there): recorded with the user's line, said on stderr while the job
runs, a `partial-read` finding with the ranks that read; the printed fix is
run and the logged value is then the true one."""

from __future__ import annotations

import json

from conftest import check_findings as findings
from conftest import marker_line, record

SCENARIO = "p1_partial_read"


def test_a_partial_read_on_one_rank_is_a_finding_and_the_printed_fix_reads_the_value(
        tmp_path, monkeypatch):
    (tmp_path / "broken").mkdir()
    broken = record(tmp_path / "broken", SCENARIO, "observe")
    assert broken.proc.returncode == 0, broken.stderr[-3000:]
    out = json.loads((broken.out / "rank0.json").read_text())
    # the share, silently: 0.7 where the mean is 0.8
    assert all(abs(a - b) > 1e-3 for a, b in zip(out["logged"], out["truth"])), out
    line = marker_line(SCENARIO)
    # said once while the job ran, with the value rank 0 read
    assert broken.stderr.count("meshscope: rank 0: float()/item() of a DTensor [Partial(avg)]") \
        == 1, broken.stderr[-3000:]
    assert f"p1_partial_read.py:{line} gives this rank's unreduced share (" in broken.stderr

    reads = findings(broken.run_dir, "partial-read")
    assert len(reads) == 1, reads
    text = reads[0]
    assert f"p1_partial_read.py:{line}: float()/item() of a DTensor [Partial(avg)]" in text, text
    assert "3 time(s) on rank(s) 0 only (of 2)" in text, text
    code = text.rsplit(", e.g. ", 1)[1]
    assert code.startswith("value = t.full_tensor().item()"), code
    # the divergence the extra logging ops cause names both lines
    divergent = findings(broken.run_dir, "divergent")
    assert any(f"p1_partial_read.py:{line}" in d for d in divergent), divergent

    monkeypatch.setenv("SCENARIO_FIX", code)
    (tmp_path / "fixed").mkdir()
    fixed = record(tmp_path / "fixed", SCENARIO, "observe")
    assert fixed.proc.returncode == 0, fixed.stderr[-3000:]
    out = json.loads((fixed.out / "rank0.json").read_text())
    assert len(out["logged"]) == len(out["truth"]) == 3
    assert all(abs(a - b) < 1e-6 for a, b in zip(out["logged"], out["truth"])), out
    assert findings(fixed.run_dir, "partial-read") == []
    assert findings(fixed.run_dir, "divergent") == []
