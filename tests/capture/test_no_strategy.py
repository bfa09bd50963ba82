"""Ops DTensor has no sharding strategy for (scenarios/n1_no_strategy.py,
its sources cited there): the finding carries the op's arguments and a fix
that fits them (local_map only where each shard's result is the right one,
else a redistribute that gathers the dim the op works along), also under
another dispatch mode. The fix is run as printed and the result must equal
the single-process reference."""

from __future__ import annotations

import math

import pytest

from conftest import SCENARIOS, check_findings, record, reference

SCENARIO = "n1_no_strategy"


GATHERED = ("out = local_map({fn}, out_placements=[Replicate()], in_placements=([Replicate()],), "
            "redistribute_inputs=True)(h{args})")


@pytest.mark.parametrize("op,args,expected", [
    ("glu", "with dim=-1", GATHERED.format(fn="F.glu", args=", dim=-1")),
    ("glu_rows", "with dim=-1",
     "out = local_map(F.glu, out_placements=[Shard(0)], in_placements=([Shard(0)],))"
     "(h, dim=-1)"),
    ("median", "", GATHERED.format(fn="torch.median", args="")),
    ("logcumsumexp", "with dim=0", GATHERED.format(fn="torch.logcumsumexp", args=", dim=0")),
])
@pytest.mark.parametrize("mode", ["", "1"])
def test_the_no_strategy_fix_fits_the_op_and_computes_the_reference(
        tmp_path, monkeypatch, op, args, expected, mode):
    monkeypatch.setenv("SCENARIO_OP", op)
    monkeypatch.setenv("SCENARIO_MODE", mode)
    expected_values = reference(tmp_path, SCENARIO)
    (tmp_path / "broken").mkdir()
    broken = record(tmp_path / "broken", SCENARIO, "observe")
    assert broken.proc.returncode == 0, broken.stderr[-3000:]
    assert broken.losses(0) == []  # it raised
    found = check_findings(broken.run_dir, "no-strategy")
    assert len(found) == 1, (found, check_findings(broken.run_dir, "dtensor-error"))
    text = found[0]
    family = "glu" if op.startswith("glu") else op
    lines = (SCENARIOS / f"{SCENARIO}.py").read_text().splitlines()
    line = next(i + 1 for i, t in enumerate(lines) if f"# INCIDENT {family}:" in t)
    assert f"{SCENARIO}.py:{line}:" in text, text
    assert args in text and ", e.g. " in text, text
    code = text.rsplit(", e.g. ", 1)[1]
    assert code.startswith(expected), code
    # the incident keeps DTensor's own message
    incident = broken.ranks()[0]["incidents"][0]
    assert "does not have a sharding strategy registered" in incident["error"], incident

    monkeypatch.setenv("SCENARIO_FIX", code)
    (tmp_path / "fixed").mkdir()
    fixed = record(tmp_path / "fixed", SCENARIO, "observe")
    assert fixed.proc.returncode == 0, fixed.stderr[-3000:]
    assert check_findings(fixed.run_dir, "no-strategy") == []
    for rank in range(2):
        values = fixed.losses(rank)
        assert len(values) == len(expected_values) > 0
        for a, b in zip(values, expected_values):
            assert math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5), (op, values, expected_values)
