"""What tests/bench/capture_instructions.py --by-function prints from two
callgrind dumps (no valgrind needed: callgrind_annotate's output is given):
functions keyed by name whatever object callgrind named, and the added cost
split by whose code it is and by kind of event."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import capture_instructions as ci  # noqa: E402

EVENTS = "Ir I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim"


def annotate(rows: list[tuple[list[int], str]]) -> str:
    """callgrind_annotate's text for `rows` (events in EVENTS' order)."""
    lines = [f"Events shown:           {EVENTS}", "", "-" * 20,
             "1,000 (100.0%)  PROGRAM TOTALS", ""]
    for values, name in rows:
        cells = "  ".join(f"{v:,} ( 1.00%)" if v else "." for v in values)
        lines.append(f"{cells}  {name}")
    return "\n".join(lines) + "\n"


def fake_annotate(monkeypatch: Any, dumps: dict[str, str]) -> None:
    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(cmd, 0, stdout=dumps[cmd[-1]], stderr="")
    monkeypatch.setattr(ci.subprocess, "run", run)


def row(ir: int, ilmr: int = 0, dlmr: int = 0, i1mr: int = 0) -> list[int]:
    return [ir, i1mr, 0, 0, ilmr, dlmr, 0, 0, 0, 0, 0]


BASE = annotate([
    (row(1000), "???:c10::intrusive_ptr<c10::TensorImpl>::reset_not_null_() "
                "[/venv/torch/lib/libtorch_cpu.so]"),
    (row(5000), "/py/Python/ceval.c:_PyEval_EvalFrameDefault'2 [/usr/lib/libpython3.11.so.1.0]"),
    (row(800, dlmr=10), "???:kernel_loop [/venv/torch/lib/libtorch_cpu.so]"),
])
# The same intrusive_ptr method, named after libtorch_python this time; the
# agent's own function and one of its types inlined from a header.
AGENT = annotate([
    (row(1004), "???:c10::intrusive_ptr<c10::TensorImpl>::reset_not_null_() "
                "[/venv/torch/lib/libtorch_python.so]"),
    (row(5040, i1mr=2), "/py/Python/ceval.c:_PyEval_EvalFrameDefault "
                        "[/usr/lib/libpython3.11.so.1.0]"),
    (row(800, dlmr=30), "???:kernel_loop [/venv/torch/lib/libtorch_cpu.so]"),
    (row(400, ilmr=8, i1mr=12), "capture/agent/interop/frames.cpp:meshscope::capture::"
                                "FrameCache::userStack(meshscope::RankWriter&) "
                                "[/build/python/meshscope/_capture.cpython-311-x86_64-linux-gnu.so]"),
    (row(100, dlmr=2), "core/store/records.h:meshscope::RecordQueue::push(meshscope::OpRecord&&)"),
])


def test_a_function_is_keyed_by_name_whatever_object_callgrind_named_it(monkeypatch):
    fake_annotate(monkeypatch, {"base": BASE, "agent": AGENT})
    base, agent = ci.function_costs("base"), ci.function_costs("agent")
    name = "???:c10::intrusive_ptr<c10::TensorImpl>::reset_not_null_()"
    assert base[name][0] == "libtorch_cpu.so" and agent[name][0] == "libtorch_python.so"
    assert agent[name][1]["Ir"] - base[name][1]["Ir"] == 4
    # a recursion's entries ('2) are summed under the function
    assert agent["/py/Python/ceval.c:_PyEval_EvalFrameDefault"][1]["Ir"] == 5040
    assert agent["core/store/records.h:meshscope::RecordQueue::push(meshscope::OpRecord&&)"][0] \
        == "(object not named)"


def test_whose_code_a_function_is():
    assert ci.whose("x:meshscope::capture::OpRecorder::recordOp()", "(object not named)") \
        == "meshscope's code"
    assert ci.whose("???:pybind11::cpp_function::dispatcher", "_capture.cpython-311.so") \
        == "meshscope's code"
    assert ci.whose("/py/Objects/dictobject.c:_Py_dict_lookup", "libpython3.11.so.1.0") \
        == "Python's interpreter"
    assert ci.whose("???:mkl_blas_sgemm", "libtorch_cpu.so") == "torch, libc and the rest"


def test_the_split_by_whose_code_and_by_kind_adds_up_per_step(monkeypatch, capsys):
    fake_annotate(monkeypatch, {"base": BASE, "agent": AGENT})
    ci.print_by_function("base", "agent", steps=2, top=3, cycles=True)
    out = capsys.readouterr().out
    lines = out.splitlines()
    split = {line.split("  ")[-1]: line.split() for line in lines[2:5]}
    # meshscope's: (400 + 12*10 + 8*100) + (100 + 2*100) = 1,620 cycles over 2 steps
    agent = split["meshscope's code"]
    assert agent[0] == "+0.8" and agent[2] == "+0.2"  # 0.81 k cycles, 0.25 k instructions
    assert agent[8] == "+0.0"  # LL data misses: 2 over 2 steps = 0.001 k
    # the moved intrusive_ptr method adds 4 instructions, not +1,004 and -1,000
    rest = split["torch, libc and the rest"]
    assert rest[0] == "+1.0"  # 4 + 20*100 = 2,004 cycles over 2 steps
    # by object: the uninstrumented run's object, where a function ran in both
    assert "libtorch_python.so" not in out.split("by shared object")[1].split("functions")[0]
    top = out.split("functions that add the most")[1].splitlines()[1:]
    assert "kernel_loop" in top[0] and "[libtorch_cpu.so]" in top[0]
