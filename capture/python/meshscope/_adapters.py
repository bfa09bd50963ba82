"""Framework adapters: where steps, phases and tensor provenance come from.

Each adapter is a small patch or hook, recorded in Patches so detach() puts
everything back. They run per module call, per optimizer step or per batch,
never per op (per-op work is in C++)."""

from __future__ import annotations

import functools

import importlib.abc
import importlib.util
import itertools
import os
import sys
import weakref
from typing import Any, Callable, Iterator

import torch

from meshscope import _capture
from meshscope._replicas import ReplicaCheck


class Patches:
    """Attribute replacements and hook handles, undone in reverse order."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def replace(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        own = vars(owner)  # live view: read it before the setattr
        defined_here, original = name in own, own.get(name)
        setattr(owner, name, make(getattr(owner, name)))
        if defined_here:  # the raw attribute (keeps staticmethod/classmethod wrappers)
            self._undo.append(lambda: setattr(owner, name, original))
        else:  # inherited: remove the override
            self._undo.append(lambda: delattr(owner, name))

    def handle(self, handle: Any) -> None:
        self._undo.append(handle.remove)

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


class _Seen:
    """Objects seen while attached, held weakly and keyed by identity: adding
    one seen before is a dict lookup (a WeakSet makes a new weak reference
    on every add), which the root module call does every step."""

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref] = {}

    def add(self, obj: Any) -> None:
        key = id(obj)
        if key not in self._refs:
            # the callback runs while `obj` is freed, before its id can be reused
            self._refs[key] = weakref.ref(obj, lambda _ref: self._refs.pop(key, None))

    def __iter__(self) -> Iterator[Any]:
        alive = (ref() for ref in list(self._refs.values()))
        return (obj for obj in alive if obj is not None)


# Objects seen while attached, for classifying plain tensors at incident time.
_roots = _Seen()  # root modules
_optimizers = _Seen()
# Modules a sharding plan was applied to (parallelize_module,
# distribute_module, fully_shard), by identity, with the user's file and
# line of that call: where a fix for what the plan left out goes.
_plan_sites: dict[int, tuple[weakref.ref, tuple[str, int]]] = {}
# Keras LayoutMaps by identity: the user's name for the map, file and line
# where a key was last set (a missing key goes after that line).
_layout_sites: dict[int, tuple[weakref.ref, str, str, int]] = {}


def _walk_tensors(value: Any, visit: Callable[[torch.Tensor, str], None], path: str = "") -> None:
    if isinstance(value, torch.Tensor):
        visit(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk_tensors(item, visit, f"{path}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk_tensors(item, visit, f"{path}[{i}]")


_KERAS_VARIABLES = "_torch_params."  # where Keras' torch backend keeps a layer's variables


def _keras_layout(current: Any, ndim: int) -> str:
    """A LayoutMap tuple for a variable of `ndim` dims: its last dim on the
    mesh's model axis (the axis that is not the batch axis)."""
    mesh = getattr(current, "device_mesh", None)
    batch = getattr(current, "batch_dim_name", None)
    axes = [a for a in getattr(mesh, "axis_names", ()) if a != batch] or ["model"]
    return repr(tuple([None] * (max(ndim, 1) - 1) + [axes[0]]))


def _keras_plan(path: str, ndim: int) -> str:
    """What the Keras distribution did with variable `path` (e.g.
    'sequential/d1/kernel', `ndim` dims), and the fix in Keras' API."""
    try:
        from keras.src.distribution import distribution_lib

        current = distribution_lib.distribution()
    except Exception:  # noqa: BLE001 - no Keras, or not this version's API
        return ""
    layout_map = getattr(current, "_layout_map", None)
    if current is None or layout_map is None:
        return (f" (Keras variable {path}; no ModelParallel distribution is set: "
                f"keras.distribution.set_distribution(ModelParallel(layout_map=...)))")
    keys = ", ".join(repr(k) for k in list(layout_map)[:8])
    if layout_map[path] is None:
        ref, name, file, line = _layout_sites.get(id(layout_map), (None, "", "", 0))
        alive = ref is not None and ref() is layout_map and name
        site = f"; the LayoutMap is built at {file}:{line}" if alive else ""
        return (f" (Keras variable {path} matches no key of the ModelParallel LayoutMap "
                f"[{keys}]: add one, {name if alive else 'layout_map'}[{path!r}] = "
                f"{_keras_layout(current, ndim)}, or fix the key that was meant to match it){site}")
    return (f" (Keras variable {path} matches the LayoutMap [{keys}], but was created "
            f"outside the distribution: create the model after set_distribution())")


