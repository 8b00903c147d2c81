"""One kernel call: bind arguments to HBM tensors, run the body on each LNC core, copy results back.

LNC1 runs in the calling thread (so ``breakpoint()`` works); LNC2 runs one thread per core with
``program_id`` 0 and 1, shared ``shared_hbm``, and a rendezvous for ``core_barrier``/``sendrecv``
that fails with DeadlockError (never hangs) when a core finishes or waits too long (``cores``).
Imports memory, state, config, arch, errors; never torch (torch tensors go through ``adapters``).
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import inspect
import os
import sys
import threading
import types
from collections import Counter
from typing import Callable

import numpy as np

from .. import arch, state, trace
from ..checks import races
from ..config import Settings
from ..errors import DeadlockError, NkiError, RaceError, UnsupportedError
from ..memory import access
from ..memory.buffers import private_hbm, psum, sbuf, shared_hbm
from ..memory.tensor import NkiTensor
from .cores import Rendezvous, run_cores

# Converters for array types other than NumPy, keyed by the type's top-level module name. Each entry
# is a module path whose ``to_numpy(x) -> np.ndarray`` shares memory and ``from_numpy(a, like)``
# returns the caller's kind. Optional hooks: ``to_kernel_array(x, target, name)`` (used instead of
# ``to_numpy``: may check the dtype for ``target`` and reinterpret), ``after_write(array, x)`` (x was
# written) and ``after_run(func)`` (a launch with such arguments succeeded). The torch layer
# registers itself here; the core never imports torch.
ADAPTERS = {"torch": "nkisim.torch.convert"}


def _adapter(value):
    """The adapter module for a non-NumPy array type (ADAPTERS), or None."""
    mod = ADAPTERS.get(type(value).__module__.split(".")[0])
    if mod is None:
        return None
    import importlib
    return importlib.import_module(mod)


def _collect(value, launch, path, found, converted):
    """Pre-pass over an argument (recursively through tuples/lists/dicts): every caller array in
    order, adapter values converted once (``converted[id(value)]``). An adapter may define
    ``to_kernel_array(x, target, name)`` (checks and reinterprets for the target); else ``to_numpy``."""
    if isinstance(value, NkiTensor):
        return
    if isinstance(value, np.ndarray):
        found.append(value)
        return
    conv = _adapter(value)
    if conv is not None:
        arr = converted.get(id(value))
        if arr is None:
            to_arr = getattr(conv, "to_kernel_array", None)
            arr = to_arr(value, launch.target, path) if to_arr else conv.to_numpy(value)
            converted[id(value)] = arr
        found.append(arr)
    elif isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        for i, v in enumerate(value):
            _collect(v, launch, f"{path}[{i}]", found, converted)
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect(v, launch, f"{path}[{k!r}]", found, converted)


def _extent(a: np.ndarray) -> tuple:
    """The [lo, hi) byte addresses an array's elements span."""
    lo = hi = a.__array_interface__["data"][0]
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + a.itemsize


def _view_key(a: np.ndarray) -> tuple:
    return a.__array_interface__["data"][0], a.shape, a.strides, a.dtype


class _Span:
    """One HBM allocation over the memory several overlapping caller arrays share."""
    __slots__ = ("array", "tensor")

    def __init__(self, array):
        self.array, self.tensor = array, None


