"""Rank-dependent data promoted as Replicate() (scenarios/r1_rank_random_mask.py,
its sources cited there): the promotion is found INVALID, and the fix
`check` prints makes the values identical on every rank. The fix is run as
printed and the ranks then train on the same values."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import check_findings, record

SCENARIO = "r1_rank_random_mask"


def invalid_findings(run_dir: Path) -> list[str]:
    return check_findings(run_dir, "invalid")


# On a CPU mesh both are broadcast (DTensor's RNG tracker serves accelerator
# meshes only; the mesh-RNG fix is a unit test, tests/core/replica_drift_test.cpp).
@pytest.mark.parametrize("mask,expected", [
    ("direct", "dist.broadcast(noise, src=0)"),
    ("derived", "dist.broadcast(mask, src=0)"),
])
def test_a_per_rank_random_tensor_replicated_is_invalid_and_the_printed_fix_makes_it_agree(
        tmp_path, monkeypatch, mask, expected):
    monkeypatch.setenv("SCENARIO_MASK", mask)
    (tmp_path / "broken").mkdir()
    broken = record(tmp_path / "broken", SCENARIO, "auto")
    assert broken.proc.returncode == 0, broken.stderr[-3000:]
    assert broken.losses(0) != broken.losses(1)  # each rank trained on its own values
    findings = invalid_findings(broken.run_dir)
    assert len(findings) == 1, findings
    text = findings[0]
    assert "differs across ranks" in text and "fix: " in text, text
    code = text.rsplit(", e.g. ", 1)[1]
    assert code.startswith(expected) and "from_local" not in code, code

    monkeypatch.setenv("SCENARIO_FIX", code)
    (tmp_path / "fixed").mkdir()
    fixed = record(tmp_path / "fixed", SCENARIO, "auto")
    assert fixed.proc.returncode == 0, fixed.stderr[-3000:]
    assert invalid_findings(fixed.run_dir) == []
    assert fixed.losses(0) == fixed.losses(1)  # the same values on every rank
