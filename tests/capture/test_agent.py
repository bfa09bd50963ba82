"""The agent in one process (world size 1, gloo): attach/detach, origin
classes A-H, policies, robustness, the pytest plugin."""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import re
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

import meshscope


@pytest.fixture(scope="module")
def mesh():
    # A world of one needs no rendezvous: an in-process store, not a probed
    # TCP port another test running beside this one could take meanwhile.
    os.environ.update(RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,), mesh_dim_names=("model",))
    dist.destroy_process_group()


@pytest.fixture
def run_dir(tmp_path):
    yield tmp_path / "run"
    meshscope.detach()


def incidents(run_dir):
    return meshscope.load_run(run_dir)["rank_details"][0]["incidents"]


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


def _child(code: str, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


CHILD_PRELUDE = """
    import os, sys, time, torch, torch.distributed as dist
    import meshscope
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    os.environ.update(RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))
    meshscope.attach(sys.argv[1], policy="auto")
    w = distribute_tensor(torch.ones(64, 64), mesh, [Shard(0)])
"""


def test_sigkilled_rank_leaves_a_readable_database(tmp_path):
    run = tmp_path / "run"
    proc = _child(CHILD_PRELUDE + """
    for i in range(50):
        w = w + torch.ones(64, 64)
    meshscope._capture.flush()
    print("flushed", flush=True)
    time.sleep(60)
    """, str(run))
    assert proc.stdout.readline().strip() == "flushed", proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    got = meshscope.load_run(run)
    assert len(got["rank_details"][0]["incidents"]) == 50
    assert got["ranks"][0]["status"] != "closed" if "status" in got["ranks"][0] else True


def test_sigterm_flushes_the_rank_file(tmp_path):
    run = tmp_path / "run"
    proc = _child(CHILD_PRELUDE + """
    for i in range(20):
        w = w + torch.ones(64, 64)
    print("ready", flush=True)
    time.sleep(60)
    """, str(run))
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    assert proc.returncode == -signal.SIGTERM
    got = meshscope.load_run(run)
    assert len(got["rank_details"][0]["incidents"]) == 20


def test_a_full_file_cap_degrades_to_counted_drops_and_training_goes_on(tmp_path):
    run = tmp_path / "run"
    proc = _child(CHILD_PRELUDE + """
    for i in range(3000):
        w = w + torch.ones(64, 64)
    meshscope._capture.flush()
    st = meshscope.stats()
    print("done", st["drops"]["file_cap"], float(w.full_tensor()[0, 0]), flush=True)
    """, str(run), MESHSCOPE_MAX_FILE_BYTES="200000")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    _, drops, value = out.split()
    assert int(drops) > 0 and float(value) == 3001.0  # training unaffected
    assert err.count("meshscope") >= 1 and "write" in err.lower()


def test_unusable_run_directory_leaves_training_unrecorded_under_the_loader(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {**os.environ, "MESHSCOPE_RUN_DIR": str(blocker / "run"), "MESHSCOPE_ATTACH": "always"}
    loader = Path(meshscope.__file__).parent / "_loader"
    env["PYTHONPATH"] = f"{loader}:{env['PYTHONPATH']}"
    proc = subprocess.run([sys.executable, "-c", "print('trained')"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "trained" in proc.stdout
    # attached without a file: its policy still runs (tests/capture/test_store_faults.py)
    assert "meshscope: rank 0 is not recording" in proc.stderr and str(blocker) in proc.stderr


def test_dataloader_fork_workers_do_not_corrupt_the_store(tmp_path):
    run = tmp_path / "run"
    proc = _child(CHILD_PRELUDE + """
    from torch.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(torch.ones(64, 64)), batch_size=8, num_workers=2,
                        multiprocessing_context="fork")
    for (batch,) in loader:
        w = w + torch.ones(64, 64)
    meshscope.detach()
    print("ok", flush=True)
    """, str(run))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    got = meshscope.load_run(run)
    assert len(got["rank_details"][0]["incidents"]) == 8
    assert got["problems"] == []


def test_pytest_plugin_fails_a_test_with_a_swallowed_incident(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import os, socket, torch, torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor

        def setup_module():
            s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0",
                              WORLD_SIZE="1")
            dist.init_process_group("gloo")

        def test_swallows():
            w = distribute_tensor(torch.ones(4, 4), init_device_mesh("cpu", (1,)), [Shard(0)])
            try:
                w - torch.ones(4, 4)
            except RuntimeError:
                pass

        def test_clean():
            assert True
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "meshscope.pytest",
                           "--meshscope-policy", "observe", "--meshscope-dir",
                           str(tmp_path / "runs"), "-p", "no:cacheprovider", "test_user.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout
    assert "unreconciled mixed torch.Tensor/DTensor incident" in proc.stdout
    assert "aten::sub.Tensor at" in proc.stdout and "test_user.py" in proc.stdout


def test_attach_points_nccl_at_the_profiler_plugin_and_detach_takes_it_back(
        mesh, run_dir, monkeypatch):
    from meshscope import _nccl

    monkeypatch.delenv("NCCL_PROFILER_PLUGIN", raising=False)
    monkeypatch.delenv("MESHSCOPE_NCCL_PROFILER", raising=False)
    meshscope.attach(run_dir)
    value = os.environ.get("NCCL_PROFILER_PLUGIN")
    meshscope.detach()
    assert "NCCL_PROFILER_PLUGIN" not in os.environ
    meta = meshscope.load_run(run_dir)["rank_details"][0]["meta"]
    if os.environ.get("MESHSCOPE_NCCL_PLUGIN_BUILT"):  # a CUDA build: the plugin is staged
        assert value == _nccl.plugin_path() and Path(value).name == _nccl.PLUGIN_FILE
        assert meta["nccl_profiler"] == value
    else:
        assert value is None and meta["nccl_profiler"].startswith("off (")


def test_a_users_nccl_profiler_plugin_and_the_opt_out_are_respected(mesh, tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_PROFILER_PLUGIN", "/opt/their/libnccl-profiler.so")
    with meshscope.capture(tmp_path / "theirs"):
        assert os.environ["NCCL_PROFILER_PLUGIN"] == "/opt/their/libnccl-profiler.so"
    assert os.environ["NCCL_PROFILER_PLUGIN"] == "/opt/their/libnccl-profiler.so"
    meta = meshscope.load_run(tmp_path / "theirs")["rank_details"][0]["meta"]
    assert meta["nccl_profiler"] == "/opt/their/libnccl-profiler.so (set by the user)"

    monkeypatch.delenv("NCCL_PROFILER_PLUGIN")
    monkeypatch.setenv("MESHSCOPE_NCCL_PROFILER", "0")
    with meshscope.capture(tmp_path / "off"):
        assert "NCCL_PROFILER_PLUGIN" not in os.environ
    meta = meshscope.load_run(tmp_path / "off")["rank_details"][0]["meta"]
    assert meta["nccl_profiler"] == "off (MESHSCOPE_NCCL_PROFILER=0)"


def _collectives(rank_file):
    import sqlite3

    with sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True) as db:
        return db.execute("SELECT k.text, g.text, c.bytes, c.end_ns >= c.start_ns "
                          "FROM collectives c JOIN strings k ON k.id = c.kind_id "
                          "LEFT JOIN strings g ON g.id = c.group_id ORDER BY c.seq").fetchall()


def test_functional_collectives_are_recorded_with_kind_group_and_bytes(mesh, run_dir):
    from torch.distributed import _functional_collectives as funcol

    session = meshscope.attach(run_dir)
    t = torch.ones(8)  # 32 bytes
    funcol.all_reduce(t, "sum", (mesh, 0)).wait()  # DTensor's way: a (mesh, dim) pair
    funcol.all_reduce(t, "sum", group=(mesh, 0)).wait()  # the same group, by keyword
    funcol.all_gather_tensor(torch.ones(2, 3), 0, mesh).wait()  # the mesh itself
    with pytest.raises(Exception) as raised:
        funcol.all_reduce(t, "no such op", (mesh, 0))
    meshscope.detach()
    with pytest.raises(type(raised.value)):  # the same error without meshscope
        funcol.all_reduce(t, "no such op", (mesh, 0))
    rows = _collectives(session.rank_file)
    assert rows[:2] == [("all_reduce", "mesh dim model", 32, 1)] * 2
    kind, group, size, ordered = rows[2]
    assert (kind, size, ordered) == ("all_gather_tensor", 24, 1) and group  # torch's group name
    assert rows[3] == ("all_reduce", "mesh dim model", 32, 1)  # the call that raised
    assert _states(session.rank_file) == ["completed"] * 3 + ["failed"]


STATES = ("completed", "failed", "pending", "unwaited")  # collectives.state (kCollectiveStates)


def _states(rank_file):
    import sqlite3

    states = STATES
    with sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True) as db:
        return [states[s] for (s,) in db.execute("SELECT state FROM collectives ORDER BY seq")]


def test_functional_collectives_are_recorded_while_the_nccl_plugin_listens(tmp_path):
    """Once NCCL's profiler plugin has taken the agent's collective sink, the
    functional-collective wrapper still records every collective, GPU ones
    included: what NCCL runs under it only adds its GPU time to that record
    (tests/plugins/test_nccl_profiler_agent.py), so a plugin that sees nothing
    (NCCL reports no events for a one-rank communicator) loses nothing."""
    code = CHILD_PRELUDE + """
    import ctypes
    from meshscope import _capture
    from torch.distributed import _functional_collectives as funcol
    record = _capture.collective(lambda t, group: t, "all_reduce", 0, str)
    record(torch.ones(4), (mesh, 0))
    getter = ctypes.CDLL(_capture.__file__).meshscope_collective_sink
    getter.restype = ctypes.c_void_p
    assert getter()  # what NCCL's plugin does first: the agent now says a plugin listens
    assert _capture.collective_plugin_listening()
    funcol.all_reduce(torch.ones(2), "sum", (mesh, 0)).wait()  # gloo, CPU
    if torch.cuda.is_available():
        record(torch.ones(8, device="cuda"), group=(mesh, 0))
    meshscope.detach()
    print("cuda" if torch.cuda.is_available() else "cpu")
    """
    child = _child(code, str(tmp_path / "run"))
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    (rank_file,) = (tmp_path / "run").glob("rank-*.msdb")
    # (the prelude's distribute_tensor scatters directly through c10d)
    rows = [(kind, size) for kind, _, size, _ in _collectives(rank_file) if kind == "all_reduce"]
    cuda = [("all_reduce", 32)] if out.strip() == "cuda" else []
    assert rows == [("all_reduce", 16), ("all_reduce", 8)] + cuda, (rows, out)


def test_direct_c10d_collectives_are_recorded_with_kind_bytes_group_and_call_site(
        mesh, run_dir):
    """dist.all_reduce, broadcast, all_gather_into_tensor, barrier called by
    the program itself (no DTensor, no functional collective): each recorded
    once, tied to its c10d op and the line that called it. The c10d calls
    inside functional collectives are not counted again."""
    from torch.distributed import _functional_collectives as funcol

    meshscope.attach(run_dir)
    t = torch.ones(16)  # 64 bytes
    line = inspect.currentframe().f_lineno + 1
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    dist.all_gather_into_tensor(torch.empty(16), t)
    dist.barrier()
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    funcol.all_reduce(t, "sum", (mesh, 0)).wait()  # recorded once, as before
    meshscope.detach()
    rank = meshscope.load_run(run_dir, op_names=True)["rank_details"][0]
    collectives = rank["collectives"]
    here = os.path.basename(__file__)
    assert collectives["all_reduce"]["count"] == 3  # two direct, one functional
    assert collectives["all_reduce"]["ops"] == {"c10d::allreduce_": 2}
    assert collectives["all_reduce"]["bytes"] == 3 * 64
    sites = {site.rsplit("/", 1)[-1]: n for site, n in collectives["all_reduce"]["sites"].items()}
    # the functional one: its own call site
    assert sites == {f"{here}:{line}": 1, f"{here}:{line + 4}": 1, f"{here}:{line + 6}": 1}
    for kind, op, size, offset in (("broadcast", "c10d::broadcast_", 64, 1),
                                   ("all_gather_into_tensor", "c10d::_allgather_base_", 64, 2),
                                   ("barrier", "c10d::barrier", 0, 3)):
        entry = collectives[kind]
        assert (entry["count"], entry["bytes"], entry["ops"]) == (1, size, {op: 1}), (kind, entry)
        assert [s.rsplit("/", 1)[-1] for s in entry["sites"]] == [f"{here}:{line + offset}"]
        assert list(entry["groups"]) == ["default_pg (1 rank)"], entry
    assert rank["op_names"]["c10d::allreduce_"] == 2


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
