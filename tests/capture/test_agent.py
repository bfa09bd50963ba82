"""The agent in one process (world size 1, gloo): attach/detach, origin
classes A-H, policies, levels, provenance, settings. Child processes
(signals, disk limits, forks, the pytest plugin) are in
test_agent_process.py, collectives in test_agent_collectives.py."""

from __future__ import annotations

import inspect
import re
import sys
import types
from pathlib import Path

import pytest
import torch
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

import meshscope
from conftest import incidents


def test_attach_is_idempotent_and_detach_restores_everything(mesh, run_dir):
    from torch.distributed import _functional_collectives as funcol
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    from torch.utils.data import dataloader

    from meshscope import _capture

    before = (DTensor.to_local, torch.nn.Module.load_state_dict, torch.nn.Module.__call__,
              dataloader._BaseDataLoaderIter.__next__, funcol.all_gather_tensor,
              list(_get_current_dispatch_mode_stack()), torch.compile, _capture.hook_enabled())
    assert before[-1] is False
    session = meshscope.attach(run_dir)
    assert meshscope.attach(run_dir) is session
    with pytest.raises(ValueError, match="already attached"):
        meshscope.attach(run_dir, policy="auto")
    assert DTensor.to_local is not before[0]
    assert torch.nn.Module.__call__ is not before[2]  # phases come from one wrapper
    assert _capture.hook_enabled()  # the dispatcher hook, not a Python mode
    assert list(_get_current_dispatch_mode_stack()) == before[5]
    meshscope.detach()
    meshscope.detach()  # twice is fine
    after = (DTensor.to_local, torch.nn.Module.load_state_dict, torch.nn.Module.__call__,
             dataloader._BaseDataLoaderIter.__next__, funcol.all_gather_tensor,
             list(_get_current_dispatch_mode_stack()), torch.compile, _capture.hook_enabled())
    assert after == before
    assert Path(session.rank_file).exists()


def test_bad_policy_file_is_a_clear_error_at_attach(tmp_path, run_dir):
    policy = tmp_path / "policy.toml"
    policy.write_text('default = "auto"\n[[rule]]\norigin = ["Q"]\naction = "replicate"\n')
    with pytest.raises(ValueError, match=r"policy.toml:3:\d+: .*origin"):
        meshscope.attach(run_dir, policy=policy)
    assert not meshscope.attached()
    with pytest.raises(ValueError, match="neither a policy name"):
        meshscope.attach(run_dir, policy="no-such-policy")


def test_policy_file_rules_pick_the_action(mesh, tmp_path, run_dir):
    policy = tmp_path / "policy.toml"
    policy.write_text('default = "observe"\n[[rule]]\nop = "aten::sub*"\naction = "replicate"\n')
    meshscope.attach(run_dir, policy=policy)
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    assert isinstance(w - torch.ones(4, 4), DTensor)  # rule: replicate
    with pytest.raises(RuntimeError, match="got mixed"):
        w * torch.ones(4, 4)  # no rule: default observe
    meshscope.detach()
    got = incidents(run_dir)
    assert [i["action"] for i in got] == ["replicated", "observed"]
    assert "policy.toml:2" in got[0]["policy_rule"]


def test_observe_incident_is_on_disk_before_the_exception_propagates(mesh, run_dir):
    meshscope.attach(run_dir)
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    with pytest.raises(RuntimeError) as raised:
        w - torch.ones(4, 4)
        # still attached: read the live file
    assert "recorded as incident #1" in "\n".join(raised.value.__notes__)
    live = incidents(run_dir)
    assert live and live[0]["op"] == "aten::sub.Tensor" and live[0]["outcome"] == "raised"


def _classify(mesh, run_dir, make_plain):
    meshscope.attach(run_dir, policy="auto")  # ATTACH
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    plain = make_plain(w)
    w + plain
    meshscope.detach()
    incident = incidents(run_dir)[-1]
    return incident["origin"], incident["evidence"]


def test_origin_a_parameter_left_out_of_the_plan(mesh, run_dir):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sharded = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))
            self.forgotten = torch.nn.Parameter(torch.ones(4, 4))

        def forward(self):
            return self.sharded * self.forgotten

    meshscope.attach(run_dir, policy="auto")
    Tied()()
    meshscope.detach()
    incident = incidents(run_dir)[0]
    assert incident["origin"] == "A"
    assert "parameter forgotten of Tied not in the sharding plan" in incident["evidence"]
    # the fix in torch's API; the root's own parameter has no plan entry
    assert incident["evidence"].endswith(
        "(model.forgotten = nn.Parameter(distribute_tensor(model.forgotten, mesh, "
        "[Replicate()])))")


