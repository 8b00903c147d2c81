"""One kernel call: bind arguments to HBM tensors, run the body on each LNC core, copy results back.

LNC1 runs in the calling thread (so ``breakpoint()`` works); LNC2 runs its two cores
cooperatively in the calling thread too (``cores``: greenlets, switching only where a core waits)
with ``program_id`` 0 and 1, shared ``shared_hbm``, and a rendezvous for ``core_barrier``/``sendrecv``
that fails with DeadlockError (never hangs) as soon as no core can progress.
Imports memory, state, config, arch, errors; never torch (torch tensors go through ``adapters``).
"""
from __future__ import annotations

import builtins
import contextlib
import contextvars
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
from ..errors import FindingsError, KernelArgumentError, MemorySpaceError, NkiError, UnsupportedError
from ..memory import access
from ..memory.buffers import ON_CHIP, private_hbm, psum, sbuf, shared_hbm
from ..memory.tensor import NkiTensor
from .cores import Rendezvous, run_cores, take_shared_turn

# Converters for array types other than NumPy, keyed by the type's top-level module name. Each entry
# is a module path whose ``to_numpy(x) -> np.ndarray`` shares memory and ``from_numpy(a, like)``
# returns the caller's kind. Optional hooks: ``to_kernel_array(x, target, name)`` (used instead of
# ``to_numpy``: may check the dtype for ``target`` and reinterpret), ``after_write(array, x)`` (x was
# written) and ``after_run(func)`` (a launch with such arguments succeeded). The torch layer
# registers itself here; the core never imports torch. JAX arrays (``jaxlib`` types) go through
# ``runtime.jax_arrays``, which imports no jax either.
ADAPTERS = {"torch": "nkisim.torch.convert", "jaxlib": "nkisim.runtime.jax_arrays",
            "jax": "nkisim.runtime.jax_arrays"}


def _adapter(value):
    """The adapter module for a non-NumPy array type (ADAPTERS), or None (remembered per type;
    ``ADAPTERS`` changed since clears the memo)."""
    tv = type(value)
    hit = _ADAPTER_OF.get(tv)
    if hit is not None and hit[0] == ADAPTERS:
        return hit[1]
    mod = ADAPTERS.get(tv.__module__.split(".")[0])
    conv = None
    if mod is not None:
        import importlib
        conv = importlib.import_module(mod)
    if len(_ADAPTER_OF) >= 256:
        _ADAPTER_OF.clear()
    _ADAPTER_OF[tv] = (dict(ADAPTERS), conv)
    return conv


_ADAPTER_OF: dict = {}    # value type -> (ADAPTERS when looked up, adapter module or None)


def _collect(value, launch, path, found, converted, in_list=False):
    """Pre-pass over an argument (recursively through tuples/lists/dicts): every caller array in
    order, adapter values converted once (``converted[id(value)]``). An adapter may define
    ``to_kernel_array(x, target, name)`` (checks and reinterprets for the target); else ``to_numpy``.
    A list without arrays raises (``_reject_list``); what a list holding arrays holds is not
    checked again (``in_list``)."""
    if isinstance(value, NkiTensor):
        return
    if getattr(type(value), "is_per_rank", False):      # ranks.PerRank outside a multi-rank launch
        raise KernelArgumentError("kernel argument", f"{_arg_name(path, launch.param_names)} is "
                                  f"nki.per_rank(...), which only a multi-rank launch takes: run "
                                  f"nki.simulate(kernel, ranks=N)")
    if isinstance(value, np.ndarray):
        _check_size(value, launch, path)
        found.append(value)
        return
    conv = _adapter(value)
    if conv is not None:
        arr = converted.get(id(value))
        if arr is None:
            to_arr = getattr(conv, "to_kernel_array", None)
            arr = to_arr(value, launch.target, path) if to_arr else conv.to_numpy(value)
            converted[id(value)] = arr
        _check_size(arr, launch, path)
        found.append(arr)
    elif isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        is_list = isinstance(value, list)
        if is_list and not in_list:
            _reject_list(value, launch, path)
        for i, v in enumerate(value):
            _collect(v, launch, f"{path}[{i}]", found, converted, in_list or is_list)
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect(v, launch, f"{path}[{k!r}]", found, converted, in_list)


