"""Keras (keras-nightly, torch backend) ModelParallel over 2 ranks: record what
Keras does. Its KerasDTensorPromotionMode replicates plain tensors that meet
DTensors; meshscope's mode sits above it and records each such promotion."""

from __future__ import annotations

import math
import os

import pytest

from conftest import marker_line, record, reference

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
