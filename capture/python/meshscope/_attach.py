"""attach() / detach(): installs the capture agent into this process.

The per-op work happens in C++ (meshscope._capture): a boxed fallback on a
dispatcher key above autograd that the attaching thread includes in its
dispatch (backward inherits it), and a RecordFunction observer. Where the
key is taken, a TorchDispatchMode with a C++ __torch_dispatch__ does the same
job at a higher cost. This module resolves the configuration (arguments, then
MESHSCOPE_* environment variables set by `meshscope record`), installs the
hook and the adapters, and undoes all of it on detach()."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import re
import signal
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _pop_mode, _push_mode

from meshscope import _adapters, _capture, _nccl
from meshscope import _tracing  # noqa: F401  (imported: it provides the agent's callbacks)


class MixedTensorError(RuntimeError):
    """Raised by the `strict` policy: names the plain operand, its origin,
    the frame that created it and the fix."""


MixedTensorError.__module__ = "meshscope"  # as tracebacks name it: meshscope.MixedTensorError


def _job_command() -> list[str]:
    """The job's command line as typed: `meshscope record` passes it (with
    torchrun and the interpreter); otherwise this process's own, the
    interpreter and its options included. Values that look like secrets are
    redacted (_redacted): run folders are shared and copied."""
    given = os.environ.get(_env_name("command"))
    if given:
        try:
            command = json.loads(given)
            if isinstance(command, list) and all(isinstance(a, str) for a in command):
                return _redacted(command)
        except ValueError:
            pass
    return _redacted(list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]))


_SECRET_WORDS = {"token", "key", "secret", "password", "passwd", "pwd", "credential",
                 "credentials", "apikey", "auth", "cookie"}
_REDACTED = "<redacted>"


def _secret_name(name: str) -> bool:
    """`--hf-token`, `api_key`, `WANDB_API_KEY`, `--password`: an option or
    variable whose value is a secret by its name."""
    lowered = name.lower()
    parts = [p for p in re.split(r"[-_.]", lowered) if p]
    return any(p in _SECRET_WORDS for p in parts) or lowered.endswith(
        ("token", "secret", "password", "apikey"))


def _redacted(argv: list[str]) -> list[str]:
    """`argv` with the values of secret-looking options (`--token=V`,
    `--token V`) and assignments (`HF_TOKEN=V`) replaced by <redacted>."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(_REDACTED)
            hide_next = False
            continue
        option = re.fullmatch(r"(-{1,2})([A-Za-z][A-Za-z0-9_.-]*)(?:=(.*))?", arg, re.S)
        assignment = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", arg, re.S)
        if option and _secret_name(option.group(2)):
            if option.group(3) is None:
                hide_next = True
                out.append(arg)
            else:
                out.append(f"{option.group(1)}{option.group(2)}={_REDACTED}")
        elif assignment and _secret_name(assignment.group(1)):
            out.append(f"{assignment.group(1)}={_REDACTED}")
        else:
            out.append(arg)
    return out


class _MeshscopeMode(TorchDispatchMode):
    """The hook: __torch_dispatch__ is a C++ builtin bound to the instance
    (torch requires its __self__ to be the mode). Set per instance, not in
    the class body, so TorchDispatchMode.__init_subclass__ does not wrap it in
    a Python dynamo-disable shim; Dynamo cannot trace into C++ anyway."""

    def __init__(self) -> None:
        super().__init__()
        self.__torch_dispatch__ = _capture.bind_dispatch(self)  # type: ignore[method-assign]


@dataclass(frozen=True)
class Session:
    """What attach() set up."""

    run_dir: str
    rank_file: str | None  # None: the rank could not create it (it runs unrecorded)
    policy: str
    level: str
    rank: int
    world_size: int


_lock = threading.RLock()
_session: Session | None = None
_mode: _MeshscopeMode | None = None  # only where the dispatcher hook is unavailable
_hook_enabled = False
_patches: _adapters.Patches | None = None
_atexit_registered = False


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"meshscope: environment variable {name}={value!r} is not an integer")
    if not -2**63 <= number < 2**63:
        raise ValueError(f"meshscope: environment variable {name}={value!r} is out of range "
                         f"(at most {2**63 - 1})")
    return number


# The settings the environment carries, with their defaults: one table in
# C++ (core/model/settings.h) for the CLI, the agent and this package.
_SETTINGS: dict[str, tuple[str, str]] = _capture.settings()


def _env_name(key: str) -> str:
    return _SETTINGS[key][0]