def _check_size(a: np.ndarray, launch, path: str) -> None:
    """An argument larger than the target's HBM raises CapacityError before it is copied (a
    stride-0 view of a few bytes may stand for terabytes)."""
    if a.size * a.itemsize > launch.target.hbm_bytes:
        access.check_hbm_size("kernel argument", _arg_name(path, launch.param_names), a.size * a.itemsize,
                              launch.target)


def _arg_name(path: str, names: tuple) -> str:
    """``argument 'x'`` (``argument 'weights[1]'``) for an argument's path, by parameter name."""
    return f"argument {_arg_id(path, names)[len('arg:'):]!r}"


def _holds_array(value) -> bool:
    if isinstance(value, (np.ndarray, NkiTensor)) or _adapter(value) is not None:
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_array(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_array(v) for v in value.values())
    return False


def _reject_list(value, launch, path: str) -> None:
    """KernelArgumentError (a TypeError) for a list argument of numbers or other Python values.

    Source: aws-neuron-sdk nki/migration/index.rst ("Replace list kernel arguments with tuples":
    the NKI 0.3.0 compiler does not support ``list`` as a kernel argument type).
    Decision: a list that holds arrays (or tensors) is still accepted and bound like a tuple, as
    kernels written for earlier NKI releases pass lists of tensors; only lists without any array
    (``stride=[1, 1]``) are rejected, naming the kernel parameter they were passed as."""
    if not _holds_array(value):
        name = _arg_name(path, launch.param_names)
        raise KernelArgumentError("kernel argument", f"{name} is a list; NKI kernels do not take list "
                                                     f"arguments: pass a tuple instead")


def _self_overlapping(a: np.ndarray) -> bool:
    """True when two elements of ``a`` share memory: a stride-0 dimension of size > 1
    (``np.broadcast_to``, torch ``expand``) or overlapping ``as_strided`` windows.
    Exact: dims sorted by stride, each must step past everything the smaller ones span; when
    that does not hold the element addresses are compared (arrays up to 2**24 elements; larger
    ones are taken as not overlapping, as torch does when the check is "too hard"). The answer
    depends on the shape, strides and item size only: kept per layout (every launch asks it of
    every argument)."""
    key = (a.shape, a.strides, a.itemsize)
    hit = _OVERLAPPING.get(key)
    if hit is None:
        if len(_OVERLAPPING) >= 4096:
            _OVERLAPPING.clear()
        hit = _OVERLAPPING[key] = _overlapping(a)
    return hit


_OVERLAPPING: dict = {}     # (shape, byte strides, item size) -> _self_overlapping's answer


def _overlapping(a: np.ndarray) -> bool:
    dims = sorted((abs(st), n) for n, st in zip(a.shape, a.strides) if n > 1)
    if not dims or a.size == 0:
        return False
    if dims[0][0] == 0:
        return True
    span = a.itemsize
    for st, n in dims:
        if st < span:
            break
        span += st * (n - 1)
    else:
        return False
    if a.size > 2 ** 24:
        return False
    offsets = np.zeros(1, np.int64)
    for st, n in dims:
        offsets = (offsets[:, None] + st * np.arange(n, dtype=np.int64)).ravel()
    offsets.sort()
    return bool((np.diff(offsets) < a.itemsize).any())


