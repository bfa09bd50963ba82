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