def _python_path(path: str) -> str:
    """A module path as Python: 'layers.0.attn' -> 'layers[0].attn'."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}"
                   for part in path.split(".")).lstrip(".")


def _user_frames() -> Iterator[Any]:
    """The Python frames of user code on this thread, innermost first."""
    from meshscope._attach import _internal_prefixes

    skip = tuple(_internal_prefixes())
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith("<") and not os.path.abspath(path).startswith(skip):
            yield frame
        frame = frame.f_back


def _holder(root: torch.nn.Module) -> tuple[str, str, str]:
    """(the user's name for `root`, a name for a DeviceMesh or "", the
    file) in the innermost user frame that holds `root` in a variable;
    ("model", "", "") when none does."""
    from torch.distributed.device_mesh import DeviceMesh

    for frame in itertools.islice(_user_frames(), 8):
        local = frame.f_locals
        name = next((k for k, v in local.items() if v is root and k != "self"), None)
        if name:
            mesh = next((k for k, v in local.items() if isinstance(v, DeviceMesh)), "")
            return name, mesh, frame.f_code.co_filename
    return "model", "", ""


def _plan_site(root: torch.nn.Module, file: str) -> str:
    """"; the plan is applied at FILE:LINE": the last sharding-plan call on
    `root` or its modules, when it was made in `file`; else ""."""
    modules = {id(m) for m in root.modules()}
    site = None
    for key, (ref, where) in list(_plan_sites.items()):
        if key in modules and ref() is not None:
            site = where
    if not site or site[0] != file:
        return ""
    return f"; the plan is applied at {site[0]}:{site[1]}"


def _torch_plan(root: torch.nn.Module, name: str, kind: str) -> str:
    """Which torch plan left module path `name` out, and the fix in its API,
    in the names of the user's frame that holds the model."""
    module, _, attr = name.rpartition(".")
    model, mesh_name, file = _holder(root)
    mesh = mesh_name or "mesh"
    fsdp = _fully_sharded(root)
    # the site only where the fix's names hold there (fully_shard needs no mesh)
    site = _plan_site(root, file) if file and (mesh_name or fsdp) else ""
    owner = f"{model}.{_python_path(module)}" if module else model
    if kind == "buffer":
        return (f" (no parallelize_module plan distributes buffers: "
                f"{owner}.{attr} = distribute_tensor({owner}.{attr}, {mesh}, [Replicate()])){site}")
    distribute = (f"{owner}.{attr} = nn.Parameter(distribute_tensor({owner}.{attr}, {mesh}, "
                  f"[Replicate()]))")
    if fsdp:  # FSDP2: fully_shard leaves out what no call wrapped
        mesh_arg = f", mesh={mesh_name}" if mesh_name else ""
        return (f" (fully_shard({owner}{mesh_arg}) for its module, or "
                f"fully_shard({model}) for the parameters no inner call took){site}" if module else
                f" (fully_shard({model}) shards the root's own parameters){site}")
    if _transformers_tp(root) and kind == "parameter":
        # transformers' tensor parallelism replicates what its tp_plan does
        # not name as plain tensors on purpose (norm weights): no key makes
        # them DTensors, and its Trainer clips gradients one mesh at a time
        return (f" (transformers' tp_plan keeps {owner}.{attr} a plain tensor, the same on "
                f"every rank, by design: no tp_plan key makes it a DTensor; where its gradient "
                f"is clipped with DTensor gradients, take one norm per mesh as transformers' "
                f"Trainer._mixed_mesh_grad_norm does){site}")
    if not module:  # the root's own parameter: no plan entry can name it
        return f" ({distribute}){site}"
    style = _parallel_style(root, module)
    if not style:  # no ParallelStyle takes this kind of module
        return f" ({distribute}){site}"
    return f" (add {module!r}: {style} to the parallelize_module plan, or {distribute}){site}"


