"""The dispatcher hook itself: what it keeps of each operator, the
benchmarks' switches that cut its work short or time it
(MESHSCOPE_BENCH_HOOK, MESHSCOPE_BENCH_BOXED), and its own unboxed kernels
of common ops against its boxed fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

import meshscope
from conftest import cli, incidents


def test_an_operator_defined_again_after_its_library_went_is_read_again(mesh, run_dir):
    """The dispatcher hook keeps what it reads of an operator (how many
    arguments to scan, its name) by the operator's address. A torch.library
    operator that is dropped and defined again with other arguments may get
    the dropped one's address: read with the old count, the new call's
    tagged input (not its last argument) would go unseen and its output
    would carry no provenance."""
    from meshscope import _capture

    def define(schema, kernel):
        lib = torch.library.Library("meshscope_test", "DEF")
        lib.define(schema)
        lib.impl("twice", kernel, "CPU")
        return lib

    meshscope.attach(run_dir, policy="observe")
    batch = torch.ones(4)
    _capture.tag(batch, "D", "test batch")
    lib = define("twice(Tensor x) -> Tensor", lambda x: x * 2)
    assert _capture.provenance(torch.ops.meshscope_test.twice(batch))[0] == "D"
    read = _capture.stats()["hook_operators"]
    assert _capture.provenance(torch.ops.meshscope_test.twice(batch))[0] == "D"
    assert _capture.stats()["hook_operators"] == read  # kept, not read again
    lib._destroy()
    lib = define("twice(Tensor x, Tensor scale, Tensor shift) -> Tensor",
                 lambda x, scale, shift: x * scale + shift)
    out = torch.ops.meshscope_test.twice(batch, torch.full((4,), 2.0), torch.zeros(4))
    assert out.tolist() == [2.0] * 4
    assert _capture.provenance(out)[0] == "D"
    assert _capture.stats()["hook_operators"] > read  # every operator read again
    lib._destroy()
    meshscope.detach()


def test_operators_the_hook_keeps_are_read_once_however_many(run_dir):
    """More operators than the hook's table holds without collisions: a
    second round of calls reads none of them again (the hook's facts of an
    operator are read once per agent, not each time a neighbour displaced
    them)."""
    from meshscope import _capture

    lib = torch.library.Library("meshscope_many", "DEF")
    names = [f"f{i}" for i in range(300)]
    for name in names:
        lib.define(f"{name}(Tensor x) -> Tensor")
        lib.impl(name, lambda x: x + 1, "CPU")
    meshscope.attach(run_dir, policy="observe")
    x = torch.ones(2)
    ops = [getattr(torch.ops.meshscope_many, name) for name in names]
    rounds = []
    for _ in range(3):
        rounds.append([op(x).tolist() for op in ops])
        if len(rounds) == 1:
            read = _capture.stats()["hook_operators"]
    assert rounds == [[[2.0, 2.0]] * len(ops)] * 3
    assert _capture.stats()["hook_operators"] == read
    meshscope.detach()
    lib._destroy()


@pytest.mark.parametrize("cut, recorded, incident", [
    ("", True, True), ("unrecorded", False, True), ("scan", False, True),
    ("pass", False, False), ("off", False, False)])
def test_bench_hook_cuts_leave_out_what_they_name(mesh, run_dir, monkeypatch, cut, recorded,
                                                  incident):
    """MESHSCOPE_BENCH_HOOK, for tests/bench/capture_overhead.py --only 9-12
    only, cuts the hook's work on an op short: DTensor ops are recorded by
    the whole hook alone, and a mixed op is still an incident while the hook
    scans operands; a cut is read at each attach."""
    monkeypatch.setenv("MESHSCOPE_BENCH_HOOK", cut)
    meshscope.attach(run_dir)
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    (w * 2).sum()
    with pytest.raises(RuntimeError, match="mixed torch.Tensor and DTensor"):
        w + torch.ones(4, 4)
    meshscope.detach()
    rank = meshscope.load_run(run_dir)["rank_details"][0]
    assert (rank["op_names"].get("aten::mul.Tensor", 0) == 1) == recorded, rank["op_names"]
    assert (len(incidents(run_dir)) == 1) == incident


def test_bench_hook_phases_time_each_recorded_dtensor_op(mesh, run_dir, monkeypatch):
    """MESHSCOPE_BENCH_HOOK=phases (capture_overhead.py's configuration 13)
    records as the whole hook does and times each part of a recorded DTensor
    op: meshscope.stats() counts exactly the DTensor ops recorded and the
    plain ops the hook only scanned, each phase a positive share; without it
    stats() has no phases."""
    monkeypatch.setenv("MESHSCOPE_BENCH_HOOK", "phases")
    meshscope.attach(run_dir)
    w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    for _ in range(5):
        (w * 2).sum()  # two DTensor ops
        torch.ones(4) + torch.ones(4)  # three plain ops
    phases = meshscope.stats()["hook_phases"]
    meshscope.detach()
    rank = meshscope.load_run(run_dir)["rank_details"][0]
    recorded = rank["op_names"]["aten::mul.Tensor"] + rank["op_names"]["aten::sum"]
    assert recorded == 10 and phases["dtensor_ops"] == recorded, (phases, rank["op_names"])
    assert phases["plain_ops"] >= 15, phases
    for name in ("gil", "enter", "op", "outputs", "stack", "operands", "submit", "done", "plain"):
        assert phases[f"{name}_ns"] > 0, (name, phases)
    monkeypatch.setenv("MESHSCOPE_BENCH_HOOK", "")
    meshscope.attach(run_dir.parent / "again")
    assert "hook_phases" not in meshscope.stats()
    meshscope.detach()


def test_bench_hook_phases_time_the_adapters_own_work_per_call(mesh, run_dir, monkeypatch):
    """MESHSCOPE_BENCH_HOOK=phases also times the C++ ends of the adapters,
    call by call, in the steps the benchmark times: to_local's provenance,
    a functional collective's issue and its wait, DTensor.from_local's
    guard, the root module call and an optimizer step's bookkeeping. Each
    counts its calls and its own ns (the original it wraps left out: a
    collective's own time stays far below the sleep it wraps)."""
    import time

    from torch.distributed import _functional_collectives as funcol

    monkeypatch.setenv("MESHSCOPE_BENCH_HOOK", "phases")
    original = funcol.all_reduce
    monkeypatch.setattr(funcol, "all_reduce",
                        lambda *a, **k: (time.sleep(0.02), original(*a, **k))[1])
    meshscope.attach(run_dir)  # wraps the sleeping all_reduce
    w = torch.nn.Parameter(distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]))
    opt = torch.optim.SGD([w], lr=0.1)
    model = torch.nn.Identity()
    for _ in range(3):
        w.to_local()
    for _ in range(2):
        funcol.wait_tensor(funcol.all_reduce(torch.ones(4), "sum", (mesh, 0)))
    DTensor.from_local(torch.ones(4, 4), mesh, [Replicate()])
    (model(w) * 2).sum().backward()
    opt.step()
    phases = meshscope.stats()["hook_phases"]
    meshscope.detach()
    calls = {k[len("adapter_"):-len("_calls")]: v for k, v in phases.items()
             if k.startswith("adapter_") and k.endswith("_calls")}
    # an AsyncCollectiveTensor waited for calls funcol.wait_tensor once more inside
    assert calls["to_local"] == 3 and calls["collective"] == 2 and calls["wait_tensor"] >= 2
    assert calls["guarded"] >= 1 and calls["forward"] == 1 and calls["step"] == 1, calls
    for name in ("to_local", "collective", "wait_tensor", "guarded", "forward", "step"):
        assert 0 < phases[f"adapter_{name}_ns"] < 5e6, (name, phases)  # under 5 ms a call
    # moved, not the agent's: the Work a wait_tensor released in torch, last
    # held by the agent; the specs only its cache still held at the step
    assert phases["adapter_wait_tensor_moved_ns"] > 0, phases
    assert phases["adapter_step_moved_ns"] > 0, phases
    assert phases["adapter_to_local_moved_ns"] == 0, phases


