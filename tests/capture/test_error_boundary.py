"""The agent's error boundary (issue #42): the agent's own trouble never
changes the training it watches. A failure injected into each phase of its op
handling (MESHSCOPE_FAULT) must leave the program's results as they are
without that failure: before the op runs, the op runs as without meshscope
(a mixed op then raises DTensor's own error); after it ran, the op's own
result stands and the op never runs twice (an in-place add would count
double). Each injected failure is counted and reported once. Both hooks (the
dispatcher key and the TorchDispatchMode) are covered."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import HANG_GUARD_S, PYTHON, SCENARIOS, cli

PROGRAM = '''
import json, sys
sys.path.insert(0, {scenarios!r})
import torch
import torch.distributed as dist
from torch.distributed.tensor import Replicate, distribute_tensor
from common import setup

rank, world, mesh = setup()
w = distribute_tensor(torch.zeros(4), mesh, [Replicate()])
w.add_(1.0)                       # in place: twice would read 2
scale = torch.full((4,), 3.0)     # a plain tensor born here (provenance)
shifted = scale * 2               # a plain op on it
w.add_(1.0)
m = distribute_tensor(torch.zeros(4), mesh, [Replicate()])
try:
    m.sub_(shifted)               # mixed, in place: policy auto promotes; twice: -12
    mixed = m.full_tensor().tolist()
except RuntimeError as e:
    mixed = "raised: " + str(e).splitlines()[0]
facts = {{"w": w.full_tensor().tolist(), "shifted": shifted.tolist(), "mixed": mixed}}
try:
    import meshscope
    facts["agent_errors"] = meshscope.stats().get("agent_errors")
except Exception as e:
    facts["agent_errors"] = repr(e)
open(sys.argv[1] + f".{{rank}}", "w").write(json.dumps(facts))
dist.destroy_process_group()
'''

MIXED_ERROR = "raised: aten.sub_.Tensor got mixed torch.Tensor and DTensor"


def run(tmp_path, hook: str, fault: str) -> tuple[dict, str]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(scenarios=str(SCENARIOS)))
    env_cmd = ["env", f"MESHSCOPE_FAULT={fault}", f"MESHSCOPE_HOOK={hook}"]
    proc = subprocess.run([*env_cmd, cli(), "record", "-o", str(tmp_path / "run"), "-n", "1",
                           "--policy", "auto", "--", PYTHON, str(script), str(tmp_path / "facts")],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=SCENARIOS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((tmp_path / "facts.0").read_text()), proc.stderr


@pytest.mark.parametrize("hook", ["dispatcher", "mode"])
@pytest.mark.parametrize("fault", ["", "before", "provenance", "record", "reconcile"])
def test_a_failure_in_any_phase_leaves_the_training_as_it_is(tmp_path, hook, fault):
    facts, stderr = run(tmp_path, hook, fault)
    assert facts["w"] == [2.0] * 4, facts  # each in-place add ran once
    assert facts["shifted"] == [6.0] * 4, facts
    if fault == "before":  # the mixed op ran as without meshscope
        assert facts["mixed"].startswith(MIXED_ERROR), facts
    else:  # promoted by the policy, its result returned once
        assert facts["mixed"] == [-6.0] * 4, facts
    if fault:
        assert facts["agent_errors"] >= 1, facts
        reports = [line for line in stderr.splitlines() if f"injected fault ({fault})" in line]
        assert reports and all("(reported once; training continues)" in line
                               for line in reports), stderr
        assert len(reports) == len(set(reports)), stderr  # once per kind of trouble
    else:
        assert facts["agent_errors"] == 0, facts
        assert "injected fault" not in stderr