def test_origin_b_created_inside_forward(mesh, run_dir):
    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))

        def forward(self):
            mask = torch.tril(torch.ones(4, 4))
            return self.w * mask

    meshscope.attach(run_dir, policy="auto")
    Masked()()
    meshscope.detach()
    incident = incidents(run_dir)[0]
    assert incident["origin"] == "B", incident["evidence"]
    assert "aten::ones" in incident["evidence"] and "Masked.forward" in incident["evidence"]


def test_origin_c_to_local(mesh, run_dir):
    origin, evidence = _classify(mesh, run_dir, lambda w: w.to_local() * 2)
    assert origin == "C" and "to_local()" in evidence and "test_agent.py" in evidence


def test_to_local_and_full_tensor_keep_their_signature_while_attached(mesh, run_dir):
    from meshscope import _capture

    w = distribute_tensor(torch.ones(4, 4, requires_grad=True), mesh, [Shard(0)])
    meshscope.attach(run_dir)
    line = inspect.currentframe().f_lineno + 1
    by_keyword = w.to_local(grad_placements=[Shard(0)])
    through_class = DTensor.to_local(w)
    full = w.full_tensor()
    with pytest.raises(TypeError):
        w.to_local(Shard(0))  # grad_placements is keyword-only, as without meshscope
    assert torch.equal(by_keyword, torch.ones(4, 4)) and by_keyword.requires_grad
    assert _capture.provenance(by_keyword)[:2] == (
        "C", f"output of to_local() of a DTensor [Shard(0)] at {__file__}:{line}")
    assert _capture.provenance(through_class)[0] == "C"
    assert _capture.provenance(full)[1].startswith("output of full_tensor() of a DTensor")
    meshscope.detach()


def test_to_local_of_an_async_collective_keeps_its_provenance_across_steps(mesh, run_dir):
    """After a redistribution, to_local() returns an AsyncCollectiveTensor: a
    tensor subclass, like a DTensor. The agent skips the table for a
    subclass operand unless one with an entry may sit at its address; the
    one tagged here is found among many DTensor operands, again after a
    step's end sweeps the table, and as the plain side of a mixed op. Its
    .wait() returns the plain tensor inside, which carries the same tag."""
    from torch.distributed import _functional_collectives as funcol

    from meshscope import _capture

    meshscope.attach(run_dir, policy="observe")
    # what a redistribution with async_op=True leaves as the local tensor
    # (on one rank DTensor skips the collective: it is issued here)
    reduced = DTensor.from_local(funcol.all_reduce(torch.ones(4, 4), "sum", (mesh, 0)), mesh,
                                 [Replicate()], run_check=False)
    line = inspect.currentframe().f_lineno + 1
    local = reduced.to_local()
    assert isinstance(local, funcol.AsyncCollectiveTensor)
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    for step in range(3):
        for _ in range(50):  # DTensor operands at other addresses than `local`'s
            w = w + 1
        assert _capture.provenance(local)[:2] == (
            "C", f"output of to_local() of a DTensor [Replicate()] at {__file__}:{line}"), step
        meshscope.mark_step()  # sweeps the table: live entries stay findable
    with pytest.raises(RuntimeError, match="mixed torch.Tensor and DTensor"):
        w + local
    waited = local.wait()  # the plain tensor inside, as funcol.wait_tensor(local) returns it
    assert type(waited) is torch.Tensor and _capture.provenance(waited)[0] == "C"
    with pytest.raises(RuntimeError, match="mixed torch.Tensor and DTensor"):
        w * waited
    meshscope.detach()
    found = incidents(run_dir)
    assert [i["origin"] for i in found] == ["C", "C"], found
    assert all("to_local()" in i["evidence"] for i in found), found


def test_origin_d_dataloader_batch(mesh, run_dir):
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.ones(8, 4)), batch_size=4)
    origin, evidence = _classify(mesh, run_dir, lambda w: next(iter(loader))[0])
    assert origin == "D" and "DataLoader batch #" in evidence


