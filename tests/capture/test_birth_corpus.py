"""The public-report corpus (corpus/): each script reduces a public report
of "got mixed torch.Tensor and DTensor" to two ranks on CPU (the source URL
is in its docstring). Recorded with `meshscope record -n 2 --policy auto` as
a user would; the first incident of rank 0 must name the op, the origin
class, the line where the plain tensor was born (`# BIRTH`) and the user's
name for it, and the fix snippet must use that name."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

import meshscope
from conftest import HANG_GUARD_S, PYTHON, cli

CORPUS = Path(__file__).parent / "corpus"

SCRIPTS = sorted(p.stem for p in CORPUS.glob("c[0-9][0-9]_*.py"))


def expected(script: str) -> dict:
    """The script's EXPECT: ops (the incident's op is one of them), origin
    (letter), name (the user's name for the plain tensor; "" where it is a
    temporary no name holds, as in `grad / (norm + eps)`), and optionally
    plan_hint (the framework plan's fix the evidence must carry), inside (the
    module forward the evidence names) and fix
    (what the fix snippet must hold when it is no assignment to the name)."""
    tree = ast.parse((CORPUS / f"{script}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "EXPECT" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{script}.py has no EXPECT")


def marked_line(script: str, marker: str) -> int:
    lines = (CORPUS / f"{script}.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if f"# {marker}" in line)


@pytest.mark.parametrize("script", SCRIPTS)
def test_incident_names_birth_site_and_variable(tmp_path, script):
    expect = expected(script)
    ops, origin, name = expect["ops"], expect["origin"], expect["name"]
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
    if "inside" in expect:  # the innermost module whose forward made it
        assert f"inside {expect['inside']} at" in inc["evidence"], inc["evidence"]
    if "plan_hint" in expect:
        assert expect["plan_hint"] in inc["evidence"], inc["evidence"]
    if "fix" in expect:  # a fix in the framework's own API rather than the name's
        assert expect["fix"] in explained["fix"]["code"], explained["fix"]
    elif name and explained["fix"]["code"] and explained["fix"]["place"]["how"] == "before":
        # a fix at the op uses the name there (elsewhere: the names where it goes)
        code, ref = explained["fix"]["code"], re.sub(r"\.(\d+)", r"[\1]", name)  # layers.3 -> [3]
        assert code.startswith(ref) or f"({ref}" in code, code