_OVERLAP_WHY = ("a view whose elements overlap in memory (a stride-0 or overlapping view such as "
                "np.broadcast_to, as_strided or torch expand): more than one element of the written-to "
                "tensor refers to a single memory location; the kernel cannot write it (pass a copy: "
                ".copy() / .clone())")


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
    allocation each (("apart",): each read sees the memory as it is then). Decision: a
    self-overlapping array (which the kernel may only read) is never part of a span: it keeps its
    own copy, taken when the kernel starts."""
    if len(arrays) < 2:         # nothing to share memory with
        return {}
    items, seen = [], set()
    for i, a in enumerate(arrays):
        if a.size and id(a) not in seen and not _self_overlapping(a):
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
            plan.update({id(a): ("apart",) for a in members})    # one allocation each
            continue
        low = g[0][1]
        if low.ndim:
            low = low[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in low.strides)]
        span = _Span(np.lib.stride_tricks.as_strided(
            low, shape=((hi - lo) // isz,), strides=(isz,),
            writeable=all(a.flags.writeable for a in members)))
        for a in members:
            plan[id(a)] = ("span", span, a.shape, tuple(s // isz for s in a.strides),
                           (_view_key(a)[0] - lo) // isz)
    return plan


def _wrap(arr, launch, path, buffer):
    """The HBM tensor of one caller array. Decision: a 0-d array is a 0-d HBM tensor (shape (), as
    NumPy and torch give it; reshape it to (1, 1) to load it), so outputs made with its shape and
    the argument itself come back 0-d. A self-overlapping array may be read; its first write
    raises MemorySpaceError, as torch rejects in-place writes to expanded tensors."""
    t = access.wrap_array(arr, buffer, path, launch.settings.precise_fp, launch.target)
    if arr.ndim == 0:
        t = NkiTensor(t.alloc, (), (), 0)
    if _self_overlapping(arr):
        t.alloc.snapshot = access.NoWrites(_OVERLAP_WHY)
    if launch.recording is not None:            # ids appear in events only
        t.alloc.id = _arg_id(path, launch.param_names)
    if launch.shared_watch is not None:
        t.alloc.watch = launch.shared_watch
    elif launch.settings.detect_races:
        t.alloc.watch = races.watch_access
    return t


def _shared_watch(settings):
    """LNC2: the access hook of every shared_hbm allocation -- the shared-HBM turn (``cores``),
    then race detection when it is on."""
    if not settings.detect_races:
        return take_shared_turn

    def watch(t, kind, accumulation):
        take_shared_turn(t, kind, accumulation)
        races.watch_access(t, kind, accumulation)
    return watch


def _names_of(func) -> tuple:
    """``_param_names(func)``, remembered per function."""
    try:
        return _param_names(func)
    except TypeError:           # an unhashable callable
        return _param_names.__wrapped__(func)


@functools.lru_cache(maxsize=256)
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
    if hit is None or hit[0] == "apart":
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
    """When a core's kernel body returns: check its on-chip capacity over the whole run (and tell
    a multi-rank launch's World that this core will issue no more collectives)."""
    if core.memory is not None:
        core.memory.check(record=core.launch.record)
    seat = getattr(core.launch, "seat", None)
    if seat is not None:
        seat.core_finished(core.core_id)


def _report(func, found, stopped=None) -> None:
    """Print every finding of a findings="all"/"warn" run, grouped by rule (error class), to stderr;
    identical findings (a loop repeating one broken rule) print once, with their count. ``stopped``:
    the exception that ended the launch (an always-fatal NkiError among ``found``, or a Python
    error the kernel raised after a skipped instruction), named on the header line."""
    groups: dict = {}
    for e in found:
        groups.setdefault(type(e).__name__, Counter())[str(e)] += 1
    head = f"nkisim: {len(found)} finding(s) in kernel {getattr(func, '__name__', func)}"
    if isinstance(stopped, NkiError):
        head += f"; the kernel stopped at the {type(stopped).__name__}, which is always fatal"
    elif stopped is not None:
        head += (f"; then the kernel raised {type(stopped).__name__} (the result of a skipped call "
                 f"is a placeholder tile, or None)")
    lines = [head]
    for kind, texts in groups.items():
        lines.append(f"  {kind} ({sum(texts.values())}):")
        lines.extend(f"    {t}" + (f"  (x{n})" if n > 1 else "") for t, n in texts.items())
    print("\n".join(lines), file=sys.stderr)


# ---- which findings a findings="warn"/"all" launch can go on past -------------------------------

_FATAL_WHY = (
    # (error classes, ops) -> why the kernel cannot go on; the first match wins
    ((), ("tensor indexing", "tensor assignment", "index expression", "block tensor indexing",
          "block tensor assignment", "mask", "nested mask"),
     "an access outside a tensor, or a view that does not fit it, has no elements to go on with"),
    (("LoopLimitError",), (), "the loop would never end"),
    (("DeadlockError",), (), "the cores would wait for each other forever"),
    ((), ("nki.jit", "nki.simulate", "kernel argument", "kernel result"),
     "the launch itself (its grid, arguments or results) is invalid"),
)


