"""meshscope's printed fixes, executed: for every script of the
public-report corpus (corpus/), the fix `check` prints for the first
incident is applied to a copy of the script where meshscope says it goes
(in place of, before or after the statement at a line), and the fixed
script is run on two ranks under `meshscope record` with no policy. It
must raise nothing, record no incident, and compute what the script's
single-process reference computes (corpus_common.reference_mode). Where a
fix reveals the next plain tensor, that one's fix is applied too, as a user
would, for at most ROUNDS fixes.

A fix meshscope cannot place says where it belongs instead; such scripts
say so in their EXPECT ("unplaced": a part of that reason), and the test
holds meshscope to the reason rather than running a guess."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest
import torch

import meshscope
from conftest import HANG_GUARD_S, PYTHON, cli, free_port
from test_birth_corpus import CORPUS, SCRIPTS, expected

# What a fix's code may use, as a user's script imports it.
IMPORTS = ("from torch import nn; import torch.distributed as dist; "
           "from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor; "
           "from torch.distributed.tensor.experimental import local_map; "
           "from torch.distributed.fsdp import fully_shard\n")


def _env(**extra: str) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "KERAS_BACKEND": "torch",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(CORPUS), os.environ.get("PYTHONPATH", "")) if p), **extra}


def reference(script: Path, out: Path) -> object:
    """The script's result in one process (corpus_common.reference_mode)."""
    proc = subprocess.run(
        [PYTHON, str(script)], capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=CORPUS,
        env=_env(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(free_port()), CORPUS_REFERENCE="1", CORPUS_RESULT=str(out)))
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    return torch.load(out)


def record(script: Path, run_dir: Path, result: Path, *policy: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [cli(), "record", "-o", str(run_dir), *policy, "-n", "2", "--", PYTHON, str(script)],
        capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=CORPUS,
        env=_env(CORPUS_RESULT=str(result)))


def statement_at(tree: ast.Module, line: int) -> ast.stmt:
    """The innermost statement spanning `line`."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= node.end_lineno:
            if found is None or node.lineno >= found.lineno and node.end_lineno <= found.end_lineno:
                found = node
    assert found is not None, f"no statement at line {line}"
    return found


def apply_fix(source: str, code: str, how: str, line: int) -> str:
    """`code` put where `how` and `line` say, at the statement's
    indentation, with the names a fix uses imported at the top."""
    lines = source.splitlines()
    node = statement_at(ast.parse(source), line)
    indent = " " * node.col_offset
    new = [indent + part for part in code.splitlines()]
    first, last = node.lineno - 1, node.end_lineno
    if how == "replace":
        lines[first:last] = new
    elif how == "before":
        lines[first:first] = new
    else:
        assert how == "after", how
        lines[last:last] = new
    tree = ast.parse(source)
    top = next((n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")), None)
    at = (top.lineno - 1) if top else 0
    lines[at:at] = [IMPORTS.rstrip("\n")]
    return "\n".join(lines) + "\n"


def close(actual: object, wanted: object, path: str = "result") -> None:
    if isinstance(wanted, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual).__name__}"
        assert actual.shape == wanted.shape, f"{path}: shape {actual.shape} != {wanted.shape}"
        torch.testing.assert_close(actual.to(wanted.dtype), wanted, rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"{path}: {m}")
    elif isinstance(wanted, dict):
        assert isinstance(actual, dict) and actual.keys() == wanted.keys(), path
        for key in wanted:
            close(actual[key], wanted[key], f"{path}[{key!r}]")
    elif isinstance(wanted, list):
        assert isinstance(actual, list) and len(actual) == len(wanted), path
        for i, (a, w) in enumerate(zip(actual, wanted)):
            close(a, w, f"{path}[{i}]")
    else:
        assert actual == wanted, path


def first_fix(script: Path, run_dir: Path) -> tuple[dict, str]:
    """The fix of rank 0's first incident of `script` recorded with the
    auto policy, and that incident's site."""
    proc = record(script, run_dir, run_dir.with_suffix(".pt"), "--policy", "auto")
    incidents = meshscope.load_run(run_dir)["rank_details"][0]["incidents"]
    assert incidents, proc.stderr[-3000:]
    top = incidents[0]["stack"][0]
    return incidents[0]["explanation"]["fix"], f"{top['file']}:{top['line']}"


# Fix rounds a script may take: a fix can reveal the next plain tensor (a
# tied embedding's weight made a DTensor meets the plain token ids), which
# the user then fixes the same way.
ROUNDS = 3


@pytest.mark.parametrize("script", SCRIPTS)
def test_printed_fix_runs_and_matches_the_reference(tmp_path, script):
    expect = expected(script)
    current = CORPUS / f"{script}.py"
    wanted = reference(current, tmp_path / "reference.pt")
    fix, site = first_fix(current, tmp_path / "run")
    if "unplaced" in expect:  # meshscope says where it belongs instead of guessing
        assert fix["place"]["how"] == "unplaced", fix
        assert expect["unplaced"] in fix["place"]["why"], fix
        return
    sites = [site]
    for round in range(ROUNDS):
        place = fix["place"]
        assert place["how"] in ("before", "after", "replace"), fix
        assert place["file"] == str(current), fix
        fixed = tmp_path / f"round{round}" / f"{script}.py"
        fixed.parent.mkdir()
        fixed.write_text(apply_fix(current.read_text(), fix["code"], place["how"], place["line"]))
        run = record(fixed, fixed.parent / "run", fixed.parent / "result.pt")
        details = meshscope.load_run(fixed.parent / "run")["rank_details"]
        if run.returncode == 0 and all(not rank["incidents"] for rank in details):
            close(torch.load(fixed.parent / "result.pt"), wanted)
            return
        # as a user would: record the fixed script and apply the next fix
        fix, site = first_fix(fixed, fixed.parent / "next")
        sites.append(site)
        current = fixed
    pytest.fail(f"still failing after {ROUNDS} fixes at {sites}: {run.stderr[-2000:]}")


def test_a_wrong_fix_fails_the_comparison(tmp_path):
    """The check can fail: a fix that runs but computes something else
    (the plain tensor replaced by zeros before it meets the DTensor) is
    caught by the comparison with the reference."""
    original = CORPUS / "c02_loss_weight.py"
    wanted = reference(original, tmp_path / "reference.pt")
    source = original.read_text()
    line = next(i + 1 for i, text in enumerate(source.splitlines()) if "# INCIDENT" in text)
    wrong = "weight = distribute_tensor(torch.zeros_like(weight), hidden.device_mesh, [Replicate()])"
    fixed = tmp_path / "c02_loss_weight.py"
    fixed.write_text(apply_fix(source, wrong, "before", line))
    run = record(fixed, tmp_path / "fixed", tmp_path / "fixed.pt")
    assert run.returncode == 0, run.stderr[-3000:]
    with pytest.raises(AssertionError):
        close(torch.load(tmp_path / "fixed.pt"), wanted)