def _setting(key: str) -> str:
    """The setting's environment variable, else its default ("" for none)."""
    env, default = _SETTINGS[key]
    return os.environ.get(env, "") or default


def _steps_every(key: str, value: str) -> int:
    """A setting that picks steps: "every:N" (the steps 0, N, 2N, ...),
    "all" (1: every step), "off" (0); "" or "default": the table's default."""
    text = value.strip().lower()
    if text in ("", "default"):
        text = _SETTINGS[key][1]
    if text == "all":
        return 1
    if text == "off":
        return 0
    if text.startswith("every:") and text[6:].isdigit() and int(text[6:]) > 0:
        return int(text[6:])
    raise ValueError(f"meshscope: {_env_name(key)}={value!r}: use all, off or every:N "
                     "(N steps apart, N >= 1)")


def _device_timing_every(value: str) -> int:
    """MESHSCOPE_DEVICE_TIMING: which steps' ops get GPU durations (two CUDA
    events per op on the training thread): "every:N" (default every:10, the
    steps 0, 10, 20, ...), "all" (every step), "off"."""
    return _steps_every("device_timing", value)


def _replica_check_every(value: str) -> int:
    """MESHSCOPE_REPLICA_CHECK: at which optimizer steps the state ranks must
    hold equal is fingerprinted (_replicas.py): "every:N" (default every:50),
    "all", "off"."""
    return _steps_every("replica_check", value)


def _dist_info() -> tuple[int, int, str, str]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        backend = str(dist.get_backend())
        device = "cuda" if "nccl" in backend else "cpu"
        return dist.get_rank(), dist.get_world_size(), backend, device
    return _env_int("RANK", 0), _env_int("WORLD_SIZE", 1), "", "cpu"


def _unused_run_dir(run_dir: str, rank: int) -> str:
    """`run_dir`, unless it holds this rank's file of an earlier run (a
    script run again, an elastic restart): then a fresh folder beside it,
    said on stderr. A rank file is never overwritten, and an existing folder
    never stops the training. The ranks of one job share a parent process
    (torchrun, mp.spawn, `meshscope record`), so they pick the same one."""
    def taken(folder: str) -> bool:
        return os.path.exists(os.path.join(folder, f"rank-{rank:05d}.msdb"))

    if not taken(run_dir):
        return run_dir
    fresh = f"{run_dir}-job{os.getppid()}"
    if taken(fresh):
        fresh = f"{run_dir}-{time.strftime('%H%M%S')}-pid{os.getpid()}"
    print(f"meshscope: {run_dir} holds rank {rank}'s file of an earlier run; recording into "
          f"{fresh}", file=sys.stderr)
    return fresh


def _job_key(world: int, run_id: str | None) -> str:
    """What the ranks of this job share and no other job running now does:
    the run folder is claimed for it (a second job into the same folder
    records elsewhere). `meshscope record` gives every rank its run id."""
    if run_id:
        return f"run {run_id}"
    if world > 1:
        elastic = os.environ.get("TORCHELASTIC_RUN_ID", "none")
        if elastic != "none":
            return f"torchelastic {elastic}"
        return (f"master {os.environ.get('MASTER_ADDR', 'localhost')}:"
                f"{os.environ.get('MASTER_PORT', '0')}")
    import socket
    return f"process {socket.gethostname()}:{os.getpid()}"


def _taken_run_dir(run_dir: str, holder: str) -> str:
    """A fresh folder beside `run_dir`, which another job records into; the
    ranks of this job share a parent process and pick the same one."""
    fresh = f"{run_dir}-job{os.getppid()}"
    if os.path.exists(fresh):
        fresh = f"{run_dir}-{time.strftime('%H%M%S')}-pid{os.getpid()}"
    print(f"meshscope: {holder}; recording into {fresh}", file=sys.stderr)
    return fresh


def _default_run_dir(rank: int, world: int) -> str:
    """./meshscope-runs/<time>; named in C++ (core/store/run_directory.h) like
    the runs of `meshscope record` and the pytest plugin."""
    import torch.distributed as dist

    group = world > 1 and dist.is_available() and dist.is_initialized()
    job = None
    if world > 1 and not group:  # no process group to agree on a time with: the job names the run
        job = _capture.default_run_job(os.environ.get("TORCHELASTIC_RUN_ID"),
                                       os.environ.get("MASTER_PORT"))
        if os.environ.get("TORCHELASTIC_RUN_ID", "none") == "none":
            job += f"-job{os.getppid()}"  # the port alone repeats from one run to the next
    name = [_capture.default_run_name(int(time.time()), job=job)]
    if group:
        dist.broadcast_object_list(name, src=0)  # every rank records into one run
    return _capture.default_run_dir(os.getcwd(), name[0])


