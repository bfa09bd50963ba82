"""The public-report corpus (corpus/): each script reduces a public report
of "got mixed torch.Tensor and DTensor" to two ranks on CPU (the source URL
is in its docstring). Recorded with `meshscope record -n 2 --policy auto` as
a user would; the first incident of rank 0 must name the op, the origin
class, the line where the plain tensor was born (`# BIRTH`) and the user's
name for it, and the fix snippet must use that name."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import meshscope
from conftest import HANG_GUARD_S, PYTHON, cli

CORPUS = Path(__file__).parent / "corpus"

# script -> (ops, origin letter, the user's name for the plain tensor; ""
# where the operand is a temporary no name holds, as in `grad / (norm + eps)`)
CASES = {
    "c01_optimizer_momentum_buffer": ({"aten::add_.Tensor"}, "E", "buf"),
    "c02_loss_weight": ({"aten::mm", "aten::matmul"}, "H", "weight"),
    "c03_copy_loaded_weight": ({"aten::copy_"}, "F", "loaded_weight"),
    "c04_causal_mask": ({"aten::add.Tensor"}, "B", "mask"),
    "c05_advantages_in_loop": ({"aten::mul.Tensor"}, "H", "advantages"),
    "c06_buffer_outside_plan": ({"aten::mul.Tensor"}, "A", "self.scale"),
    "c07_rope_cache_attribute": ({"aten::mul.Tensor"}, "H", "self.freqs_cis"),
    "c08_local_norm": ({"aten::div.Tensor"}, "C", ""),
    "c09_labels_in_loop": ({"aten::nll_loss"}, "H", "labels"),
    "c10_flex_document_mask": ({"aten::masked_fill"}, "B", "blocked"),
    "c11_sequence_parallel_residual": ({"aten::add.Tensor"}, "D", "x"),
}

# script -> the framework plan's fix the evidence must carry
PLAN_HINTS = {
    "c06_buffer_outside_plan": "(no parallelize_module plan distributes buffers: model.scale = "
                               "distribute_tensor(model.scale, mesh, [Replicate()]))",
}


def marked_line(script: str, marker: str) -> int:
    lines = (CORPUS / f"{script}.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if f"# {marker}" in line)


@pytest.mark.parametrize("script", CASES)
def test_incident_names_birth_site_and_variable(tmp_path, script):
    ops, origin, name = CASES[script]
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [cli(), "record", "-o", str(run_dir), "--policy", "auto", "-n", "2", "--",
         PYTHON, str(CORPUS / f"{script}.py")],
        capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=CORPUS,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(CORPUS), os.environ.get("PYTHONPATH", "")) if p)})
    assert run_dir.exists(), proc.stderr[-3000:]
    run = meshscope.load_run(run_dir)
    incidents = run["rank_details"][0]["incidents"]
    assert incidents, proc.stderr[-3000:]
    inc = incidents[0]
    assert any(inc["op"].startswith(op) for op in ops), inc["op"]
    assert inc["origin"] == origin, inc["evidence"]
    explained = inc["explanation"]
    birth = f"{CORPUS / script}.py:{marked_line(script, 'BIRTH')}"
    assert explained["created_at"] == birth, (explained, inc["evidence"])
    assert inc["plain_tensor"]["label"] == name
    if name:
        assert f" {name} " in explained["plain_operand"] + " "
    if script in PLAN_HINTS:
        assert PLAN_HINTS[script] in inc["evidence"], inc["evidence"]
    if name and explained["fix"]["code"] and origin != "E":
        assert explained["fix"]["code"].startswith(name) or f"({name}" in explained["fix"]["code"]
