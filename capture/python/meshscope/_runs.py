"""Reading recorded runs from Python (through the same C++ reader as the CLI)."""

from __future__ import annotations

import json
import os
from typing import Any

from meshscope import _capture


def load_run(path: str | os.PathLike[str], *, op_names: bool = True) -> dict[str, Any]:
    """Returns a run directory (or one rank file) as a dict: summary per rank,
    and per rank its meta, meshes, incidents (with evidence, stacks and
    operands), optimizer steps, collectives and (op_names=True) op counts.
    Raises OSError naming the file when the run cannot be read."""
    return json.loads(_capture.load_run_json(os.fspath(path), op_names))
