"""The sample attribution of tests/bench/capture_profile.py (no perf needed):
perf script lines parsed, each sample given to the block its timestamp falls
in, per thread role, and the per-step CPU times and ratios it prints."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import capture_profile as cp  # noqa: E402

LINES = """\
          python 100/100 10.000100:      7f83104fbeab _PyEval_EvalFrameDefault+0x2b (/usr/lib/libpython3.11.so.1.0)
          python 100/100 10.000300:      7f83104fbeab meshscope::capture::(anonymous namespace)::hookFallback(c10::OperatorHandle const&)+0x10 (/build/python/meshscope/_capture.cpython-311-x86_64-linux-gnu.so)
    meshscope-wr 100/107 10.000400:      7f8310400000 [unknown] (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)
 pt_gloo_runloop 100/103 10.000500:  ffffffff9a00 do_epoll_wait+0x5 ([kernel.kallsyms])
          python 100/100 11.500000:      7f83104fbeab _PyEval_EvalFrameDefault+0x2b (/usr/lib/libpython3.11.so.1.0)
          python 100/100 20.000100:      7f83104fbeab _PyEval_EvalFrameDefault+0x2b (/usr/lib/libpython3.11.so.1.0)
          python 200/200 20.000100:      7f83104fbeab _PyEval_EvalFrameDefault+0x2b (/usr/lib/libpython3.11.so.1.0)
not a sample line
"""


def test_a_perf_script_line_gives_thread_time_function_and_object():
    s = cp.parse_sample(LINES.splitlines()[1])
    assert (s.comm, s.pid, s.tid, s.time) == ("python", 100, 100, 10.0003)
    assert s.symbol == ("meshscope::capture::(anonymous namespace)::hookFallback"
                        "(c10::OperatorHandle const&)")
    assert s.dso == "_capture.cpython-311-x86_64-linux-gnu.so"
    k = cp.parse_sample(LINES.splitlines()[3])
    assert (k.comm, k.tid, k.symbol, k.dso) == ("pt_gloo_runloop", 103, "do_epoll_wait",
                                                "[kernel.kallsyms]")
    assert cp.parse_sample("not a sample line") is None
    assert cp.parse_sample("") is None


def test_samples_go_to_the_block_they_fell_in_by_thread_role():
    # rank process 100: an agent block 10-11 s and an uninstrumented block
    # 20-21 s, 10 steps each; 1 sample per ms (freq 1000)
    windows = [cp.Windows(pid=100, main_tid=100, steps=10,
                          blocks=[(10.0, 11.0, cp.AGENT), (20.0, 21.0, cp.OFF)])]
    profile = cp.Profile(windows, freq=1000)
    for line in LINES.splitlines():
        sample = cp.parse_sample(line)
        if sample:
            profile.add(sample)
    # 4 samples in the agent block (one at 11.5 s falls between blocks, pid
    # 200 is not a rank): 1 ms of CPU each over 10 steps = 100 us a step
    assert profile.per_step_us(cp.AGENT) == 400.0
    assert profile.per_step_us(cp.OFF) == 100.0
    roles = profile.grouped(cp.AGENT, 1)
    assert roles == {("training thread",): 200.0, ("meshscope threads",): 100.0,
                     ("other threads (gloo, ...)",): 100.0}
    by_object = profile.grouped(cp.AGENT, 2)
    assert by_object[("training thread", "_capture.cpython-311-x86_64-linux-gnu.so")] == 100.0
    assert profile.per_step_us(cp.AGENT, lambda k: k[0] == "training thread") == 200.0

    text = cp.report(profile, [cp.OFF, cp.AGENT], top=5)
    rows = {line[:38].strip(): line.split() for line in text.splitlines()[1:3]}
    assert rows[cp.OFF][-6:-2] == ["0.10", "1.000x", "0.10", "1.000x"]
    assert rows[cp.AGENT][-6:-2] == ["0.40", "4.000x", "0.20", "2.000x"]
    assert "+100.0  training thread | _capture.cpython-311-x86_64-linux-gnu.so" in text


def test_a_configuration_without_samples_reads_zero_not_an_error():
    profile = cp.Profile([cp.Windows(pid=1, main_tid=1, steps=5, blocks=[])], freq=1000)
    assert profile.per_step_us(cp.AGENT) == 0.0
    assert profile.grouped(cp.AGENT, 2) == {}


def test_wall_ratios_pair_each_block_with_its_rounds_uninstrumented_block():
    def round_at(t0, off, agent):  # the four blocks of a round, 10 steps each
        return [(t0, t0 + off, cp.OFF), (t0 + 2, t0 + 2 + off, cp.OFF_AGAIN),
                (t0 + 4, t0 + 4 + off, cp.ADAPTERS), (t0 + 6, t0 + 6 + agent, cp.AGENT)]
    # round 2 runs slower throughout (a loaded machine): its ratio is 1.1 all the same
    blocks = round_at(0, 0.10, 0.105) + round_at(10, 0.20, 0.22) + round_at(20, 0.10, 0.104)
    profile = cp.Profile([cp.Windows(pid=7, main_tid=7, steps=10, blocks=blocks),
                          cp.Windows(pid=9, main_tid=9, steps=10, blocks=[])], freq=1000)
    wall, ratio = profile.wall_ratio(cp.AGENT)
    assert abs(wall - 10.5) < 1e-9  # median block 0.105 s over 10 steps
    assert abs(ratio - 1.05) < 1e-9  # median of 1.05, 1.10, 1.04
    wall, ratio = profile.wall_ratio(cp.OFF)
    assert abs(wall - 10.0) < 1e-9 and ratio == 1.0