def _fatal_reason(exc: NkiError) -> str:
    """Why the kernel cannot go on past ``exc`` (a rule broken outside any instruction)."""
    name, op = type(exc).__name__, exc.op
    if op.startswith("NkiTensor"):
        return _FATAL_WHY[0][2]
    for classes, ops, why in _FATAL_WHY:
        if name in classes or op in ops:
            return why
    if op in _ALLOCATING:
        return "no tensor was allocated to go on with"
    return f"{op} is no instruction that could be skipped"


_ALLOCATING = frozenset({"nl.ndarray", "nl.zeros", "nl.ones", "nl.full", "nl.empty_like", "nl.zeros_like",
                         "nl.ones_like", "nl.full_like", "nl.shared_constant", "nl.shared_identity_matrix"})


def mark_fatal(exc: BaseException, mode: str) -> None:
    """Say in ``exc``'s message that its rule is always fatal: the NkiError reached the launch
    under findings="warn"/"all" (``mode``), so no instruction recorded it (see ``run``). Sets
    ``exc.fatal = True``; idempotent; nothing for other exceptions or mode "first"."""
    if mode == "first" or not isinstance(exc, NkiError) or isinstance(exc, FindingsError) \
            or getattr(exc, "fatal", False):
        return
    exc.fatal = True
    exc.what = (f"{exc.what}; always fatal, even with findings=\"{mode}\": {_fatal_reason(exc)}, "
                f"so the kernel stopped here")
    exc.args = (f"{exc.op}: {exc.what} ({exc.where})",)


def _findings_error(func, found: list) -> FindingsError:
    """The one error a findings="all" launch with findings raises: every finding in ``.findings``;
    the message counts them by kind and quotes the first (located at the first's line), and names
    the always-fatal one the kernel stopped at, if it did. Decision: its op is "kernel launch",
    whatever the entry point (a plain ``@nki.jit`` call under NKI_SIMULATOR=1, ``nki.simulate``,
    a profile, a Beta 1 kernel, one rank of several): ``run`` does not know which it was."""
    counts = Counter(type(e).__name__ for e in found)
    kinds = ", ".join(f"{n} {k}" for k, n in counts.items())
    first, last = found[0], found[-1]
    stop = ""
    if getattr(last, "fatal", False) and len(found) > 1:
        stop = f"; the kernel stopped at the last, an always-fatal {type(last).__name__} ({last.where})"
    return FindingsError("kernel launch", f"kernel {getattr(func, '__name__', func)} broke {len(found)} "
                                          f"rule(s) ({kinds}); the first: {first.op}: {first.what}{stop}",
                          where=first.where, findings=found)


def _check_result(value, func) -> None:
    """MemorySpaceError for an SBUF/PSUM tensor among the kernel's results (through tuples, lists
    and dicts), located at the kernel's ``def``: kernels return HBM tensors.
    Source: aws-neuron-sdk nki/get-started/about/memory-hierarchy-overview.rst ("the input and
    output parameters to NKI kernels must be HBM tensor references"; outputs "must be stored back
    into the HBM from SBUF before the host can access them"). A sub-kernel (a kernel called from a
    running kernel) is a function call and may return tiles."""
    if isinstance(value, NkiTensor):
        if value.buffer in ON_CHIP:
            raise MemorySpaceError(
                "kernel result", f"the kernel returned an on-chip tensor {list(value.shape)} in "
                                 f"{value.buffer}; kernels return HBM tensors: store it into an "
                                 f"nl.ndarray(..., buffer=nl.shared_hbm) and return that", where=_def_site(func))
    elif isinstance(value, (tuple, list)):
        for v in value:
            _check_result(v, func)
    elif isinstance(value, dict):
        for v in value.values():
            _check_result(v, func)


def _quiet(func):
    """``func`` run under ``np.errstate(all="ignore")`` (for an LNC2 core: NumPy's error state
    lives in the contextvars context, and each core runs in a fresh one)."""
    def run_quietly(*args, **kwargs):
        with np.errstate(all="ignore"):
            return func(*args, **kwargs)
    return run_quietly


def _def_site(func) -> str:
    """``file:line`` of the kernel's ``def``: the location of a launch error, which no instruction
    line of the kernel caused (Decision: better than the caller's line, which is not kernel code)."""
    code = getattr(func, "__code__", None)
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code is not None else "?"


