"""Points NCCL at meshscope's profiler plugin (plugins/nccl_profiler), which
records every NCCL collective with its GPU times into the rank file.

NCCL reads NCCL_PROFILER_PLUGIN when it creates a communicator, which torch
does at a process group's first collective on a GPU: attach() before that
(`meshscope record` attaches at interpreter start). A value the user set is
left alone; MESHSCOPE_NCCL_PROFILER=0 turns the plugin off."""

from __future__ import annotations

import os

import torch

from meshscope import _capture

PLUGIN_FILE = "libnccl-profiler-meshscope.so"
_ENV = "NCCL_PROFILER_PLUGIN"
_set_here: str | None = None  # the value attach() put into the environment


def plugin_path() -> str | None:
    """The plugin beside the capture extension (a CUDA build puts it there)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), PLUGIN_FILE)
    return path if os.path.isfile(path) else None


def point_nccl_at_plugin() -> str:
    """Sets NCCL_PROFILER_PLUGIN when it is unset; returns what NCCL will load
    (or why nothing), for the rank's metadata."""
    global _set_here
    env, default = _capture.settings()["nccl_profiler"]
    if (os.environ.get(env, "") or default) == "0":
        return f"off ({env}=0)"
    current = os.environ.get(_ENV)
    if current:
        return current if current == _set_here else f"{current} (set by the user)"
    if torch.version.cuda is None:
        return "off (this torch has no CUDA)"
    path = plugin_path()
    if path is None:
        return "off (not built: meshscope was built without MESHSCOPE_BUILD_CUDA)"
    os.environ[_ENV] = _set_here = path
    if _nccl_already_initialized():
        return (f"off (NCCL made its first communicator before attach(), and reads {_ENV} "
                f"only then: set {_ENV}={path} before init_process_group, or record with "
                "`meshscope record`; collectives are still recorded, without NCCL's GPU times)")
    return path


def _nccl_already_initialized() -> bool:
    """Whether this process's default group is NCCL with its communicator
    already made (init_process_group(device_id=...) creates it eagerly;
    otherwise NCCL creates it at the first collective)."""
    import torch.distributed as dist

    try:
        if not (dist.is_available() and dist.is_initialized()):
            return False
        group = dist.distributed_c10d._get_default_group()
        if "nccl" not in str(dist.get_backend(group)):
            return False
        return getattr(group, "bound_device_id", None) is not None
    except Exception:  # noqa: BLE001 - private API: unknown means "not known to be made"
        return False


def restore() -> None:
    """Takes back what point_nccl_at_plugin() set (detach)."""
    global _set_here
    if _set_here is not None and os.environ.get(_ENV) == _set_here:
        del os.environ[_ENV]
    _set_here = None
