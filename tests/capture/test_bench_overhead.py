"""The statistics of tests/bench/capture_overhead.py (no ranks started): the
per-round paired ratio with its bootstrap interval, and the per-thread CPU
times read from /proc."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import capture_overhead as co  # noqa: E402


def test_the_ratio_pairs_each_block_with_the_uninstrumented_block_of_its_round():
    base = [10.0, 20.0, 10.0, 40.0, 10.0]  # drift: round 1 and 3 were slow for everyone
    values = [10.5, 21.0, 10.5, 42.0, 10.5]
    median, lo, hi = co.paired(values, base)
    assert median == 1.05 and lo == 1.05 and hi == 1.05


def test_the_a_a_block_is_chosen_by_number_and_never_by_default():
    assert co.selected(co.CONFIGURATIONS, "3,14") == [co.CONFIGURATIONS[0], co.CONFIGURATIONS[3],
                                                      co.AGAIN]
    assert co.AGAIN.startswith(co.CONFIGURATIONS[0])
    assert co.AGAIN not in co.selected(co.CONFIGURATIONS, "")


def test_the_interval_holds_the_median_and_narrows_with_more_rounds():
    import random

    rng = random.Random(1)
    def draw(rounds):
        base = [10.0] * rounds
        return co.paired([10.0 * (1.04 + rng.gauss(0, 0.15)) for _ in range(rounds)], base, 500)

    few, many = draw(30), draw(480)
    for median, lo, hi in (few, many):
        assert lo <= median <= hi
    assert (many[2] - many[1]) < (few[2] - few[1]) / 2
    assert abs(many[0] - 1.04) < 0.03


def test_the_part_table_pairs_each_part_with_the_uninstrumented_block_of_its_round():
    names = ["base", "agent"]
    # rounds 1 and 2 were slow for everyone's forward but the agent's in round
    # 2: paired, the agent adds 10 us in two rounds of three (the medians of
    # each column alone would differ by -990); 3 us to every optimizer step
    base = [[60.0, 2000.0, 200.0, 2500.0, 3000.0], [60.0, 3000.0, 200.0, 2500.0, 4500.0],
            [60.0, 3000.0, 200.0, 2500.0, 3000.0]]
    agent = [[60.0, 2010.0, 200.0, 2500.0, 3003.0], [60.0, 3010.0, 200.0, 2500.0, 4503.0],
             [60.0, 2010.0, 200.0, 2500.0, 3003.0]]
    lines = co.part_table({"base": base, "agent": agent}, names)
    assert lines[0].split()[1:] == list(co.STEP_PARTS)
    assert lines[1].split() == ["base", "60.0", "3000.0", "200.0", "2500.0", "3000.0"]
    cells = lines[2].split()
    assert cells[0] == "agent"
    assert cells[1:4] == ["60.0", "+0.0", "[+0,+0]"]  # zero_grad
    assert cells[4:8] == ["2010.0", "+10.0", "[-990,+10]", "200.0"]  # forward, then loss
    assert cells[-3:] == ["3003.0", "+3.0", "[+3,+3]"]  # optimizer


def test_parts_run_and_print_a_row_per_configuration():
    """A real two-rank run with --parts: the part table follows the ratios,
    one row per configuration, every part timed."""
    import subprocess

    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    script = os.path.join(os.path.dirname(__file__), "..", "bench", "capture_overhead.py")
    out = subprocess.run([sys.executable, script, "--rounds", "1", "--steps", "2", "--warm", "1",
                          "--settle", "0", "--only", "3", "--parts", "--dim", "16", "--hidden",
                          "32", "--batch", "4", "--layers", "1"], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("training thread CPU us"))
    assert lines[at + 1].split()[1:] == list(co.STEP_PARTS)
    base, agent = lines[at + 2].split(), lines[at + 3].split()
    assert base[:2] == ["no", "instrumentation"] and len(base) == 2 + 5
    assert all(float(v) > 0 for v in base[2:])  # every part took CPU time
    assert agent[:4] == ["meshscope", "observe,", "level", "dtensor"]
    assert len(agent) == 4 + 5 * 3  # per part: us, difference, interval


def write_task(root, tid, comm, ns):
    d = root / str(tid)
    d.mkdir()
    (d / "comm").write_text(comm + "\n")
    (d / "schedstat").write_text(f"{ns} 0 0\n")


def test_thread_cpu_goes_to_the_training_thread_the_writer_and_the_rest(tmp_path):
    write_task(tmp_path, os.getpid(), "python", 5_000)
    write_task(tmp_path, 999_990, "meshscope-wr", 700)
    write_task(tmp_path, 999_991, "pt_gloo_runloop", 100)
    write_task(tmp_path, 999_992, "python", 20)  # an OpenMP worker: not the main thread
    (tmp_path / "999993").mkdir()  # ended while read: no files
    assert co.thread_cpu_ns(str(tmp_path)) == {"training": 5_000, "writer": 700, "other": 120}


def test_no_thread_times_where_proc_has_none(tmp_path):
    assert co.thread_cpu_ns(str(tmp_path / "absent")) == {}


def test_this_process_has_a_training_thread_time():
    times = co.thread_cpu_ns()
    if times:  # Linux
        assert times["training"] > 0


def test_hook_phases_are_summed_over_the_timed_steps_only():
    """Configuration 13: stats() gives each phase as ns per op since attach;
    the timed span's ns are the difference of two readings' totals."""
    before = {"dtensor_ops": 10.0, "plain_ops": 4.0, "stack_ns": 100.0, "op_ns": 1000.0,
              "plain_ns": 50.0, "provenance_ops": 1.0}
    after = {"dtensor_ops": 30.0, "plain_ops": 8.0, "stack_ns": 150.0, "op_ns": 1000.0,
             "plain_ns": 75.0, "provenance_ops": 3.0}
    total = {}
    co.add_phases(total, before, after)
    co.add_phases(total, {}, after)  # a second block, from attach
    assert total["dtensor_ops"] == 20 + 30 and total["plain_ops"] == 4 + 8
    assert total["provenance_ops"] == 2 + 3
    assert total["stack_ns"] == (30 * 150 - 10 * 100) + 30 * 150
    assert total["plain_ns"] == (8 * 75 - 4 * 50) + 8 * 75


def test_adapter_calls_are_averaged_over_their_own_calls():
    """An adapter's ns are per call of its own, not per DTensor op."""
    before = {"dtensor_ops": 10.0, "plain_ops": 0.0, "op_ns": 1000.0,
              "adapter_collective_calls": 2.0, "adapter_collective_ns": 5000.0}
    after = {"dtensor_ops": 110.0, "plain_ops": 0.0, "op_ns": 1000.0,
             "adapter_collective_calls": 4.0, "adapter_collective_ns": 6000.0}
    total = {}
    co.add_phases(total, before, after)
    assert total["adapter_collective_calls"] == 2
    assert total["adapter_collective_ns"] == 4 * 6000 - 2 * 5000
    assert total["dtensor_ops"] == 100 and total["op_ns"] == 100 * 1000