def _alias_plan(arrays: list) -> dict:
    """How caller arrays that share memory are bound (HBM aliasing, as on hardware), by ``id``:
    ("same", first) for an array that is the same view of the same memory as an earlier one (one
    HBM tensor); ("span", _Span, shape, strides, offset) for overlapping but different views of
    one dtype: each is a view (element strides/offset) of ONE allocation over the union of their
    bytes, so a write through one is seen by the others. Arrays whose bytes overlap in a way that
    cannot be one allocation (different dtypes, strides not a multiple of the item size) keep one
    allocation each (no plan entry)."""
    items, seen = [], set()
    for i, a in enumerate(arrays):
        if a.size and id(a) not in seen:
            seen.add(id(a))
            items.append((i, a, *_extent(a)))
    if len(items) < 2:
        return {}
    items.sort(key=lambda it: it[2])
    groups, cur, cur_hi = [], [], 0
    for it in items:
        if cur and it[2] < cur_hi:
            cur.append(it)
            cur_hi = max(cur_hi, it[3])
        else:
            groups.append(cur)
            cur, cur_hi = [it], it[3]
    groups.append(cur)
    plan: dict = {}
    for g in groups:
        if len(g) < 2:
            continue
        members = [it[1] for it in sorted(g, key=lambda it: it[0])]      # argument order
        if len({_view_key(a) for a in members}) == 1:
            plan.update({id(a): ("same", members[0]) for a in members[1:]})
            continue
        dt, isz = members[0].dtype, members[0].itemsize
        lo, hi = g[0][2], max(it[3] for it in g)
        if any(a.dtype != dt or any(s % isz for s in a.strides)
               or (_view_key(a)[0] - lo) % isz for a in members) or (hi - lo) % isz:
            continue
        low = g[0][1]
        if low.ndim:
            low = low[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in low.strides)]
        span = _Span(np.lib.stride_tricks.as_strided(
            low, shape=((hi - lo) // isz,), strides=(isz,),
            writeable=all(a.flags.writeable for a in members)))
        for a in members:
            plan[id(a)] = ("span", span, a.shape or (1,), tuple(s // isz for s in a.strides) or (1,),
                           (_view_key(a)[0] - lo) // isz)
    return plan


def _wrap(arr, launch, path, buffer):
    t = access.wrap_array(arr, buffer, path, launch.settings.precise_fp, launch.target)
    if launch.recording is not None:            # ids appear in events only
        t.alloc.id = _arg_id(path, launch.param_names)
    if launch.settings.detect_races:
        t.alloc.watch = races.watch_access
    return t


def _param_names(func) -> tuple:
    """The kernel's positional parameter names (empty when its signature cannot be read)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _arg_id(path: str, names: tuple) -> str:
    """An argument's allocation id in events: ``arg:`` and the kernel parameter it was passed
    as, with any index into a tuple/list/dict argument (``arg:x``, ``arg:weights[1]``);
    positional arguments beyond the named parameters keep their position (``arg:3``)."""
    rest = path[len("argument "):]
    head, bracket, tail = rest.partition("[")
    if head.isdigit():
        i = int(head)
        head = names[i] if i < len(names) else head
    elif head.startswith("'") and head.endswith("'"):
        head = head[1:-1]
    return f"arg:{head}{bracket}{tail}"


def _bind_array(arr, conv, launch, path, bound, buffer, plan):
    for a, t, _ in bound:          # the same array passed twice is one HBM tensor
        if a is arr:
            return t
    hit = plan.get(id(arr))
    if hit is None:
        t = _wrap(arr, launch, path, buffer)
    elif hit[0] == "same":         # another object viewing the same memory the same way
        return next(t for a, t, _ in bound if a is hit[1])
    else:
        span = hit[1]
        if span.tensor is None:
            span.tensor = _wrap(span.array, launch, path, buffer)
        t = NkiTensor(span.tensor.alloc, hit[2], hit[3], hit[4])
    bound.append((arr, t, conv))
    return t


def _bind(value, launch, path, bound, buffer, plan=None, converted=None):
    """Replace arrays in an argument (recursively through tuples/lists/dicts) with HBM tensors;
    ``plan`` (``_alias_plan``) makes arguments that share memory share HBM."""
    plan = {} if plan is None else plan
    if isinstance(value, NkiTensor):
        return value
    if isinstance(value, np.ndarray):
        return _bind_array(value, None, launch, path, bound, buffer, plan)
    conv = _adapter(value)
    if conv is not None:
        arr = (converted or {}).get(id(value))
        if arr is None:
            arr = conv.to_numpy(value)
        return _bind_array(arr, (conv, value), launch, path, bound, buffer, plan)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_bind(v, launch, f"{path}[{i}]", bound, buffer, plan, converted)
                     for i, v in enumerate(value))
    if isinstance(value, list):
        return [_bind(v, launch, f"{path}[{i}]", bound, buffer, plan, converted)
                for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _bind(v, launch, f"{path}[{k!r}]", bound, buffer, plan, converted)
                for k, v in value.items()}
    return value


def _same_view(value: NkiTensor, t: NkiTensor) -> bool:
    return value is t or (value.storage is t.storage and value.offset == t.offset
                          and value.shape == t.shape and value.strides == t.strides)


def _unbind(value, by_alloc, kind):
    """Turn returned tensors into arrays of the caller's kind (a written input comes back as itself)."""
    if isinstance(value, NkiTensor):
        for arr, t, conv in by_alloc.get(id(value.alloc), ()):
            if _same_view(value, t):
                return conv[1] if conv else arr
        out = access.to_numpy(value, own=True)
        if kind is not None:
            return kind[0].from_numpy(out, kind[1])
        return out
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_unbind(v, by_alloc, kind) for v in value)
    if isinstance(value, list):
        return [_unbind(v, by_alloc, kind) for v in value]
    if isinstance(value, dict):
        return {k: _unbind(v, by_alloc, kind) for k, v in value.items()}
    return value


# Names the NKI tracer provides inside every kernel (the official quick start uses ``sbuf.view``).
_KERNEL_KEYWORDS = {"sbuf": sbuf, "psum": psum, "hbm": private_hbm, "private_hbm": private_hbm,
                    "shared_hbm": shared_hbm}


class _KernelGlobals(dict):
    """A kernel's globals plus the NKI keywords it uses without defining (module names win)."""

    def __init__(self, module_globals):
        super().__init__()
        self.module_globals = module_globals

    def __missing__(self, key):
        try:
            return self.module_globals[key]
        except KeyError:
            if key in _KERNEL_KEYWORDS:
                value = self[key] = _KERNEL_KEYWORDS[key]
                return value
            raise


@functools.lru_cache(maxsize=1024)
def _global_names(code) -> frozenset:
    """Names a code object (and the functions nested in it) loads as globals (not attributes)."""
    import dis
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(i.argval for i in dis.get_instructions(c)
                     if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return frozenset(names)


def _with_keywords(func):
    """``func`` itself, or (only when its code uses an NKI keyword its module does not define) a
    copy whose global lookups also see the keywords. The module is never modified."""
    code = getattr(func, "__code__", None)
    if code is None:
        return func
    names = _global_names(code)
    g = func.__globals__
    missing = [n for n in _KERNEL_KEYWORDS if n in names and n not in g and not hasattr(builtins, n)]
    if not missing:
        return func
    clone = types.FunctionType(code, _KernelGlobals(g), func.__name__, func.__defaults__, func.__closure__)
    clone.__kwdefaults__ = func.__kwdefaults__
    return functools.update_wrapper(clone, func)


def _finish_core(core) -> None:
    """When a core's kernel body returns: check its on-chip capacity over the whole run."""
    if core.memory is not None:
        core.memory.check(record=core.launch.record)


def _report(func, found) -> None:
    """Print every finding of a findings="all" run, grouped by rule (error class), to stderr."""
    groups: dict = {}
    for e in found:
        groups.setdefault(type(e).__name__, []).append(e)
    lines = [f"nkisim: {len(found)} finding(s) in kernel {getattr(func, '__name__', func)}"]
    for kind, errs in groups.items():
        lines.append(f"  {kind} ({len(errs)}):")
        lines.extend(f"    {e}" for e in errs)
    print("\n".join(lines), file=sys.stderr)


def _def_site(func) -> str:
    """``file:line`` of the kernel's ``def``: the location of a launch error, which no instruction
    line of the kernel caused (Decision: better than the caller's line, which is not kernel code)."""
    code = getattr(func, "__code__", None)
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code is not None else "?"


def run(func: Callable, args: tuple, kwargs: dict, *, lnc: int = 1, program_ndim: int = 0,
        settings: Settings | None = None, findings: list | None = None):
    """Simulate ``func(*args, **kwargs)`` on ``lnc`` cores; return its outputs as caller arrays.

    Arrays become HBM tensors (in place where possible, see ``access.wrap_array``); a kernel that
    raises leaves the caller's arrays exactly as they were; after success, its writes to its
    arguments are in the caller's arrays.
    With ``settings.findings == "all"`` broken rules inside instructions are recorded, not raised;
    they are printed grouped by rule and appended to ``findings`` (if given).
    Raises: any NkiError from the kernel; UnsupportedError for an LNC the target lacks (located at
    the kernel's ``def`` line).
    """
    settings = settings or Settings.from_env()
    target = arch.get(settings.target)
    if lnc not in (1, 2):
        raise UnsupportedError("nki.jit", f"launch grid [{lnc}] is not supported; use kernel[1] or kernel[2] (LNC2)",
                               where=_def_site(func))
    if lnc > target.lnc_max:
        raise UnsupportedError("nki.jit", f"LNC{lnc} needs a target with {lnc} cores per logical core; "
                                          f"{target.name} has {target.lnc_max}", where=_def_site(func))
    user_func, func = func, _with_keywords(func)
    launch = state.LaunchState(settings, target, lnc, program_ndim)
    launch.recording = trace.active()
    launch.param_names = _param_names(user_func) if launch.recording is not None else ()
    if launch.recording is not None:
        launch.fast_counts = Counter()
    buffer = shared_hbm if lnc > 1 else private_hbm
    found: list = []
    converted: dict = {}
    for i, a in enumerate(args):
        _collect(a, launch, f"argument {i}", found, converted)
    for k, v in kwargs.items():
        _collect(v, launch, f"argument {k!r}", found, converted)
    plan = _alias_plan(found)
    bound: list = []
    args = tuple(_bind(a, launch, f"argument {i}", bound, buffer, plan, converted)
                 for i, a in enumerate(args))
    kwargs = {k: _bind(v, launch, f"argument {k!r}", bound, buffer, plan, converted)
              for k, v in kwargs.items()}
    kind = next(((b[2][0], b[2][1]) for b in bound if b[2] is not None), None)

    try:
        with _gc_paused(settings.fast_paths):
            if lnc == 1:
                core = state.CoreState(launch, 0)
                token = state.current.set(core)
                try:
                    result = func(*args, **kwargs)
                    _finish_core(core)
                finally:
                    state.current.reset(token)
            else:
                result = _run_lnc(func, args, kwargs, launch)
    except BaseException as exc:
        _hand_over_events(launch)
        for _, t, _ in reversed(bound):
            access.restore(t)
        if launch.findings:
            found = launch.findings + ([exc] if isinstance(exc, NkiError) else [])
            _report(func, found)
            if findings is not None:
                findings.extend(found)
        raise
    _hand_over_events(launch)
    if launch.findings:
        _report(func, launch.findings)
        if findings is not None:
            findings.extend(launch.findings)

    by_alloc: dict = {}
    for arr, t, conv in bound:
        by_alloc.setdefault(id(t.alloc), []).append((arr, t, conv))
        access.copy_back(t, arr)
        if t.alloc.written and conv is not None and hasattr(conv[0], "after_write"):
            conv[0].after_write(arr, conv[1])
    if kind is not None and hasattr(kind[0], "after_run"):
        kind[0].after_run(user_func)
    return _unbind(result, by_alloc, kind)


_GC_LOCK = threading.Lock()
_GC_PAUSES = [0, False]      # running launches; whether the collector was on before the first


def _hand_over_events(launch) -> None:
    """A recorded launch's events (per core, issue order) go to the active recording."""
    rec = launch.recording
    if rec is not None:
        launch.recording = None
        rec.add_launch([ev for _, ev in sorted(launch.core_events, key=lambda ce: ce[0])],
                       launch.fast_counts)


@contextlib.contextmanager
def _gc_paused(enabled: bool = True):
    """Decision (speed): Python's cyclic garbage collector is paused while kernels run and
    resumed when the last running launch ends (if it was on). A kernel makes thousands of small
    objects (tiles, views, records) that reference counting frees and that form no cycles; the
    collector's passes over them cost 3-9 % of a 512^3 tiled matmul's time (measured). Known
    limit: a ``gc.disable()`` made by another thread while a kernel runs is undone when the
    launch ends (the collector state is process-wide). A fast path: off with fast_paths=False."""
    if not enabled:
        yield
        return
    with _GC_LOCK:
        if _GC_PAUSES[0] == 0:
            _GC_PAUSES[1] = gc.isenabled()
            gc.disable()
        _GC_PAUSES[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSES[0] -= 1
            if _GC_PAUSES[0] == 0 and _GC_PAUSES[1]:
                gc.enable()


_BLAS = None


def _blas_share(n_cores: int):
    """Decision: while n simulated cores run as threads, each core's BLAS gets cpu_count // n
    threads (at least 1), so the cores do not oversubscribe the CPU (many small matmuls otherwise
    stall on a 2-CPU machine). The limit is process-wide and lifted when the launch ends."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=max(1, (os.cpu_count() or 1) // n_cores), user_api="blas")


def _run_lnc(func, args, kwargs, launch):
    with _blas_share(launch.lnc):
        return run_cores(func, args, kwargs, launch, _finish_core)


__all__ = ["run", "Rendezvous", "ADAPTERS"]