def test_origin_e_optimizer_state(mesh, run_dir):
    class PlainState(torch.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {})

        @torch.no_grad()
        def step(self):
            for p in self.param_groups[0]["params"]:
                state = self.state[p]
                state.setdefault("buf", torch.zeros(p.shape))
                p.add_(state["buf"])

    p = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))
    meshscope.attach(run_dir, policy="auto")
    PlainState([p]).step()
    meshscope.detach()
    incident = incidents(run_dir)[0]
    assert incident["origin"] == "E", incident["evidence"]
    assert "PlainState state 'buf'" in incident["evidence"]


def test_origin_f_load_state_dict(mesh, run_dir):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))

    m = Model()
    meshscope.attach(run_dir, policy="observe")
    with pytest.raises(RuntimeError):
        m.load_state_dict({"w": torch.zeros(4, 4)})
    meshscope.detach()
    incident = incidents(run_dir)[0]
    assert incident["origin"] == "F" and "load_state_dict" in incident["evidence"]


def test_origin_g_unknown_says_where_attach_was_called(mesh, run_dir):
    plain = torch.ones(4, 4)  # made before attach: nothing known about it
    origin, evidence = _classify(mesh, run_dir, lambda w: plain)
    attached = next(i + 1 for i, line in enumerate(Path(__file__).read_text().splitlines())
                    if line.endswith("# ATTACH"))
    assert origin == "G"
    assert evidence.startswith(
        f"no birth recorded: made before meshscope.attach() at {__file__}:{attached} (attach "
        "before the model and data are built, or run the script under `meshscope record`"), evidence


def test_origin_g_made_after_attach_is_not_called_older_than_it(mesh, run_dir):
    """A tensor made after attach() on another thread (whose ops the agent
    does not follow) has no birth either; it is not described as made
    before attach()."""
    import threading

    made = []

    def elsewhere(w):
        thread = threading.Thread(target=lambda: made.append(torch.full((4, 4), 3.0)))
        thread.start()
        thread.join()
        return made[0]

    origin, evidence = _classify(mesh, run_dir, elsewhere)
    assert origin == "G"
    assert evidence.startswith(
        f"no birth recorded: made after meshscope.attach() at {__file__}:"), evidence
    assert "another thread than the one that attached" in evidence
    assert "before meshscope" not in evidence


def test_births_without_a_factory_op_of_their_own(mesh, run_dir, tmp_path):
    """torch.from_numpy and torch.tensor lift their tensor (aten::lift_fresh);
    torch.frombuffer dispatches nothing; torch.load reads weights (F)."""
    import numpy as np

    torch.save({"w": torch.ones(4, 4)}, tmp_path / "ckpt.pt")
    meshscope.attach(run_dir, policy="auto")
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    line = sys._getframe().f_lineno
    from_numpy = torch.from_numpy(np.ones((4, 4), dtype=np.float32))
    w + from_numpy
    buffer = torch.frombuffer(bytearray(64), dtype=torch.float32).view(4, 4)
    w + buffer
    state = torch.load(tmp_path / "ckpt.pt")
    w + state["w"]
    meshscope.detach()
    numpy_made, buffer_made, loaded = incidents(run_dir)[-3:]
    assert numpy_made["evidence"] == (
        "created by torch.tensor/as_tensor/from_numpy (aten::lift_fresh) in user code outside "
        f"forward at {__file__}:{line + 1}")
    assert numpy_made["plain_tensor"]["label"] == "from_numpy"
    assert buffer_made["origin"] == "H" and buffer_made["evidence"].startswith(
        f"derived from a tensor created by torch.frombuffer in user code outside forward at "
        f"{__file__}:{line + 3}")
    assert loaded["origin"] == "F"
    assert loaded["evidence"] == (
        f"loaded by torch.load({str(tmp_path / 'ckpt.pt')!r}) ['w'] at {__file__}:{line + 5}")
    assert loaded["plain_tensor"]["label"] == "state['w']"
    # distributed as the DTensor it meets, right before that statement
    fix = loaded["explanation"]["fix"]
    assert fix["code"] == "state['w'] = distribute_tensor(state['w'], mesh, [Shard(0)])"
    assert fix["place"] == {"how": "before", "file": __file__, "line": line + 6}