def _recorded_facts(run: Path) -> dict:
    """What a rank file holds of its ops, tensors and incidents, strings
    resolved: the op statistics (names, counts, placements) as the JSON
    report gives them, every tensor record in id order and every incident
    with its operands."""
    import json
    import sqlite3
    import subprocess

    con = sqlite3.connect(run / "rank-00000.msdb")
    text = dict(con.execute("select id, text from strings"))
    resolve = lambda row, at: tuple(text.get(v) if i in at else v for i, v in enumerate(row))
    tensors = [resolve(r, {1, 2, 3, 4, 6, 7}) for r in con.execute(
        "select id, dtype_id, global_shape_id, local_shape_id, device_id, mesh_id, placements_id,"
        " label_id, created_stack_id, numel, is_dtensor from tensors order by id")]
    found = [resolve(r, {1, 4, 7}) for r in con.execute(
        "select seq, op_id, operand_index, origin, evidence_id, action, outcome, error_id"
        " from incidents order by seq")]
    operands = [resolve(r, {6}) for r in con.execute(
        "select incident_seq, role, idx, kind, tensor_id, scalar, placements_id"
        " from incident_operands order by incident_seq, role, idx")]
    con.close()
    report = run.parent / f"{run.name}.json"
    subprocess.run([cli(), "report", str(run), "--format", "json", "-o", str(report)],
                   check=True, capture_output=True)
    ops = sorted((o["name"], o["count"], tuple(o["placements"]))
                 for o in json.loads(report.read_text())["time"]["ops"])
    return {"ops": ops, "tensors": tensors, "incidents": found, "incident_operands": operands}