def _shown(text: str) -> str:
    """`text` as UTF-8 can hold it: the bytes of a file name or argument
    that are not UTF-8 (str keeps them as surrogates) written \\xNN, as the
    agent writes the file names of frames."""
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def _prefixes(paths: set[str]) -> list[str]:
    return [_shown(p) for p in sorted(os.path.join(os.path.realpath(p), "") for p in paths) +
            sorted(os.path.join(p, "") for p in paths)]


# Frameworks whose code runs the user's: a tensor they make from the user's
# (transformers' tensor-parallel hooks turning DTensor outputs into plain
# tensors, a Keras layer's call) is born at the user's line that called them.
_FRAMEWORKS = ("transformers", "accelerate", "keras")


def _framework_dirs() -> set[str]:
    dirs = set()
    for name in _FRAMEWORKS:
        try:
            spec = importlib.util.find_spec(name)  # a top-level package: not imported
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            dirs.add(location)
    return dirs


def _internal_prefixes() -> list[str]:
    return _prefixes({os.path.dirname(torch.__file__), os.path.dirname(__file__),
                      sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"],
                      *_framework_dirs()})


def _caller_site() -> str:
    """file:line of the user code that called attach() (through capture()
    or a pytest fixture, too); "" when nothing but meshscope, torch and the
    standard library is on the stack: the loader `meshscope record` puts on
    PYTHONPATH attached as the interpreter started."""
    skip = tuple(_internal_prefixes())
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith("<") and not os.path.abspath(path).startswith(skip) \
                and "/_pytest/" not in path and "/pluggy/" not in path:
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


_WATCHDOG_DEFAULT_S = float(_SETTINGS["watchdog_s"][1])


def _watchdog_seconds(given: float | None) -> float:
    """The watchdog's time: `given`, else $MESHSCOPE_WATCHDOG_S, else the
    default. A bad environment value is said once and the default used: the
    agent never stops a training over its own settings."""
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, (int, float)) or not \
                0 <= given < float("inf"):
            raise ValueError(f"meshscope: watchdog must be seconds >= 0 (got {given!r})")
        return float(given)
    text = os.environ.get(_env_name("watchdog_s"), "").strip()
    if not text:
        return _WATCHDOG_DEFAULT_S
    try:
        value = float(text)
        if not 0 <= value < float("inf"):
            raise ValueError
        return value
    except ValueError:
        print(f"meshscope: {_env_name('watchdog_s')}={text!r} is not seconds >= 0; using "
              f"{_WATCHDOG_DEFAULT_S:g}", file=sys.stderr)
        return _WATCHDOG_DEFAULT_S


def _thread_stacks() -> str:
    """The Python stacks of all threads, as `py-spy dump` prints them (most
    recent call last); what the watchdog writes for a hung collective."""
    import threading
    import traceback

    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():  # the watchdog asking
            continue
        out.append(f"Thread {ident:#x} ({names.get(ident, 'unnamed')}):\n")
        out.extend(traceback.format_stack(frame))
    return "".join(out)


_capture.provide("thread_stacks", _thread_stacks)  # what the watchdog writes