def test_origin_h_made_by_the_script_names_its_birth_and_its_variable(mesh, run_dir):
    meshscope.attach(run_dir, policy="auto")
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    birth = sys._getframe().f_lineno + 1
    offsets = torch.arange(32.0).reshape(8, 4)
    offsets = offsets.double()[:4]  # a chain: the first birth and the last step are named
    w + offsets

    class Holder:
        def __init__(self):
            self.bias = torch.zeros(4, 4)

        def apply(self, x):
            return x + self.bias

    Holder().apply(w)
    meshscope.detach()
    local, attribute = incidents(run_dir)[-2:]
    assert local["origin"] == "H"
    assert local["evidence"] == (
        f"derived from a tensor created by aten::arange in user code outside forward at "
        f"{__file__}:{birth}; last step aten::slice.Tensor at {__file__}:{birth + 1}")
    assert local["plain_tensor"]["label"] == "offsets"
    assert local["explanation"]["created_at"] == f"{__file__}:{birth}"
    assert local["explanation"]["fix"]["code"] == (
        "offsets = distribute_tensor(offsets, mesh, [Replicate()])")
    assert attribute["plain_tensor"]["label"] == "self.bias"


def test_implicit_replication_is_recorded_as_torch_replication(mesh, run_dir):
    from torch.distributed.tensor.experimental import implicit_replication

    meshscope.attach(run_dir, policy="observe")
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    with implicit_replication():
        w + torch.ones(4, 4)
    meshscope.detach()
    incident = incidents(run_dir)[0]
    assert incident["action"] == "replicated" and "implicit_replication" in incident["policy_rule"]
    assert incident["fingerprint"]


def test_level_all_records_aten_ops_including_backward(mesh, run_dir):
    meshscope.attach(run_dir, level="all")
    w = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))
    (w * 2).sum().backward()
    meshscope.detach()
    rank = meshscope.load_run(run_dir)["rank_details"][0]
    assert rank["op_phases"].get("backward", 0) > 0
    assert rank["op_names"].get("aten::mul.Tensor", 0) >= 1  # the DTensor-level op
    assert sum(rank["op_names"].values()) > 20  # and the aten ops under it


def test_level_dtensor_records_backward_dtensor_ops(mesh, run_dir):
    """The hook's key travels with autograd into backward: the DTensor ops of
    backward are recorded (phase backward), not only forward's."""
    meshscope.attach(run_dir)
    w = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))
    (w * 2).sum().backward()
    meshscope.detach()
    rank = meshscope.load_run(run_dir)["rank_details"][0]
    assert rank["op_phases"].get("backward", 0) > 0, rank["op_phases"]
    assert rank["op_names"].get("aten::mul.Tensor", 0) >= 1
    assert sum(rank["op_names"].values()) < 20  # DTensor-level only: no local aten ops


def test_only_births_and_provenance_take_the_slow_plain_path(mesh, run_dir):
    """A plain op without tensor inputs is a birth only when it creates a
    tensor: the profiler's record_function enter and exit (around every
    optimizer step, in FSDP2's hooks) have no tensor inputs either and took
    the GIL and the provenance bookkeeping after each call. Only creation
    ops and ops on a tagged tensor count in stats()["provenance_ops"]; the
    birth is still tagged."""
    meshscope.attach(run_dir)
    before = meshscope.stats()["provenance_ops"]
    for _ in range(20):
        with torch.profiler.record_function("meshscope-test"):
            pass
    quiet = meshscope.stats()["provenance_ops"] - before
    x = torch.zeros(4)  # a birth
    w = distribute_tensor(torch.ones(4), mesh, [Shard(0)])
    with pytest.raises(RuntimeError, match="mixed torch.Tensor and DTensor"):
        w + x
    births = meshscope.stats()["provenance_ops"] - before - quiet
    meshscope.detach()
    assert quiet == 0, quiet
    assert births >= 1, births
    found = incidents(run_dir)
    assert len(found) == 1 and "aten::zeros" in str(found[0]), found


@pytest.mark.parametrize("op, make", [
    ("aten::range", lambda: torch.range(0, 3)),
    ("aten::logspace", lambda: torch.logspace(0, 1, 4)),
    ("aten::empty_permuted", lambda: torch.empty_permuted((2, 3), (1, 0))),
    ("aten::hann_window", lambda: torch.hann_window(8)),
    ("aten::hamming_window", lambda: torch.hamming_window(8)),
    ("aten::blackman_window", lambda: torch.blackman_window(8)),
    ("aten::bartlett_window", lambda: torch.bartlett_window(8)),
    ("aten::kaiser_window", lambda: torch.kaiser_window(8))])