def test_hook_phases_print_ns_per_op_and_the_agents_time_a_step(capsys):
    total = {"dtensor_ops": 100.0, "plain_ops": 50.0, "gil_ns": 2000.0, "stack_ns": 8000.0,
             "op_ns": 900000.0, "plain_ns": 25000.0}
    co.print_phases(total, steps=10)
    out = capsys.readouterr().out
    assert "10 DTensor ops a step, ns per op: gil 20, stack 80; the agent's 100" in out
    assert "(the op itself 9000)" in out
    assert "plain ops: 5 a step, 500 ns each in the hook; the agent's time a step: 4 us" in out
    assert "adapter" not in out  # none timed
    co.print_phases({**total, "provenance_ops": 20.0}, steps=10)
    assert "plain ops: 5 a step (2 keeping provenance), 500 ns each" in capsys.readouterr().out


def test_hook_phases_print_the_adapters_calls_a_step_and_their_time(capsys):
    total = {"dtensor_ops": 100.0, "plain_ops": 0.0, "gil_ns": 2000.0, "op_ns": 900000.0,
             "plain_ns": 0.0, "adapter_collective_calls": 20.0, "adapter_collective_ns": 150000.0,
             "adapter_to_local_calls": 40.0, "adapter_to_local_ns": 120000.0,
             "adapter_work_wait_calls": 0.0, "adapter_work_wait_ns": 0.0}
    co.print_phases(total, steps=10)
    out = capsys.readouterr().out
    assert ("adapter calls, the agent's own time (the call they wrap left out): "
            "collective 2.0 a step x 7.5 us, to_local 4.0 a step x 3.0 us; "
            "the adapters' time a step: 27 us, and 0 us moved") in out


def test_an_adapters_moved_time_is_per_call_and_printed_apart(capsys):
    """What an adapter call releases for torch (HookPhases::Moved) is
    averaged over that call's own calls and printed beside its own time,
    not in it."""
    total = {}
    co.add_phases(total, {"adapter_step_calls": 1.0, "adapter_step_ns": 20000.0,
                          "adapter_step_moved_ns": 10000.0},
                  {"adapter_step_calls": 11.0, "adapter_step_ns": 25000.0,
                   "adapter_step_moved_ns": 16000.0, "dtensor_ops": 10.0, "op_ns": 1.0})
    assert total["adapter_step_calls"] == 10
    assert total["adapter_step_moved_ns"] == 11 * 16000 - 10000
    co.print_phases(total, steps=10)
    out = capsys.readouterr().out
    assert "step 1.0 a step x 25.5 us (+16.6 moved); the adapters' time a step: 26 us, " \
        "and 17 us moved (releasing what torch would have released itself" in out, out