def test_the_hooks_own_kernels_record_what_its_boxed_fallback_does(mesh, tmp_path, monkeypatch):
    """The dispatcher hook has unboxed kernels of its own for the ops a
    training step calls most (unboxed_ops.h); every other op, and every op
    with MESHSCOPE_BENCH_BOXED=1, takes its boxed fallback. Two tensor-parallel
    Adam steps, mixed ops (out of place and in place) reconciled by the
    policy, a Partial read with item(), an op that fails in DTensor's
    dispatch and a provenance chain through plain ops, recorded both ways,
    give the same ops with the same placements, the same tensor records and
    the same incidents with the same operands."""
    from torch import nn
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    facts, results = {}, {}
    for boxed in ("1", ""):
        monkeypatch.setenv("MESHSCOPE_BENCH_BOXED", boxed)
        run = tmp_path / f"boxed-{boxed or 0}"
        meshscope.attach(run, policy="replicate")
        torch.manual_seed(0)
        model = parallelize_module(
            nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8)), mesh,
            {"0": ColwiseParallel(), "2": RowwiseParallel()})
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        x, y = torch.randn(4, 8), torch.randn(4, 8)
        for _ in range(2):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        w = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
        added = w + torch.full((4, 4), 2.0)  # mixed: promoted, then run
        w.mul_(torch.full((4, 4), 3.0))  # mixed in place: w itself comes back
        read = w.sum().item()  # a Partial's share read as a number
        with pytest.raises(RuntimeError):
            torch.mm(w, distribute_tensor(torch.ones(3, 4), mesh, [Shard(0)]))
        meshscope.detach()
        results[boxed] = (loss.item(), added.full_tensor().tolist(), w.full_tensor().tolist(), read)
        facts[boxed] = _recorded_facts(run)
    assert results["1"] == results[""]
    assert facts["1"]["incidents"] and facts["1"]["tensors"], facts["1"]
    assert {o[0] for o in facts["1"]["ops"]} >= {"aten::linear", "aten::addcdiv_", "aten::item"}
    for key in ("ops", "tensors", "incidents", "incident_operands"):
        assert facts["1"][key] == facts[""][key], key