def test_creation_ops_without_tensor_inputs_are_births(run_dir, op, make):
    """Every creation op the hook sees without tensor inputs names the
    tensor's birth, the windows of an STFT front end and torch.range too:
    only the ops in the agent's list of creation ops are tagged, and these
    were missing (their tensors had no provenance at all)."""
    import warnings

    from meshscope import _capture

    meshscope.attach(run_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.range is deprecated
        made = make()
    found = _capture.provenance(made)
    meshscope.detach()
    assert found is not None, op
    origin, evidence, derived = found
    assert (origin, derived) == ("H", False), found
    assert evidence.startswith(f"created by {op}") and "test_agent.py:" in evidence, evidence


def test_new_placement_tuples_are_recorded_as_their_placements(mesh, run_dir):
    """DTensor makes a new placements tuple (and spec) for every from_local()
    and redistribution. The agent knows a tuple of Shard(d) and Replicate()
    it has seen the content of without formatting it again; every other
    placement (Partial, _StridedShard) is formatted. Each tensor is recorded
    with its own placements either way: a new shape per round makes each a
    new tensor description, so the rounds after the first record through
    the content path."""
    import sqlite3

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial
    from torch.distributed.tensor.placement_types import _StridedShard

    mesh2 = init_device_mesh("cpu", (1, 1))
    cases = [(mesh, lambda: (Shard(0),), "[Shard(0)]"),
             (mesh, lambda: (Shard(1),), "[Shard(1)]"),
             (mesh, lambda: (Replicate(),), "[Replicate()]"),
             (mesh2, lambda: (Shard(0), Replicate()), "[Shard(0), Replicate()]"),
             (mesh2, lambda: (Replicate(), Shard(0)), "[Replicate(), Shard(0)]"),
             (mesh2, lambda: (Shard(1), Shard(0)), "[Shard(1), Shard(0)]"),
             (mesh, lambda: (Partial(),), "[Partial(sum)]"),
             (mesh2, lambda: (_StridedShard(0, split_factor=1), Replicate()), None)]
    session = meshscope.attach(run_dir)
    expected = {}
    for round_ in range(3):
        for i, (m, placements, text) in enumerate(cases):
            shape = (2 + i, 3 + round_)
            a = DTensor.from_local(torch.ones(*shape), m, placements())
            a + a
            expected[str(list(shape))] = text
    meshscope.detach()
    with sqlite3.connect(f"file:{session.rank_file}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT g.text, p.text FROM tensors t "
                          "JOIN strings g ON g.id = t.global_shape_id "
                          "JOIN strings p ON p.id = t.placements_id WHERE t.is_dtensor").fetchall()
    recorded = {}
    for shape, placements in rows:
        recorded.setdefault(shape, set()).add(placements)
    for shape, text in expected.items():
        assert shape in recorded, (shape, sorted(recorded))
        if text is None:  # _StridedShard: formatted as torch prints it
            assert len(recorded[shape]) == 1 and "Replicate()" in next(iter(recorded[shape]))
        else:
            assert recorded[shape] == {text}, (shape, recorded[shape])


def test_a_long_training_loop_keeps_the_agent_bounded(mesh, run_dir):
    """Every step makes new activations, gradients and optimizer temporaries.
    The agent must not keep one identity (a table entry pinning the tensor's
    TensorImpl, one TensorRecord row) per tensor it ever saw: that grew the
    table and the rank file with every step and fragmented the heap. After
    warm-up, a step adds op records only and leaves the tables as they were.
    DTensor makes new specs every step (from_local() of each input, every
    redistribution): the agent's spec cache must not keep them alive. The
    to_local() outputs and the activations computed from them get the same
    provenance every step: one shared record each, not a new one per tensor
    (each lived until the step's end between the step's tensor buffers)."""
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    model = parallelize_module(
        torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)),
        mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = DTensor.from_local(torch.randn(8, 16), mesh, [Replicate()])
    y = torch.randn(8, 16)

    def step():
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()

    meshscope.attach(run_dir)
    for _ in range(3):
        step()
    warm = meshscope.stats()
    for _ in range(40):
        step()
    late = meshscope.stats()
    ops = late["ops"] - warm["ops"]
    assert ops >= 40 * 20
    # op records plus a few per step (optimizer step, thread names), no tensor rows
    assert late["submitted"] - warm["submitted"] - ops <= 40 * 2, (warm, late)
    assert late["tensor_descriptions"] == warm["tensor_descriptions"]
    assert late["tensor_table"] <= warm["tensor_table"] + 64, (warm, late)
    assert late["dtensor_specs"] <= warm["dtensor_specs"], (warm, late)
    assert warm["provenance_records"] > 0, warm
    assert late["provenance_records"] == warm["provenance_records"], (warm, late)


