"""The seed scenarios under every policy, 2 ranks with gloo on CPU, recorded
with `meshscope record -n 2` exactly as a user would."""

from __future__ import annotations

import math
import re
import subprocess

import pytest

from conftest import HANG_GUARD_S, cli, marker_line, record, reference, run_without_agent

# scenario -> what observe must find in the first incident of every rank
EXPECTED = {
    "s1_input_batch": dict(ops={"aten::sub.Tensor"}, origin="D",
                           evidence="passed as input", line=True, steps=4),
    "s2_optimizer": dict(ops={"aten::_foreach_add_.List"}, origin="E",
                         evidence="state 'm'", line=True, steps=4),
    "s3_dataloader": dict(ops={"aten::index.Tensor"}, origin="D",
                          evidence="DataLoader batch #0", line=True, steps=4),
    # compiled: the incident is found while Dynamo traces the step; the frame
    # is the traced line in the shared ShardedMLP.forward (scenarios/common.py)
    "s4_compile": dict(ops={"aten::mm", "aten::matmul"}, origin="D",
                       evidence="passed as input", line=True, steps=3, file="common"),
}


def first_incidents(rec):
    firsts = []
    for rank in rec.ranks():
        assert rank["incidents"], f"rank {rank['rank']} recorded no incident"
        firsts.append(rank["incidents"][0])
    return firsts


@pytest.mark.parametrize("scenario", EXPECTED)
def test_observe_records_and_pytorch_still_raises(tmp_path, scenario):
    want = EXPECTED[scenario]
    rec = record(tmp_path, scenario, "observe")
    assert rec.proc.returncode != 0
    assert "got mixed torch.Tensor and DTensor" in rec.stderr  # PyTorch's own error
    assert "meshscope: operand" in rec.stderr  # ... with meshscope's note
    assert str(rec.run_dir) in rec.stderr
    assert len(rec.ranks()) == 2
    for incident in first_incidents(rec):
        assert incident["op"] in want["ops"]
        assert incident["origin"] == want["origin"], incident["evidence"]
        assert want["evidence"] in incident["evidence"]
        assert incident["action"] == "observed" and incident["outcome"] == "raised"
        assert incident["plain_tensor"]["is_dtensor"] is False
        assert any(o["placements"] for o in incident["operands"])  # the DTensor side
        frame = incident["stack"][0]
        source = want.get("file", scenario)
        assert frame["file"].endswith(f"{source}.py")
        if want["line"]:
            assert frame["line"] == marker_line(source)


@pytest.mark.parametrize("scenario", EXPECTED)
def test_auto_trains_and_matches_single_process_reference(tmp_path, scenario):
    rec = record(tmp_path, scenario, "auto")
    assert rec.proc.returncode == 0, rec.stderr[-4000:]
    expected = reference(tmp_path, scenario)
    for rank in range(2):
        got = rec.losses(rank)
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6), (got, expected)
    for rank in rec.ranks():
        incidents = rank["incidents"]
        assert incidents
        assert all(i["outcome"] == "reconciled" for i in incidents)
        assert all(i["fingerprint"] for i in incidents)
        assert len(rank["optimizer_steps"]) == EXPECTED[scenario]["steps"]


@pytest.mark.parametrize("scenario", EXPECTED)
def test_strict_fails_with_enriched_message(tmp_path, scenario):
    rec = record(tmp_path, scenario, "strict")
    assert rec.proc.returncode != 0
    # (under torch.compile Dynamo reports it as `got MixedTensorError("...")`)
    assert "MixedTensorError" in rec.stderr
    if scenario != "s4_compile":  # the traceback names it as users import it
        assert re.search(r"^(\[rank\d\]: )?meshscope\.MixedTensorError: ", rec.stderr,
                         re.MULTILINE), rec.stderr[-2000:]
        assert "_attach.MixedTensorError" not in rec.stderr
    assert "meshscope strict: mixed torch.Tensor and DTensor" in rec.stderr
    assert f"origin {EXPECTED[scenario]['origin']}" in rec.stderr
    assert "fix:" in rec.stderr and "op called at" in rec.stderr
    for incident in first_incidents(rec):
        assert incident["action"] == "strict_error"
        assert "fix:" in incident["error"]


def test_replicate_promotion_of_per_rank_data_is_fingerprinted_apart(tmp_path):
    """`replicate` (what implicit_replication() does) runs, but each rank's
    batch differs: the fingerprints disagree, which offline analysis flags."""
    rec = record(tmp_path, "s1_input_batch", "replicate")
    assert rec.proc.returncode == 0, rec.stderr[-4000:]
    prints = [[i["fingerprint"] for i in r["incidents"]] for r in rec.ranks()]
    assert prints[0] and len(prints[0]) == len(prints[1])
    assert prints[0] != prints[1]
    assert all(i["action"] == "replicated" for r in rec.ranks() for i in r["incidents"])


def test_level_all_healthy_run_is_not_divergent(tmp_path):
    """At level all every aten op is recorded, and distribute_tensor runs
    different ones per rank (rank 0 scatters, the others allocate): check
    compares only what must match (DTensor-level ops, collectives,
    incidents) and finds nothing in a healthy run."""
    rec = record(tmp_path, "s0_clean", "observe", "--level", "all")
    assert rec.proc.returncode == 0, rec.stderr[-4000:]
    check = subprocess.run([cli(), "check", str(rec.run_dir)], capture_output=True, text=True,
                           timeout=HANG_GUARD_S)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "meshscope check: 0 finding(s)" in check.stdout + check.stderr


def test_clean_loop_is_bit_identical_under_observe(tmp_path):
    plain = run_without_agent(tmp_path, "s0_clean")
    rec = record(tmp_path, "s0_clean", "observe")
    assert rec.proc.returncode == 0, rec.stderr[-4000:]
    for rank in range(2):
        recorded = (rec.out / f"rank{rank}.json").read_text()
        import json

        assert json.loads(recorded)["hex"] == plain[rank]["hex"]
    for rank in rec.ranks():
        assert rank["incidents"] == []
        assert rank["summary"]["ops"] if "summary" in rank else True
        assert len(rank["optimizer_steps"]) == 5
        assert rank["collectives"], "DTensor redistributions were not recorded"
        assert rank["meshes"][0]["dim_names"] == ["dp"]
        assert rank["meshes"][0]["ranks"] == [0, 1]