def test_context_switches_come_from_the_status_file(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nvoluntary_ctxt_switches:\t12\n"
                      "nonvoluntary_ctxt_switches:\t7\n")
    assert co.training_switches(str(status)) == (12, 7)
    assert co.training_switches(str(tmp_path / "absent")) == (0, 0)
    status.write_text("Name:\tpython\n")  # a kernel without the counters
    assert co.training_switches(str(status)) == (0, 0)


# tests/bench/hook_cache.py: the agent's ns per DTensor op in groups between
# cache-evicting work.
import hook_cache as hc  # noqa: E402


def test_hook_cache_divides_each_phase_by_the_ops_timed():
    total = {"dtensor_ops": 4.0, "gil_ns": 400.0, "enter_ns": 800.0, "outputs_ns": 0.0,
             "stack_ns": 0.0, "operands_ns": 0.0, "submit_ns": 0.0, "done_ns": 40.0,
             "op_ns": 4000.0}
    row = hc.per_op(total)
    assert row["gil_ns"] == 100.0 and row["enter_ns"] == 200.0 and row["done_ns"] == 10.0
    assert row["agent_ns"] == 310.0 and row["op_ns"] == 1000.0
    assert hc.per_op({"dtensor_ops": 0.0}) == {}


def test_hook_cache_ratios_are_to_the_largest_group():
    def row(agent):
        return {**dict.fromkeys(hc.PHASES, 0.0), "gil_ns": agent, "agent_ns": agent,
                "op_ns": 9.0}
    table = hc.summary({1: [row(3000), row(3400), row(3200)], 8: [row(1000), row(1000)]})
    assert table[1].split()[:3] == ["1", "3200", "3.20x"]
    assert table[2].split()[:3] == ["8", "1000", "1.00x"]
    assert "no DTensor op" in hc.summary({1: []})[0]


def test_hook_cache_runs_and_prints_a_row_per_group():
    import subprocess

    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    script = os.path.join(os.path.dirname(__file__), "..", "bench", "hook_cache.py")
    out = subprocess.run([sys.executable, script, "--rounds", "1", "--groups", "1,2",
                          "--ops", "8", "--evict-mib", "4"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.split()[:1] in (["1"], ["2"])]
    assert [r[0] for r in rows] == ["1", "2"]
    assert rows[1][2] == "1.00x" and float(rows[0][1]) > 0


# tests/bench/adapter_calls.py: what the adapters add to each call they wrap.
import adapter_calls as ac  # noqa: E402


def test_adapter_calls_rows_give_the_medians_their_difference_and_ratio():
    lines = ac.summary({"call": ([1000.0, 3000.0, 2000.0], [2500.0, 2600.0, 9000.0]),
                        "never timed": ([], [])})
    assert len(lines) == 2
    name, without, with_, added, ratio = lines[1].rsplit(None, 4)
    assert (name, without, with_, added, ratio) == ("call", "2.00", "2.60", "+0.60", "1.300x")


def test_adapter_calls_runs_and_prints_a_row_per_call():
    import subprocess

    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    script = os.path.join(os.path.dirname(__file__), "..", "bench", "adapter_calls.py")
    out = subprocess.run([sys.executable, script, "--rounds", "1", "--calls", "20"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.endswith("x")]
    assert [r.split("  ")[0] for r in rows][-1] == "torch.optim.Adam.step()"
    assert len(rows) == 6 and all(float(r.rsplit(None, 4)[1]) > 0 for r in rows)


# tests/bench/hook_kernels.py: what the hook's own kernels save per op.
import hook_kernels as hk  # noqa: E402


def test_hook_kernels_rows_give_each_way_and_what_the_hook_adds():
    lines = hk.summary({
        "op": {"without": [1000.0, 1200.0, 1100.0], "kernels": [1250.0, 1300.0, 1200.0],
               "boxed": [1400.0, 1300.0, 1350.0]},
        "never timed": {"without": [], "kernels": [], "boxed": []}})
    assert len(lines) == 2
    assert lines[1].split() == ["op", "1100", "1250", "1350", "+150", "+250"]


def test_hook_kernels_runs_and_prints_a_row_per_op():
    import subprocess

    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
                        "MESHSCOPE_BENCH_BOXED")}
    script = os.path.join(os.path.dirname(__file__), "..", "bench", "hook_kernels.py")
    out = subprocess.run([sys.executable, script, "--rounds", "1", "--calls", "40"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if "(a kernel)" in line or "(no kernel)" in line]
    assert len(rows) == 3
    for row in rows:
        cells = row.rsplit(None, 5)
        assert all(float(c) > 0 for c in cells[1:4]), row
