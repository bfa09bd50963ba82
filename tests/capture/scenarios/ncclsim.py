"""Registers the test backend "ncclsim" (tests/capture/ncclsim): gloo's
collectives with NCCL's semantics where they differ (completion reported
after wait() returned, errors raised asynchronously by a watchdog that
takes the process down). MESHSCOPE_SCENARIO_BACKEND=ncclsim selects it in
the scenarios; its module is built into $MESHSCOPE_NCCLSIM_DIR."""

from __future__ import annotations

import os
import sys
from typing import Any


def register() -> None:
    import torch.distributed as dist

    if "ncclsim" in getattr(dist.Backend, "backend_list", []):
        return
    where = os.environ.get("MESHSCOPE_NCCLSIM_DIR")
    if not where:
        raise SystemExit("the ncclsim backend needs MESHSCOPE_NCCLSIM_DIR (set by ctest)")
    sys.path.insert(0, where)
    import _ncclsim  # type: ignore[import-not-found]

    def create(store: Any, rank: int, size: int, timeout: Any) -> Any:
        gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        return _ncclsim.SimBackend(gloo, rank, size, timeout)

    dist.Backend.register_backend("ncclsim", create, devices=["cpu"])
