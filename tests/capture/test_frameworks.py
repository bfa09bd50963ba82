"""The framework matrix: public frameworks' own distributed training, run as
their docs give it on 2 ranks (gloo, CPU), recorded by `meshscope record`.
A healthy run must be left alone and reported clean: the same losses as the
run without meshscope, no finding, and no incident except the promotions a
framework makes itself (Keras' promotion mode), each checked to agree across
ranks. Versions: requirements.txt (torch, keras-nightly) and
requirements-frameworks.txt (transformers); the README's table lists them."""

from __future__ import annotations

import json
import math
import os
import subprocess

import pytest

import meshscope

from conftest import HANG_GUARD_S, PYTHON, SCENARIOS, cli, record, reference, run_without_agent

# (name, scenario, environment, module the framework needs)
FRAMEWORKS = [
    ("transformers-tp", "fw_hf_tp", {"SCENARIO_CASE": "healthy"}, "transformers"),
    ("keras-model-parallel", "fw_keras", {"KERAS_BACKEND": "torch"}, "keras"),
    ("fsdp2", "fw_fsdp2", {}, None),
    ("fsdp-tp", "d1_sp_norm_drift", {"SCENARIO_PLAN": "full"}, None),
]


def marked(scenario: str, marker: str) -> int:
    lines = (SCENARIOS / f"{scenario}.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if f"# {marker}" in line)


def all_findings(run_dir) -> list[str]:
    proc = subprocess.run([cli(), "check", str(run_dir)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("name,scenario,env,module", FRAMEWORKS, ids=[f[0] for f in FRAMEWORKS])
def test_a_healthy_run_is_left_alone_and_reported_clean(tmp_path, monkeypatch, name, scenario,
                                                        env, module):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if module:
        pytest.importorskip(module)
    rec = record(tmp_path, scenario, "observe")
    assert rec.proc.returncode == 0, rec.stderr[-4000:]
    plain = run_without_agent(tmp_path, scenario)
    for rank in range(2):
        recorded, alone = rec.losses(rank), plain[rank]["losses"]
        assert len(recorded) == len(alone) > 0
        for a, b in zip(recorded, alone):
            assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7), (name, recorded, alone)
    assert all_findings(rec.run_dir) == [], name
    for rank in rec.ranks():
        for incident in rank["incidents"]:  # only what the framework itself promoted
            assert name == "keras-model-parallel", incident
            assert incident["outcome"] == "reconciled", incident
            assert "KerasDTensorPromotionMode" in incident["policy_rule"], incident


def test_transformers_tp_clipping_over_plain_norm_weights_is_an_incident(tmp_path, monkeypatch):
    """scenarios/fw_hf_tp.py, SCENARIO_CASE=clip: transformers' tp_plan
    leaves the RMSNorm weights plain tensors, so clip_grad_norm_ over all
    the parameters mixes them with DTensor gradients. The incident names the
    line and the parameter, by a module path that is Python."""
    pytest.importorskip("transformers")
    monkeypatch.setenv("SCENARIO_CASE", "clip")
    rec = record(tmp_path, "fw_hf_tp", "observe")
    assert rec.proc.returncode != 0
    assert "got mixed torch.Tensor and DTensor" in rec.stderr
    incident = rec.ranks()[0]["incidents"][0]
    assert incident["op"].startswith("aten::_foreach_norm"), incident["op"]
    assert incident["origin"] == "A", incident["evidence"]
    assert "parameter model.layers.0.input_layernorm.weight of LlamaForCausalLM" in \
        incident["evidence"], incident["evidence"]
    assert "model.model.layers[0].input_layernorm.weight" in incident["evidence"]
    assert incident["stack"][0]["line"] == marked("fw_hf_tp", "INCIDENT clip"), incident["stack"]
    assert "got mixed torch.Tensor and DTensor" in incident["error"]


def test_transformers_tp_hidden_states_are_born_at_the_users_call(tmp_path, monkeypatch):
    """scenarios/fw_hf_tp.py, SCENARIO_CASE=logits: the last hidden state
    transformers' tensor-parallel hooks hand back is a plain tensor; the
    user's own head over it meets the DTensor lm_head weight. The plain
    tensor is born at the user's model(...) call, not inside transformers."""
    pytest.importorskip("transformers")
    monkeypatch.setenv("SCENARIO_CASE", "logits")
    rec = record(tmp_path, "fw_hf_tp", "observe")
    assert rec.proc.returncode != 0
    incident = rec.ranks()[0]["incidents"][0]
    assert incident["op"].startswith(("aten::mm", "aten::matmul")), incident["op"]
    assert incident["stack"][0]["line"] == marked("fw_hf_tp", "INCIDENT logits")
    born = incident["explanation"]["created_at"]
    assert born == f"{SCENARIOS / 'fw_hf_tp.py'}:{marked('fw_hf_tp', 'BIRTH logits')}", \
        incident["evidence"]
    assert incident["plain_tensor"]["label"] == "hidden", incident["plain_tensor"]


def test_transformers_tp_clipping_fix_runs_and_matches_one_process(tmp_path, monkeypatch):
    """The fix printed for the clip above, executed: transformers keeps the
    norm weights plain by design, so no tp_plan key is the fix; meshscope
    puts one norm per mesh (as transformers' Trainer._mixed_mesh_grad_norm
    does) in place of the clip_grad_norm_ statement. The fixed script trains
    on 2 ranks with no incident and the losses of the single-process run
    that clips the whole model with clip_grad_norm_."""
    from test_corpus_fixes import apply_fix

    pytest.importorskip("transformers")
    monkeypatch.setenv("SCENARIO_CASE", "clip")
    rec = record(tmp_path, "fw_hf_tp", "auto")
    fix = rec.ranks()[0]["incidents"][0]["explanation"]["fix"]
    assert fix["place"] == {"how": "replace", "file": str(SCENARIOS / "fw_hf_tp.py"),
                            "line": marked("fw_hf_tp", "INCIDENT clip")}, fix
    assert "tp_plan" in fix["summary"] and "get_total_norm" in fix["code"], fix
    fixed = tmp_path / "fixed" / "fw_hf_tp.py"
    fixed.parent.mkdir()
    source = (SCENARIOS / "fw_hf_tp.py").read_text()
    fixed.write_text(apply_fix(source, fix["code"], "replace", fix["place"]["line"]))
    out = tmp_path / "fixed-out"
    out.mkdir()
    proc = subprocess.run(
        [cli(), "record", "-o", str(tmp_path / "fixed-run"), "-n", "2", "--", PYTHON, str(fixed)],
        env={**os.environ, "SCENARIO_OUT": str(out)}, capture_output=True, text=True,
        timeout=HANG_GUARD_S, cwd=SCENARIOS)
    assert proc.returncode == 0, (fix["code"], proc.stderr[-4000:])
    details = meshscope.load_run(tmp_path / "fixed-run")["rank_details"]
    assert all(not rank["incidents"] for rank in details), details[0]["incidents"][:1]
    losses = json.loads((out / "rank0.json").read_text())["losses"]
    wanted = reference(tmp_path, "fw_hf_tp")
    assert len(losses) == len(wanted) > 0
    for a, b in zip(losses, wanted):
        assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5), (losses, wanted)
