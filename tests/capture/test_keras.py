"""Keras (keras-nightly, torch backend) ModelParallel over 2 ranks: record what
Keras does. Its KerasDTensorPromotionMode replicates plain tensors that meet
DTensors; meshscope's mode sits above it and records each such promotion."""

from __future__ import annotations

import json
import math
import os

import pytest

from conftest import check_findings, marker_line, record, reference

os.environ.setdefault("KERAS_BACKEND", "torch")
pytest.importorskip("keras")


@pytest.mark.parametrize("policy", ["observe", "auto"])
def test_keras_model_parallel_trains_and_is_recorded(tmp_path, policy):
    rec = record(tmp_path, "s5_keras", policy)
    assert rec.proc.returncode == 0, rec.stderr[-4000:]
    expected = reference(tmp_path, "s5_keras")
    for rank in range(2):
        for a, b in zip(rec.losses(rank), expected, strict=True):
            assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)
    for rank in rec.ranks():
        assert len(rank["optimizer_steps"]) == 4  # Keras optimizer applies, via the adapter
        assert rank["collectives"]
        created = [i for i in rank["incidents"] if i["origin"] == "B"]
        assert created, rank["incidents"]
        assert all(i["action"] == "replicated" and i["outcome"] == "reconciled" for i in created)
        frame = created[0]["stack"][0]
        assert frame["file"].endswith("s5_keras.py") and frame["line"] == marker_line("s5_keras")
        assert "aten::linspace" in created[0]["evidence"]
        if policy == "observe":
            assert "KerasDTensorPromotionMode" in created[0]["policy_rule"]


def test_keras_strict_fails_with_enriched_message(tmp_path):
    rec = record(tmp_path, "s5_keras", "strict")
    assert rec.proc.returncode != 0
    assert "meshscope strict" in rec.stderr


def test_a_per_rank_mask_in_a_keras_layer_is_invalid_and_the_printed_fix_makes_it_agree(
        tmp_path, monkeypatch):
    """scenarios/k1_keras_random_mask.py: Keras' promotion mode replicates a
    mask each rank drew with its own seed. The finding names the layer's
    line; its fix, run as printed inside call(), gives every rank rank 0's
    mask, and the check then finds nothing."""
    scenario = "k1_keras_random_mask"
    (tmp_path / "broken").mkdir()
    broken = record(tmp_path / "broken", scenario, "observe")
    assert broken.proc.returncode == 0, broken.stderr[-4000:]
    masks = [json.loads((broken.out / f"rank{r}.json").read_text())["masks"] for r in range(2)]
    assert masks[0] != masks[1]  # each rank dropped other samples
    findings = check_findings(broken.run_dir, "invalid")
    line = marker_line(scenario)
    at_layer = [f for f in findings if f.split(": ", 1)[0].endswith(f"{scenario}.py:{line}")]
    assert len(at_layer) == 1, findings
    text = at_layer[0]
    assert "differs across ranks" in text and "fix: " in text, text
    code = text.rsplit(", e.g. ", 1)[1]
    assert code.startswith("dist.broadcast(mask, src=0)") and "from_local" not in code, code

    monkeypatch.setenv("SCENARIO_FIX", code)
    (tmp_path / "fixed").mkdir()
    fixed = record(tmp_path / "fixed", scenario, "observe")
    assert fixed.proc.returncode == 0, fixed.stderr[-4000:]
    assert check_findings(fixed.run_dir, "invalid") == []
    masks = [json.loads((fixed.out / f"rank{r}.json").read_text())["masks"] for r in range(2)]
    assert masks[0] == masks[1] and len(masks[0]) >= 4  # the same mask on every rank
