"""Put on PYTHONPATH by `meshscope record`: attaches the capture agent when a
worker's interpreter starts (reading the MESHSCOPE_* environment), then runs
whatever other sitecustomize the environment has. Never stops the program:
a problem is one line on stderr and the process runs unrecorded."""

import importlib.machinery
import importlib.util
import os
import sys


def _attach() -> None:
    # The one variable read by name (core/model/settings.h has it as run_dir):
    # asking meshscope._capture would import torch into every interpreter.
    if not os.environ.get("MESHSCOPE_RUN_DIR"):
        return
    try:
        from meshscope._attach import attach_from_environment

        attach_from_environment()
    except Exception as error:  # noqa: BLE001 - the training must still run
        print(f"meshscope: not recording pid {os.getpid()}: {error}", file=sys.stderr)


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_attach()
_chain()