def run(func: Callable, args: tuple, kwargs: dict, *, lnc: int = 1, program_ndim: int = 0,
        settings: Settings | None = None, findings: list | None = None, seat=None):
    """Simulate ``func(*args, **kwargs)`` on ``lnc`` cores; return its outputs as caller arrays.

    ``seat`` (a ``runtime.ranks.RankSeat``) makes this launch one rank of a multi-rank launch.

    Arrays become HBM tensors (in place where possible, see ``access.wrap_array``); a kernel that
    raises leaves the caller's arrays exactly as they were; after success, its writes to its
    arguments are in the caller's arrays, except in a timing-only recording
    (``trace.record(timing_only=True)``, ``nkisim.profile(compute=False)``), which leaves them
    exactly as they were too (its values are not the kernel's).
    With ``settings.findings`` "all" or "warn", broken rules inside instructions are recorded, not
    raised; at the end they are printed grouped by rule and appended to ``findings`` (if given);
    then "all" raises one FindingsError holding them all (the caller's arrays restored: a kernel
    whose rules broke does not look like a success), "warn" returns normally.
    Decision (what "warn" and "all" can go on past, for every rule kind): a rule is skippable
    where it is broken, not by its error class. Every rule broken inside an instruction (any
    ``nisa`` op, an ``nl`` function that issues instructions, a collective; each error class:
    shape, dtype, memory space, bounds of an access pattern, capacity, race, uninitialised read,
    argument, engine, unsupported, and a deadlock at a sync point: ``core_barrier``,
    ``sendrecv``, a collective) is a finding the kernel goes on past: the instruction is
    skipped (its destination keeps its old values; an ``nl`` function returns a placeholder
    tile). A rule broken outside any instruction is always fatal, in every mode: there is nothing
    to skip and no value to go on with. These are: indexing a tensor (a slice or index outside
    it, a reshape or view that does not fit it, an index expression or mask nkisim cannot
    build: BoundsError, ShapeError, UnsupportedError), allocating one (``nl.ndarray`` and the
    other creation functions: ShapeError, DtypeError, MemorySpaceError), a dynamic loop over its
    limit (LoopLimitError: ``while``, ``nl.while_loop``, ``nl.dynamic_range``), and the launch itself
    (its grid or LNC, its arguments, its results: UnsupportedError, KernelArgumentError,
    CapacityError, MemorySpaceError). Under "warn" or "all" such an error ends the launch with
    its message saying so ("...; always fatal, even with findings="warn": <why>, so the kernel
    stopped here", ``mark_fatal``; ``.fatal`` is True): "warn" raises that error itself (after
    printing the findings before it), "all" raises the FindingsError holding them all, that one
    last. A Python error the kernel raises after a skipped instruction (it could not use the
    placeholder) propagates as it is; the findings report names it.
    Decision: NumPy's floating-point warnings (NaN/inf arithmetic, casts) are silenced for the
    whole launch (``np.errstate(all="ignore")``, entered once per launch and once per LNC2
    core): NaN and inf are values the hardware computes, not errors of the caller's code.
    Raises: any NkiError from the kernel; FindingsError (findings="all"); KernelArgumentError for a
    list argument; CapacityError for an argument larger than the target's HBM; MemorySpaceError
    for an on-chip result; UnsupportedError for an LNC the target lacks (located at the kernel's
    ``def`` line).
    """
    settings = settings or Settings.from_env()
    try:
        return _run(func, args, kwargs, lnc, program_ndim, settings, findings, seat)
    except NkiError as exc:
        mark_fatal(exc, settings.findings)     # e.g. a launch error, raised before the kernel runs
        raise


def _run(func, args, kwargs, lnc, program_ndim, settings, findings, seat):
    target = arch.get(settings.target)
    if lnc not in (1, 2):
        raise UnsupportedError("nki.jit", f"launch grid [{lnc}] is not supported; use kernel[1] or kernel[2] (LNC2)",
                               where=_def_site(func))
    if lnc > target.lnc_max:
        raise UnsupportedError("nki.jit", f"LNC{lnc} needs a target with {lnc} cores per logical core; "
                                          f"{target.name} has {target.lnc_max}", where=_def_site(func))
    hook = LAUNCH_HOOK.get()
    if hook is not None and seat is None:        # `nkisim profile`: this launch is recorded
        def go():
            with np.errstate(all="ignore"):
                return _launch(func, args, kwargs, lnc, program_ndim, settings, target, findings, seat)
        return hook(func, go, target, lnc)
    with np.errstate(all="ignore"):
        return _launch(func, args, kwargs, lnc, program_ndim, settings, target, findings, seat)