def attach(run_dir: str | os.PathLike[str] | None = None, policy: str | os.PathLike[str] = "observe",
           level: str = "dtensor", *, run_id: str | None = None,
           watchdog: float | None = None) -> Session:
    """Starts recording this rank into `run_dir` (default: $MESHSCOPE_RUN_DIR,
    else ./meshscope-runs/<timestamp>) and reconciling incidents by `policy`:
    observe | replicate | auto | strict | shard | scalar, or a TOML policy
    file. `level` is "dtensor" (DTensor-level ops) or "all" (every aten op).
    Idempotent: attaching again with the same settings returns the session;
    different settings need detach() first. A bad policy file raises
    ValueError naming the file and line. `watchdog`: seconds a collective may
    stay pending before the rank writes the Python stacks of its threads into
    its rank file and prints them (default $MESHSCOPE_WATCHDOG_S, else 480,
    the heartbeat timeout of PyTorch's NCCL watchdog; 0 turns it off)."""
    global _session, _patches, _atexit_registered
    with _lock:
        policy = os.fspath(policy)
        if _session is not None:
            if (policy, level) == (_session.policy, _session.level) and (
                    run_dir is None or os.path.abspath(run_dir) == _session.run_dir):
                return _session
            raise ValueError("meshscope is already attached with other settings "
                             f"({_session.policy}, {_session.level}, {_session.run_dir}); "
                             "call meshscope.detach() first")
        rank, world, backend, device = _dist_info()
        local_rank = _env_int("LOCAL_RANK", rank)
        if run_dir is None:
            run_dir = _setting("run_dir") or _default_run_dir(rank, world)
        run_dir = _unused_run_dir(os.path.abspath(os.fspath(run_dir)), rank)
        names = _capture.policy_names()
        if policy not in names:
            policy = os.path.abspath(policy)
            if not os.path.isfile(policy):
                raise ValueError(f"meshscope: policy '{policy}' is neither a policy name "
                                 f"({', '.join(names)}) nor a readable TOML file")
        limits = {key: _env_int(_env_name(key), 0) for key in ("max_file_bytes", "queue_capacity")
                  if os.environ.get(_env_name(key))}
        device_timing = _device_timing_every(os.environ.get(_env_name("device_timing"), ""))
        replica_every = _replica_check_every(os.environ.get(_env_name("replica_check"), ""))
        watchdog_s = _watchdog_seconds(watchdog)
        nccl_profiler = _nccl.point_nccl_at_plugin()
        attached_at = _shown(_caller_site())
        run_id = run_id or _setting("run_id")
        config = {
            **limits,
            "device_timing_every": device_timing, "watchdog_s": watchdog_s,
            "run_dir": os.fsencode(run_dir), "policy": os.fsencode(policy), "level": level,
            "rank": rank,
            "world_size": world, "local_rank": local_rank,
            "run_id": run_id, "job": _job_key(world, run_id),
            "backend": backend, "device_type": device, "torch_version": torch.__version__,
            "command": [_shown(a) for a in _job_command()], "internal_prefixes": _internal_prefixes(),
            "attached_at": attached_at,
            "own_prefixes": _prefixes({os.path.dirname(__file__)}),
        }
        try:
            info = _capture.attach(config)
        except FileExistsError as taken:  # another job's run folder
            run_dir = _taken_run_dir(run_dir, str(taken))
            info = _capture.attach({**config, "run_dir": os.fsencode(run_dir)})
        if info["not_recording"]:
            print(f"meshscope: rank {rank} is not recording ({info['not_recording']}); its "
                  "policy still runs, and what it would record is counted as dropped",
                  file=sys.stderr)
        try:
            _capture.set_strict_error_type(MixedTensorError)
            _capture.record_meta("nccl_profiler", nccl_profiler)
            if nccl_profiler.startswith("off (NCCL made"):
                print(f"meshscope: NCCL's profiler plugin is {nccl_profiler}", file=sys.stderr)
            _patches = _adapters.install(replica_every)
            _install_hook()
        except BaseException:
            if _patches is not None:
                _patches.restore()
                _patches = None
            _capture.detach()
            _nccl.restore()
            raise
        if attached_at:  # the program ran before this call: which tensors are older than it
            import gc
            try:
                tensor = torch.Tensor  # type(): no object's __class__ property runs
                _capture.mark_preexisting(
                    o for o in gc.get_objects() if issubclass(type(o), tensor))
            except Exception as error:  # noqa: BLE001 - the agent's trouble stays its own
                print(f"meshscope: cannot list the tensors older than attach(): {error}",
                      file=sys.stderr)
        _session = Session(run_dir, info["rank_file"] or None, policy, level, rank, world)
        if not _atexit_registered:
            atexit.register(detach)
            _install_sigterm_flush()
            _install_excepthook()
            _atexit_registered = True
        return _session


def detach() -> None:
    """Stops recording, flushes and closes the rank file, and restores every
    function meshscope patched. Safe to call when not attached."""
    global _session, _patches
    with _lock:
        if _session is None:
            return
        _uninstall_hook()
        if _patches is not None:
            _patches.restore()
            _patches = None
        _adapters.record_backend()
        _capture.detach()
        _nccl.restore()
        _session = None


def _install_hook() -> None:
    global _mode, _hook_enabled
    ok, why = _capture.install_hook()
    if ok and _setting("hook") != "mode":
        _capture.enable_hook(True)
        _hook_enabled = True
        return
    if not ok:
        print(f"meshscope: the dispatcher hook is unavailable ({why}); "
              "using a TorchDispatchMode instead, which costs more per op", file=sys.stderr)
    _mode = _MeshscopeMode()
    _push_mode(_mode)


def _uninstall_hook() -> None:
    global _mode, _hook_enabled
    if _hook_enabled:
        _capture.enable_hook(False)
        _hook_enabled = False
    if _mode is not None:
        _remove_mode(_mode)
        _mode = None


