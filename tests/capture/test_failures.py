"""Failures other than mixed tensors, as a user meets them under
`meshscope record`: the op with no sharding strategy, a DTensor error, a
collective that fails because a peer left. Each is recorded as an incident
of its kind before the exception propagates, the exception carries
meshscope's note with the fix, and `check` reports it under its finding kind
(and --fail-on takes that kind)."""

from __future__ import annotations

import json
import subprocess

from conftest import HANG_GUARD_S, SCENARIOS, cli, record


def line_of(scenario: str, mark: str = "# FAILURE") -> str:
    lines = (SCENARIOS / f"{scenario}.py").read_text().splitlines()
    return f"{SCENARIOS / scenario}.py:{next(i + 1 for i, l in enumerate(lines) if mark in l)}"


def check(run_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli(), "check", str(run_dir), *args], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)


def report(run_dir) -> dict:
    return json.loads(subprocess.run(
        [cli(), "report", str(run_dir), "--format", "json", "-o", "-"], capture_output=True,
        text=True, timeout=HANG_GUARD_S, check=True).stdout)


def test_no_sharding_strategy(tmp_path):
    r = record(tmp_path, "f1_no_strategy", "observe")
    assert r.proc.returncode != 0
#the exception's note: what, where, the fix, the incident
    assert "does not have a sharding strategy registered" in r.stderr
    assert "meshscope: An op DTensor has no sharding strategy for" in r.stderr
    assert "local_map(F.scaled_dot_product_attention, out_placements=[Shard(1)]" in r.stderr
    assert "register_sharding(aten._scaled_dot_product_flash_attention_for_cpu.default)" in r.stderr
    c = check(r.run_dir)
    assert c.returncode == 1, c.stdout + c.stderr
    assert (f"no-strategy: {line_of('f1_no_strategy')}: "
            "aten._scaled_dot_product_flash_attention_for_cpu.default (in "
            "aten::scaled_dot_product_attention) with dropout_p=0, is_causal=True, "
            "enable_gqa=False has no sharding strategy for operands "
            "[Shard(1)], [Shard(1)], [Shard(1)]; raised 2 time(s) on rank(s) 0,1; fix: "
            ) in c.stdout, c.stdout
    # attention works along the sequence and head dims; the heads' shards are its parts
    assert ("e.g. out = local_map(F.scaled_dot_product_attention, out_placements=[Shard(1)], "
            "in_placements=([Shard(1)], [Shard(1)], [Shard(1)]))(...)") in c.stdout, c.stdout
    assert check(r.run_dir, "--fail-on", "no-strategy").returncode == 1
    assert check(r.run_dir, "--fail-on", "hang").returncode == 0
    groups = report(r.run_dir)["groups"]
    assert [g["kind"] for g in groups] == ["no-sharding-strategy"], groups


def test_invalid_shard_dim(tmp_path):
    r = record(tmp_path, "f2_invalid_shard_dim", "observe")
    assert r.proc.returncode != 0
    assert "IndexError" in r.stderr
    assert "Shard(dim=2) names a dim a 2-d tensor does not have" in r.stderr
    c = check(r.run_dir, "--fail-on", "dtensor-error")
    assert c.returncode == 1
    assert (f"dtensor-error: {line_of('f2_invalid_shard_dim')}: DTensor.redistribute raised in "
            "DTensor's dispatch: Shard(dim=2) names a dim a 2-d tensor does not have"
            ) in c.stdout, c.stdout
    assert "use a dim in range(tensor.ndim)" in json.dumps(report(r.run_dir)["groups"])


def test_full_tensor_on_one_rank(tmp_path):
    """Rank 0's all-gather fails once rank 1 has left: the finding names
    the collective rank 0 was in and where rank 1 was (it had ended, and
    its last collective), and the divergence names the collective rank 1
    never issued."""
    r = record(tmp_path, "f3_full_tensor_rank0", "observe")
    assert r.proc.returncode != 0
    assert "Connection closed by peer" in r.stderr or "Connection reset" in r.stderr, r.stderr
    assert "meshscope: A collective failed: all_gather_tensor on mesh dim dp" in r.stderr
    c = check(r.run_dir)
    assert c.returncode == 1
    found = [l for l in c.stdout.splitlines() if l.startswith("collective-error:")]
    assert len(found) == 1, c.stdout
    assert found[0].startswith(f"collective-error: {line_of('f3_full_tensor_rank0')}: rank(s) 0 "
                               "failed in all_gather_tensor on mesh dim dp, 16 B, its "
                               "collective #1"), found
    assert "rank 1 ended (exited with 0) after 1 collective(s)" in found[0], found
    assert ("divergent: rank 1: collective #1 (step 0) is nothing more where rank(s) 0 have "
            "all_gather_tensor on mesh dim dp") in c.stdout, c.stdout
    stops = {s["rank"]: s for s in report(r.run_dir)["stops"]}
    assert stops[0]["stopped_in"] == "collective-error", stops
    assert stops[1]["stopped_in"] is None and stops[1]["collectives"] == 1, stops