def _transformers_tp(root: torch.nn.Module) -> bool:
    """Whether `root` is a transformers model that transformers' own tensor
    parallelism (tp_plan) distributed."""
    if not type(root).__module__.startswith("transformers."):
        return False
    if not (getattr(root, "_tp_plan", None) or getattr(root, "tp_plan", None)):
        return False
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in root.parameters())


def _fully_sharded(root: torch.nn.Module) -> bool:
    """Whether FSDP2's fully_shard wrapped any module of `root`."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return any(isinstance(m, FSDPModule) for m in root.modules())


def _parallel_style(root: torch.nn.Module, path: str) -> str:
    """The ParallelStyle a parallelize_module plan entry for this module
    would use: Colwise/Rowwise take nn.Linear and nn.Embedding only, and a
    norm layer's weight is replicated by SequenceParallel."""
    try:
        module = root.get_submodule(path)
    except AttributeError:
        return ""
    if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
        return "ColwiseParallel() or RowwiseParallel()"
    if "Norm" in type(module).__name__:
        return "SequenceParallel()"
    return ""


def describe_tensor(tensor: torch.Tensor) -> tuple[Any, ...] | None:
    """Called from C++ when an incident needs classifying: is this plain
    tensor a module's parameter/buffer (A), the gradient of such a parameter
    (A, born where the parameter was: the parameter comes third), or
    optimizer state (E)? For A, which framework plan left it out and how
    that framework fixes it."""
    for root in _roots:
        for kind, named in (("parameter", root.named_parameters), ("buffer", root.named_buffers)):
            for name, p in named(remove_duplicate=False):
                if p is tensor or (kind == "parameter" and p.grad is tensor):
                    where = (_keras_plan(name[len(_KERAS_VARIABLES):], p.dim())
                             if name.startswith(_KERAS_VARIABLES) else _torch_plan(root, name, kind))
                    what = f"{kind} {name} of {type(root).__name__} not in the sharding plan{where}"
                    origin = _capture.ORIGIN_UNSHARDED_PARAM
                    return (origin, what) if p is tensor else (origin, f"gradient of {what}", p)
    for opt in _optimizers:
        kind = type(opt).__name__
        for group_index, group in enumerate(opt.param_groups):
            for key, value in group.items():
                if value is tensor:
                    return (_capture.ORIGIN_OPTIMIZER_STATE,
                            f"optimizer {kind} param_group[{group_index}] '{key}' kept as a tensor")
        for state in opt.state.values():
            for key, value in state.items():
                if value is tensor:
                    return _capture.ORIGIN_OPTIMIZER_STATE, f"optimizer {kind} state '{key}'"
    return None


