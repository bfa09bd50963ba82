"""pytest plugin: `pytest -p meshscope.pytest [--meshscope-policy strict|observe]`.

Records each test into its own run under --meshscope-dir (default
./meshscope-runs/pytest-<time>/<test>) and fails a test that had an
unreconciled mixed-tensor incident, even one the test swallowed."""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

import meshscope
from meshscope import _capture


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("meshscope")
    group.addoption("--meshscope-policy", default="observe", choices=("observe", "strict"),
                    help="observe: record, fail tests with unreconciled incidents; "
                         "strict: raise an enriched error at the incident")
    group.addoption("--meshscope-dir", default=None,
                    help="directory for the per-test runs (default ./meshscope-runs/pytest-<time>)")
    group.addoption("--meshscope-level", default="dtensor", choices=("dtensor", "all"))


def _base(config: pytest.Config) -> str:
    if not hasattr(config, "_meshscope_base"):
        base = config.getoption("--meshscope-dir") or _capture.default_run_dir(
            os.getcwd(), _capture.default_run_name(int(time.time()), prefix="pytest"))
        config._meshscope_base = base  # type: ignore[attr-defined]
    return config._meshscope_base  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    config = item.config
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-150:]
    run_dir = os.path.join(_base(config), name)
    if meshscope.attached():  # the test session itself records (meshscope record)
        yield
        return
    meshscope.attach(run_dir, policy=config.getoption("--meshscope-policy"),
                     level=config.getoption("--meshscope-level"))
    try:
        yield
    finally:
        stats = meshscope.stats()
        meshscope.detach()
        unreconciled = stats["incidents"] - stats["reconciled"]
        item._meshscope = (unreconciled, run_dir)  # type: ignore[attr-defined]


def _describe(run_dir: str) -> str:
    try:
        run = meshscope.load_run(run_dir, op_names=False)
    except OSError as error:
        return f"  (run unreadable: {error})"
    lines = []
    for rank in run["rank_details"]:
        for i in rank["incidents"]:
            if i["outcome"] == "reconciled":
                continue
            frame = i["stack"][0] if i["stack"] else {"file": "?", "line": 0}
            lines.append(f"  {i['op']} at {frame['file']}:{frame['line']}: origin {i['origin']} "
                         f"({i['evidence']}), {i['action']}")
    return "\n".join(lines[:10])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    found = getattr(item, "_meshscope", None)
    if call.when != "call" or not found or found[0] <= 0:
        return
    unreconciled, run_dir = found
    message = (f"meshscope: {unreconciled} unreconciled mixed torch.Tensor/DTensor incident(s); "
               f"run recorded in {run_dir}\n{_describe(run_dir)}")
    if report.passed:
        report.outcome = "failed"
        report.longrepr = message
    else:
        report.sections.append(("meshscope", message))
