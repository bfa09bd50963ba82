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
              "plain_ns": 50.0}
    after = {"dtensor_ops": 30.0, "plain_ops": 8.0, "stack_ns": 150.0, "op_ns": 1000.0,
             "plain_ns": 75.0}
    total = {}
    co.add_phases(total, before, after)
    co.add_phases(total, {}, after)  # a second block, from attach
    assert total["dtensor_ops"] == 20 + 30 and total["plain_ops"] == 4 + 8
    assert total["stack_ns"] == (30 * 150 - 10 * 100) + 30 * 150
    assert total["plain_ns"] == (8 * 75 - 4 * 50) + 8 * 75


def test_hook_phases_print_ns_per_op_and_the_agents_time_a_step(capsys):
    total = {"dtensor_ops": 100.0, "plain_ops": 50.0, "gil_ns": 2000.0, "stack_ns": 8000.0,
             "op_ns": 900000.0, "plain_ns": 25000.0}
    co.print_phases(total, steps=10)
    out = capsys.readouterr().out
    assert "10 DTensor ops a step, ns per op: gil 20, stack 80; the agent's 100" in out
    assert "(the op itself 9000)" in out
    assert "plain ops: 5 a step, 500 ns each in the hook; the agent's time a step: 4 us" in out