def _install_modules(patches: Patches) -> None:
    inside = [False]  # within a root module call

    # Under torch.compile the wrapper is traced too: do nothing there (a call
    # into the agent would break the graph); incidents found while Dynamo
    # traces take their frames from Dynamo itself.
    compiling = torch.compiler.is_compiling
    enter_forward, leave_phase = _capture.enter_forward, _capture.leave_phase

    # One wrapper around Module.__call__, not global forward hooks: any global
    # hook sends every module call down nn.Module's slow path (hook lists
    # gathered and walked per call), which cost the training thread about
    # 1 % of its CPU in the capture benchmark. A nested call costs one check;
    # the root call one C++ call each way (phase, label and the tags of its
    # plain tensor arguments).
    def make_call(original: Callable) -> Callable:
        def __call__(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if inside[0] or compiling():
                return original(self, *args, **kwargs)
            previous = enter_forward(self, args)
            if previous is None:  # inside backward or an optimizer step
                return original(self, *args, **kwargs)
            _roots.add(self)
            inside[0] = True
            try:
                return original(self, *args, **kwargs)
            finally:
                inside[0] = False
                leave_phase(previous)
        return __call__

    patches.replace(torch.nn.Module, "__call__", make_call)

    def load_state_dict(original: Callable) -> Callable:
        def wrapper(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            _capture.enter_load_state_dict(True)
            try:
                return original(self, *args, **kwargs)
            finally:
                _capture.enter_load_state_dict(False)
        return wrapper

    patches.replace(torch.nn.Module, "load_state_dict", load_state_dict)


def _install_births(patches: Patches) -> None:
    """Tensors made where no aten op names their birth: torch.frombuffer and
    DLPack imports are tagged like a factory's output; the tensors torch.load
    (or safetensors) reads are tagged as loaded from that file (weights
    being loaded, F, unless it happens while loading data or in forward)."""
    def born(what: str, loaded: bool = False) -> Callable[[Callable], Callable]:
        def make(original: Callable) -> Callable:
            @functools.wraps(original)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                out = original(*args, **kwargs)
                source = what
                if loaded:
                    f = args[0] if args else next(iter(kwargs.values()), None)
                    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else type(f).__name__
                    source = f"{what}({name!r})"
                _walk_tensors(out, lambda t, path: _capture.tag_birth(
                    t, source + (f" {path}" if path else ""), loaded))
                return out
            return wrapper
        return make

    patches.replace(torch, "frombuffer", born("torch.frombuffer"))
    patches.replace(torch, "from_dlpack", born("torch.from_dlpack"))
    patches.replace(torch.utils.dlpack, "from_dlpack", born("torch.from_dlpack"))
    patches.replace(torch, "load", born("torch.load", loaded=True))

    def safetensors(module: Any) -> None:
        patches.replace(module, "load_file", born("safetensors load_file", loaded=True))
        patches.replace(module, "load", born("safetensors load", loaded=True))

    _when_imported(patches, "safetensors.torch", safetensors)


def _install_optimizers(patches: Patches, replicas: ReplicaCheck) -> None:
    from torch.optim import optimizer as optim

    started: dict[int, tuple[int, int]] = {}
    now_ns, enter_phase, leave_phase = _capture.now_ns, _capture.enter_phase, _capture.leave_phase

    @functools.lru_cache(maxsize=64)
    def name_of(kind: type) -> str:
        return f"{kind.__module__}.{kind.__qualname__}"

    def pre(opt: Any, args: tuple, kwargs: dict) -> None:
        _optimizers.add(opt)
        name = name_of(type(opt))
        step = _capture.step()
        if replicas.due(step):  # before the update: what the step starts from
            try:
                replicas.record(opt, step)
            except Exception as error:  # noqa: BLE001 - the agent's trouble stays its own
                _capture.own_error("replicas", f"meshscope: replica check: {error!r}")
        started[id(opt)] = (now_ns(), enter_phase(_capture.PHASE_OPTIMIZER, name + ".step()"))

    def post(opt: Any, args: tuple, kwargs: dict) -> None:
        end = now_ns()
        start, previous = started.pop(id(opt), (end, _capture.PHASE_OTHER))
        params = 0
        for group in opt.param_groups:
            params += len(group["params"])
        _capture.record_optimizer_step(_capture.step(), name_of(type(opt)), start, end, params)
        _capture.advance_step()
        leave_phase(previous)

    patches.handle(optim.register_optimizer_step_pre_hook(pre))
    patches.handle(optim.register_optimizer_step_post_hook(post))


def _install_dataloader(patches: Patches) -> None:
    from torch.utils.data import dataloader

    counter = itertools.count()

    def make_next(original: Callable) -> Callable:
        def __next__(self: Any) -> Any:
            batch = next(counter)
            label = f"DataLoader batch #{batch}"
            previous = _capture.enter_phase(_capture.PHASE_DATA, label)
            try:
                data = original(self)
            finally:
                _capture.leave_phase(previous)
            _walk_tensors(data, lambda t, path: _capture.tag(
                t, _capture.ORIGIN_INPUT_DATA, f"created by {label}{(' ' + path) if path else ''}"))
            return data
        return __next__

    patches.replace(dataloader._BaseDataLoaderIter, "__next__", make_next)


def _install_dtensor(patches: Patches) -> None:
    from torch.distributed.tensor import DTensor

    # Tensor-parallel layers call to_local() in every forward: the wrapper is
    # a C++ method (no Python frame of its own) that calls the original and
    # tags its result, keeping the evidence per call site and layout.
    patches.replace(DTensor, "to_local", lambda original: _capture.stripping(original, False))
    patches.replace(DTensor, "full_tensor", lambda original: _capture.stripping(original, True))


def _install_failures(patches: Patches) -> None:
    """The DTensor calls that fail without dispatching an op meshscope sees
    (a redistribution to an invalid placement, a mesh mismatch in
    from_local), and the wait of a c10d collective (where a peer that left
    or a timeout shows): a failure there is recorded as an incident, with
    meshscope's note on the exception, which is raised as before."""
    import torch.distributed.tensor as dtensor_api
    from torch.distributed.tensor import DTensor, _api

    patches.replace(DTensor, "redistribute",
                    lambda original: _capture.failure_guard(original, "DTensor.redistribute", True))
    patches.replace(DTensor, "from_local",
                    lambda original: _capture.failure_guard(original, "DTensor.from_local", False))
    for module in {_api, dtensor_api}:
        if hasattr(module, "distribute_tensor"):
            patches.replace(module, "distribute_tensor",
                            lambda original: _capture.failure_guard(original, "distribute_tensor",
                                                                    False))
    try:
        from torch._C._distributed_c10d import Work
    except ImportError:  # torch built without distributed
        return

    def make_wait(original: Callable) -> Callable:
        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            waiting = _capture.work_waiting(self)  # the collective this work stands for
            try:
                out = original(self, *args, **kwargs)
            except BaseException as error:
                _capture.work_failed(waiting, error)  # records it and notes it on `error`
                raise
            _capture.work_waited(waiting)  # complete when its backend says so
            return out
        return wait

    patches.replace(Work, "wait", make_wait)


# functional collective -> position of its `group` argument after the tensor
_COLLECTIVES = {"all_gather_tensor": 1, "all_gather_tensor_autograd": 1, "all_reduce": 1,
                "all_reduce_coalesced": 1, "broadcast": 1, "permute_tensor": 1,
                "reduce_scatter_tensor": 2, "reduce_scatter_tensor_autograd": 2,
                "reduce_scatter_tensor_coalesced": 2, "all_to_all_single": 2,
                "all_to_all_single_autograd": 2}


def _group_name(funcol: Any, group: Any) -> str:
    if isinstance(group, tuple) and len(group) == 2:  # (DeviceMesh, mesh dim)
        mesh, dim = group
        names = getattr(mesh, "mesh_dim_names", None)
        return f"mesh dim {names[dim] if names else dim}"
    try:
        return str(funcol._resolve_group_name(group))
    except Exception:  # noqa: BLE001 - a label only
        return type(group).__name__


def _install_collectives(patches: Patches) -> None:
    """The functional collectives DTensor's redistributions and tensor
    parallelism call (looked up through the module at call time), and their
    wait: funcol.wait_tensor, which an AsyncCollectiveTensor's first use and
    DTensor's synchronous redistributions call. The replacements are C++
    functions (no Python frame of their own) that call the original and
    report to meshscope's collective tracker, which follows each collective
    from issue to completion; the NCCL profiler plugin adds GPU times."""
    import torch.distributed._functional_collectives as funcol

    def label(group: Any) -> str:  # called once per group (C++ keeps the labels)
        return _group_name(funcol, group)

    for kind, group_at in _COLLECTIVES.items():
        if hasattr(funcol, kind):
            patches.replace(funcol, kind,
                            lambda original, kind=kind, at=group_at:
                            _capture.collective(original, kind, at, label))
    if hasattr(funcol, "wait_tensor"):
        patches.replace(funcol, "wait_tensor", _capture.wait_tensor)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `install(module)` right after a module is first imported (Keras is
    usually imported after meshscope attaches at interpreter start)."""

    def __init__(self, name: str, install: Callable[[Any], None]) -> None:
        self.name, self.install = name, install

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module
        install = self.install

        def exec_module(module: Any) -> None:
            original(module)
            install(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _when_imported(patches: Patches, name: str, install: Callable[[Any], None]) -> None:
    if name in sys.modules:
        install(sys.modules[name])
        return
    finder = _AfterImport(name, install)
    sys.meta_path.insert(0, finder)
    patches._undo.append(lambda: finder in sys.meta_path and sys.meta_path.remove(finder))


def _install_keras(patches: Patches) -> None:
    """Keras 3 on the torch backend: its optimizers do not use torch.optim,
    and ModelParallel pushes KerasDTensorPromotionMode, which replicates
    every plain tensor it meets; meshscope's mode goes above it so every
    such promotion is recorded (and verified) first."""
    _when_imported(patches, "keras.src.optimizers.base_optimizer",
                   lambda module: _patch_keras_optimizer(patches, module))
    _when_imported(patches, "keras.src.backend.torch.ops.core",
                   lambda module: _patch_keras_promotion(patches, module))
    _when_imported(patches, "keras.src.distribution.distribution_lib",
                   lambda module: _patch_keras_layout_map(patches, module))


def _patch_keras_layout_map(patches: Patches, module: Any) -> None:
    """Where the user sets LayoutMap keys, for the fix that adds a missing one."""
    def make(original: Callable) -> Callable:
        @functools.wraps(original)
        def __setitem__(self: Any, key: Any, layout: Any) -> None:
            original(self, key, layout)
            frame = next(_user_frames(), None)
            if frame is not None:
                name = next((k for k, v in frame.f_locals.items() if v is self), "")
                _layout_sites[id(self)] = (weakref.ref(self), name, frame.f_code.co_filename,
                                           frame.f_lineno)
        return __setitem__

    patches.replace(module.LayoutMap, "__setitem__", make)


def _patch_keras_trainer(patches: Patches, trainer: Any) -> None:
    """Batches reach Keras' train/test/predict steps as plain tensors: input data (D)."""
    counter = itertools.count()

    def make(kind: str) -> Callable[[Callable], Callable]:
        def wrap(original: Callable) -> Callable:
            def step(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
                label = f"Keras {kind} batch #{next(counter)}"
                _walk_tensors(data, lambda t, path: _capture.provenance(t) is None and _capture.tag(
                    t, _capture.ORIGIN_INPUT_DATA, f"created by {label}{(' ' + path) if path else ''}"))
                return original(self, data, *args, **kwargs)
            return step
        return wrap

    for kind in ("train_step", "test_step", "predict_step"):
        if hasattr(trainer.Trainer, kind):
            patches.replace(trainer.Trainer, kind, make(kind))
    trainer.Trainer._meshscope_patched = True
    patches._undo.append(lambda: delattr(trainer.Trainer, "_meshscope_patched"))


def _patch_keras_promotion(patches: Patches, core: Any) -> None:
    if not hasattr(core, "activate_dtensor_promotion"):
        return

    def make(original: Callable) -> Callable:
        def activate_dtensor_promotion(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            from meshscope import _attach

            _attach.raise_mode_to_top()
            # set_distribution() runs after `import keras` completed: the
            # trainer module is fully initialized by now.
            trainer = sys.modules.get("keras.src.backend.torch.trainer")
            if trainer is not None and not hasattr(trainer.Trainer, "_meshscope_patched"):
                _patch_keras_trainer(patches, trainer)
            return out
        return activate_dtensor_promotion

    patches.replace(core, "activate_dtensor_promotion", make)


def _patch_keras_optimizer(patches: Patches, base: Any) -> None:

    def make_apply(original: Callable) -> Callable:
        def apply(self: Any, *args: Any, **kwargs: Any) -> Any:
            _optimizers.add(self) if hasattr(self, "param_groups") else None
            label = f"keras {type(self).__name__}.apply()"
            start = _capture.now_ns()
            previous = _capture.enter_phase(_capture.PHASE_OPTIMIZER, label)
            try:
                return original(self, *args, **kwargs)
            finally:
                _capture.leave_phase(previous)
                _capture.record_optimizer_step(_capture.step(), f"keras.{type(self).__name__}",
                                               start, _capture.now_ns(), 0)
                _capture.advance_step()
        return apply

    patches.replace(base.BaseOptimizer, "apply", make_apply)


def _install_compile(patches: Patches) -> None:
    """torch.compile'd functions: module hooks are traced away inside them, so
    the tensors passed in are tagged at the call (what the root-module hook
    does in eager). A compiled nn.Module keeps its own eager __call__ and
    hooks, so only functions are wrapped."""

    def wrap_compiled(compiled: Any, source: Any) -> Any:
        if isinstance(compiled, torch.nn.Module) or not callable(compiled):
            return compiled
        name = getattr(source, "__qualname__", None) or type(source).__name__

        callee = f"torch.compile'd {name}"  # named "<callee>()" in the evidence

        @functools.wraps(compiled)
        def call(*args: Any, **kwargs: Any) -> Any:
            _capture.tag_inputs(args, callee)
            _capture.tag_inputs(kwargs, callee)
            return compiled(*args, **kwargs)
        return call

    def make(original: Callable) -> Callable:
        @functools.wraps(original)
        def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
            out = original(model, *args, **kwargs)
            if model is None:  # @torch.compile(backend=...): a decorator
                return lambda fn: wrap_compiled(out(fn), fn)
            return wrap_compiled(out, model)
        return compile

    patches.replace(torch, "compile", make)


def _install_plans(patches: Patches) -> None:
    """Where the user applies a sharding plan: parallelize_module,
    distribute_module and FSDP2's fully_shard, as imported from their public
    modules (once per call, never per op)."""
    def make(original: Callable) -> Callable:
        @functools.wraps(original)
        def wrapper(module: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(module, *args, **kwargs)
            if isinstance(module, torch.nn.Module):
                frame = next(_user_frames(), None)
                if frame is not None:
                    key = id(module)
                    ref = weakref.ref(module, lambda _ref: _plan_sites.pop(key, None))
                    _plan_sites.pop(key, None)  # the latest call last
                    _plan_sites[key] = (ref, (frame.f_code.co_filename, frame.f_lineno))
            return out
        return wrapper

    import torch.distributed.tensor as dtensor
    import torch.distributed.tensor.parallel as parallel

    patches.replace(parallel, "parallelize_module", make)
    patches.replace(dtensor, "distribute_module", make)
    try:
        import torch.distributed.fsdp as fsdp
    except ImportError:
        return
    if hasattr(fsdp, "fully_shard"):
        patches.replace(fsdp, "fully_shard", make)


def install(replica_every: int = 0) -> Patches:
    """`replica_every`: the replica check's step interval (0: off)."""
    patches = Patches()
    try:
        _capture.set_parameter_lookup(describe_tensor)
        _install_modules(patches)
        _install_optimizers(patches, ReplicaCheck(replica_every, _roots))
        _install_dataloader(patches)
        _install_births(patches)
        _install_dtensor(patches)
        _install_failures(patches)
        _install_compile(patches)
        _install_collectives(patches)
        _install_keras(patches)
        _install_plans(patches)
    except BaseException:
        patches.restore()
        raise
    patches._undo.insert(0, lambda: _capture.set_parameter_lookup(None))
    return patches


def record_backend() -> None:
    """The process group usually starts after attach(): note its backend."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        _capture.record_meta("backend", str(dist.get_backend()))
        _capture.record_meta("world_size", str(dist.get_world_size()))