def test_provenance_flows_through_plain_ops_across_step_ends(mesh, run_dir):
    """Plain ops look up their inputs' provenance only when a lock-free filter
    says an input may have one; every step's end rebuilds that filter from
    the live entries. Tensors tagged before a step's end, and tensors derived
    from them after it, must still pass their provenance on; a tensor made
    before attach() has none, one made after it by the script its birth."""
    from meshscope import _capture

    plain = torch.randn(4, 4)
    meshscope.attach(run_dir)
    tagged = [torch.randn(4, 4) for _ in range(64)]
    for i, t in enumerate(tagged):
        _capture.tag(t, "D", f"batch {i}")
    for _ in range(3):
        meshscope.mark_step()
    derived = [(t * 2).relu() for t in tagged]
    meshscope.mark_step()
    twice = [d + 1 for d in derived]
    for i, t in enumerate(twice):
        assert _capture.provenance(t) == ("D", f"batch {i}", True), i
    assert _capture.provenance(plain * 2) is None
    origin, evidence, derived = _capture.provenance(torch.ones(4) + 1)
    assert (origin, derived) == ("H", True)
    assert evidence.startswith("created by aten::ones in user code outside forward at ")


def test_plain_ops_whose_outputs_cannot_take_a_provenance_skip_the_slow_path(mesh, run_dir):
    """An optimizer's step counter is a tagged plain tensor read by item()
    and bumped in place every step: an op that returns no tensor, and an
    in-place op whose one output is the tagged argument it wrote, give no
    tensor a provenance and skip the GIL and the bookkeeping (none counted
    in stats()["provenance_ops"]). An in-place or out= op still passes
    another argument's provenance to the tensor it wrote."""
    from meshscope import _capture

    before_attach, out = torch.zeros(4), torch.empty(4)  # no provenance
    meshscope.attach(run_dir)
    step = torch.zeros(())
    _capture.tag(step, "G", "the step counter")
    start = meshscope.stats()["provenance_ops"]
    for _ in range(10):
        step.add_(1)
        step.item()
        torch.add(step, 1, out=step)
    assert meshscope.stats()["provenance_ops"] == start
    assert step.item() == 20
    assert _capture.provenance(step) == ("G", "the step counter", False)

    batch = torch.randn(4)
    _capture.tag(batch, "D", "batch 0")
    before_attach.add_(batch)  # written from a tagged tensor
    torch.mul(batch, 2, out=out)
    assert meshscope.stats()["provenance_ops"] - start >= 2
    assert _capture.provenance(before_attach) == ("D", "batch 0", True)
    assert _capture.provenance(out) == ("D", "batch 0", True)
    meshscope.detach()


@pytest.mark.parametrize("hook", ["dispatcher", "mode"])
def test_both_hooks_reconcile_the_same_incident(mesh, run_dir, monkeypatch, hook):
    """MESHSCOPE_HOOK=mode selects the TorchDispatchMode that attach() falls
    back to where the dispatcher key is taken: same records, same result."""
    monkeypatch.setenv("MESHSCOPE_HOOK", hook)
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from meshscope import _capture

    meshscope.attach(run_dir, policy="auto")
    assert _capture.hook_enabled() == (hook == "dispatcher")
    assert len(_get_current_dispatch_mode_stack()) == (hook == "mode")
    w = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))
    out = w - torch.arange(16.0).reshape(4, 4)
    out.sum().backward()
    meshscope.detach()
    assert torch.equal(out.full_tensor(), 1 - torch.arange(16.0).reshape(4, 4))
    assert torch.equal(w.grad.full_tensor(), torch.ones(4, 4))
    incident = incidents(run_dir)[0]
    assert incident["op"] == "aten::sub.Tensor" and incident["outcome"] == "reconciled"
    assert incident["stack"][0]["file"].endswith("test_agent.py")