# A callable ``hook(func, go, target, lnc)`` that runs ``go()`` (the launch) and returns its result,
# set while ``nkisim profile`` profiles a script (``runtime.profiling.session``); multi-rank
# launches are not hooked. Decision: a ContextVar, so the hook covers the profiled script's thread
# and nothing else.
LAUNCH_HOOK: contextvars.ContextVar = contextvars.ContextVar("nkisim_launch_hook", default=None)


# A list that also receives every finding of a findings="all"/"warn" launch (whatever kernel or
# caller made it), set while ``nkisim run --json`` runs a script. Decision: a ContextVar, as
# LAUNCH_HOOK, so it covers the script's thread and nothing else.
FINDINGS_SINK: contextvars.ContextVar = contextvars.ContextVar("nkisim_findings_sink", default=None)


def _keep(findings: list | None, found: list) -> None:
    """Append a launch's findings to the caller's list (if any) and to FINDINGS_SINK (if set)."""
    if findings is not None:
        findings.extend(found)
    sink = FINDINGS_SINK.get()
    if sink is not None:
        sink.extend(found)


def _launch(func, args, kwargs, lnc, program_ndim, settings, target, findings, seat=None):
    user_func, func = func, _with_keywords(func)
    launch = state.LaunchState(settings, target, lnc, program_ndim)
    if lnc > 1:
        launch.shared_watch = _shared_watch(settings)
    if seat is not None:
        launch.seat, seat.launch = seat, launch
    launch.recording = trace.active()
    timing_only = launch.recording is not None and launch.recording.timing_only
    launch.param_names = _names_of(user_func)
    if launch.recording is not None:
        launch.fast_counts = Counter()
    # Decision: kernel arguments are in shared HBM under LNC1 too ("nl.shared_hbm: visible to all
    # kernel instances in the SPMD grid"; the host's tensors are), so one kernel traces alike
    # under LNC1 and LNC2
    buffer = shared_hbm
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
                if seat is not None:
                    seat.attach(core)
                token = state.current.set(core)
                try:
                    result = func(*args, **kwargs)
                    _finish_core(core)
                finally:
                    state.current.reset(token)
            else:
                result = _run_lnc(_quiet(func), args, kwargs, launch)
        _check_result(result, user_func)
        if launch.findings and settings.findings == "all":
            raise _findings_error(user_func, launch.findings)
    except BaseException as exc:
        _hand_over_events(launch)
        for _, t, _ in reversed(bound):
            access.restore(t)
        mark_fatal(exc, settings.findings)
        if launch.findings:
            if isinstance(exc, FindingsError):
                found = exc.findings
                _report(user_func, found, found[-1] if getattr(found[-1], "fatal", False) else None)
            else:
                found = launch.findings + ([exc] if isinstance(exc, NkiError) else [])
                _report(user_func, found, exc if isinstance(exc, Exception) else None)
            _keep(findings, found)
            if settings.findings == "all" and isinstance(exc, NkiError) and not isinstance(exc, FindingsError):
                raise _findings_error(user_func, found) from exc
        raise
    _hand_over_events(launch)
    if launch.findings:             # findings="warn": reported, and the launch returns normally
        _report(user_func, launch.findings)
        _keep(findings, launch.findings)

    if timing_only:
        # Decision: a timing-only launch (``nkisim.profile(compute=False)``) computes no values its
        # caller can use (matmuls write zeros, replayed loop iterations write nothing), so it
        # leaves every argument as it was, as a failed launch does; only its events count
        for _, t, _ in reversed(bound):
            access.restore(t)
    by_alloc: dict = {}
    for arr, t, conv in bound:
        by_alloc.setdefault(id(t.alloc), []).append((arr, t, conv))
        if timing_only:
            continue
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


def _run_lnc(func, args, kwargs, launch):
    return run_cores(func, args, kwargs, launch, _finish_core)


__all__ = ["run", "Rendezvous", "ADAPTERS"]