def _remove_mode(mode: TorchDispatchMode) -> bool:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    stack = _get_current_dispatch_mode_stack()
    if mode not in stack:  # pushed on another thread, or already popped by the user
        return False
    above = []
    while True:
        top = _pop_mode()
        if top is mode:
            break
        above.append(top)
    for other in reversed(above):
        _push_mode(other)
    return True


def raise_mode_to_top() -> None:
    """Moves meshscope's mode above modes pushed after attach() (Keras'
    DTensor promotion mode), so it sees plain operands before they do."""
    with _lock:
        if _mode is not None and _remove_mode(_mode):
            _push_mode(_mode)


def attached() -> bool:
    return _session is not None


def mark_step() -> int:
    """Marks the end of a training step when no torch.optim optimizer does
    (custom loops, frameworks without adapters). Returns the new step."""
    if _session is None:
        return -1
    return _capture.advance_step()


def stats() -> dict[str, Any]:
    """Counters of the running agent: records submitted/written, drops by
    reason, ops, incidents, reconciled incidents, agent errors."""
    return _capture.stats()


def fingerprint(tensor: torch.Tensor) -> int:
    """The content fingerprint meshscope records for a promoted tensor,
    computed on the tensor's own device: equal on every rank (and on CPU and
    GPU) exactly when dtype, shape and values are equal. Works unattached."""
    return _capture.fingerprint(tensor)


@contextlib.contextmanager
def capture(run_dir: str | os.PathLike[str] | None = None, policy: str = "observe",
            level: str = "dtensor") -> Iterator[Session]:
    """with meshscope.capture(policy="auto") as session: ... (detaches on exit
    only if this block attached)."""
    was_attached = attached()
    session = attach(run_dir, policy, level)
    try:
        yield session
    finally:
        if not was_attached:
            detach()


def _exception_site(trace: Any) -> str:
    """'file:line in function' of the innermost user frame of a traceback."""
    import traceback

    skip = tuple(_internal_prefixes())
    for frame in reversed(traceback.extract_tb(trace)):
        path = frame.filename
        if not path.startswith("<") and not os.path.abspath(path).startswith(skip):
            return f"{path}:{frame.lineno} in {frame.name}"
    return ""


def _install_excepthook() -> None:
    """An exception that ends the rank is where it stopped: its text and the
    user's line that raised it go into the rank file (meta `exception`,
    `exception.site`) before Python prints it and exits."""
    previous = sys.excepthook

    def excepthook(kind: type, value: BaseException, trace: Any) -> None:
        try:
            if _session is not None:
                text = str(value).strip().splitlines()
                said = f"{kind.__name__}: {text[0] if text else ''}"[:500]
                site = _exception_site(trace)
                # both, or neither: the launcher's SIGTERM may be on its way
                held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
                try:
                    _capture.record_meta("exception.site", site)
                    _capture.record_meta("exception", said)
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, held)
        except Exception:  # noqa: BLE001 - the agent's trouble stays its own
            pass
        previous(kind, value, trace)

    sys.excepthook = excepthook


def _install_sigterm_flush() -> None:
    """torchrun stops workers with SIGTERM: flush the rank file first, unless
    the program has its own handler."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        _capture.term_handled()
        detach()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    # A Python handler runs only between bytecodes: a rank blocked in a
    # collective would outlive SIGTERM because of it. The guard flushes the
    # rank file and ends the process itself when on_sigterm has not run
    # within a second.
    _capture.install_term_guard()


def _die_with_launcher() -> None:
    """Under `meshscope record`, every process of the job dies with its
    parent (the launcher, or torchrun under it): none is left running when
    the launcher itself is killed."""
    launcher = _setting("launcher_pid")
    if not launcher or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent was gone before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


def attach_from_environment() -> Session | None:
    """Used by the loader that `meshscope record` puts on PYTHONPATH."""
    if not _setting("run_dir"):
        return None
    owner = _setting("attached_pid")
    if owner and owner != str(os.getpid()):
        return None  # a spawned child (DataLoader worker) of a recording rank
    # The job's own processes (torchrun, the ranks) die with the launcher;
    # what a rank starts does not: the signal follows the thread that
    # started a process, and a rank's short-lived thread would take its
    # subprocess with it.
    _die_with_launcher()
    mode = _setting("attach")
    if mode == "rank-env" and "RANK" not in os.environ:
        return None  # the torchrun launcher itself, not a worker
    session = attach(policy=_setting("policy"), level=_setting("level"))
    os.environ[_env_name("attached_pid")] = str(os.getpid())
    return session