def test_root_module_call_tags_its_plain_inputs_by_path(mesh, run_dir):
    from meshscope import _capture

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Identity()

        def forward(self, batch, scale):
            return self.inner(batch["x"] * scale[1])

    known, x, s = torch.ones(2), torch.ones(2), torch.ones(2)
    w = distribute_tensor(torch.ones(4), mesh, [Shard(0)])
    meshscope.attach(run_dir)
    _capture.tag(known, "E", "kept by an optimizer")
    Net()({"x": x, "w": w}, [known, s])
    assert _capture.provenance(x) == ("D", "passed as input[0]['x'] to Net.forward()", False)
    assert _capture.provenance(s) == ("D", "passed as input[1][1] to Net.forward()", False)
    assert _capture.provenance(known)[:2] == ("E", "kept by an optimizer")  # known: kept
    assert _capture.provenance(w) is None  # a DTensor has no provenance
    with torch.no_grad():
        y_line = sys._getframe().f_lineno + 1
        y = torch.ones(2)
        Net().inner(y)  # a root call of its own
    # made after attach(): the root call names it input data, born where made
    assert _capture.provenance(y)[1] == (
        "passed as input[0] to Identity.forward(); created by aten::ones in user code "
        f"outside forward at {__file__}:{y_line}")
    meshscope.detach()



@pytest.mark.parametrize("value, meta", [("", "every 10 steps"), ("all", "every step"),
                                         ("every:3", "every 3 steps"), ("off", "off")])
def test_gpu_op_timing_is_sampled_by_step_as_configured(run_dir, monkeypatch, value, meta):
    monkeypatch.setenv("MESHSCOPE_DEVICE_TIMING", value)
    meshscope.attach(run_dir)
    meshscope.detach()
    assert meshscope.load_run(run_dir)["rank_details"][0]["meta"]["device_timing"] == meta


def test_a_bad_gpu_op_timing_setting_is_a_clear_error(run_dir, monkeypatch):
    monkeypatch.setenv("MESHSCOPE_DEVICE_TIMING", "every:0")
    with pytest.raises(ValueError, match="MESHSCOPE_DEVICE_TIMING='every:0'"):
        meshscope.attach(run_dir)


def test_keras_variable_outside_the_layout_map_names_the_keys(monkeypatch):
    """A Keras variable left plain: the evidence names the variable path and
    the ModelParallel LayoutMap keys it failed to match, in Keras' API."""
    monkeypatch.setenv("KERAS_BACKEND", "torch")  # else Keras looks for TensorFlow
    pytest.importorskip("keras.src.distribution.distribution_lib")
    from keras.src.distribution import distribution_lib

    from meshscope import _adapters

    class Layouts(dict):  # LayoutMap's lookup: a regex search over the keys
        def __getitem__(self, path):
            return next((v for k, v in self.items() if re.search(k, path)), None)

    class Distribution:
        _layout_map = Layouts({"dense_1/kernel": (None, "model"), "dense_2/.*": None})

    monkeypatch.setattr(distribution_lib, "distribution", lambda: Distribution())
    hint = _adapters._keras_plan("sequential/d1/kernel", 2)
    assert hint == (" (Keras variable sequential/d1/kernel matches no key of the ModelParallel "
                    "LayoutMap ['dense_1/kernel', 'dense_2/.*']: add one, "
                    "layout_map['sequential/d1/kernel'] = (None, 'model'), or fix the key that "
                    "was meant to match it)")
    # the tuple has the variable's rank, on the mesh's axis that is not the batch's
    Distribution.device_mesh = types.SimpleNamespace(axis_names=("batch", "shards"))
    Distribution.batch_dim_name = "batch"
    assert "layout_map['sequential/d2/bias'] = ('shards',)," in _adapters._keras_plan(
        "sequential/d2/bias", 1)
    assert "created outside the distribution" in _adapters._keras_plan("model/dense_1/kernel", 2)
    monkeypatch.setattr(distribution_lib, "distribution", lambda: None)
    assert "no ModelParallel distribution is set" in _adapters._keras_plan("d1/kernel", 2)


def test_module_paths_in_fixes_are_python():
    """A module path the evidence's fix quotes is Python: layers.0.attn is
    layers[0].attn (issue #44)."""
    from meshscope import _adapters

    assert _adapters._python_path("layers.0.attn") == "layers[0].attn"
    assert _adapters._python_path("model.layers.12") == "model.layers[12]"
    assert _adapters._python_path("head") == "head"
