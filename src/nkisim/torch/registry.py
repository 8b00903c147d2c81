"""The kernel side table (kernels and constant arguments that cannot enter an FX graph) and each
kernel's output contract: what it returns (shapes, dtypes, which outputs are inputs) and what it
writes, from its declaration or from one cached shape-only run.

Keys are strings stable across processes: ``module.qualname`` for a kernel (``#2``, ``#3`` for
distinct functions with one name) and a SHA-1 of the constants' canonical bytes (``constant_digest``:
arrays and tensors by dtype, shape and data) — never ``hash()`` or a shortened ``repr``.
Imports torch, nkisim.runtime and nkisim.config; never isa or checks.
"""
from __future__ import annotations

import hashlib
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from ..config import Settings
from ..runtime import launch
from ..runtime.kernel import Kernel
from . import convert
from .routes import kernel_name


@dataclass(frozen=True)
class KernelEntry:
    """One registered kernel: the raw function and its contract.

    ``output_spec(**args)`` (optional) returns the kernel's outputs without running it: None, one
    entry or a tuple/list of entries; an entry is an argument name (the output IS that input), a
    tensor (its shape/dtype; an argument itself means an alias), or ``(shape, dtype)`` with a torch,
    NumPy or NKI dtype. ``mutates_args`` names inputs the kernel writes without returning them.
    """
    key: str
    func: Callable
    arg_names: tuple
    defaults: dict
    output_spec: Callable | None
    mutates_args: frozenset


class KernelSideTable:
    """Kernels and constant-argument dicts by stable string key; lock-protected; ``reset_table``
    for tests."""

    def __init__(self):
        self.lock = threading.Lock()
        self.kernels: dict[str, KernelEntry] = {}
        self.func_to_key: dict[tuple, tuple] = {}      # (ids of func, spec; mutates) -> (func, key, spec)
        self.constant_args: dict[str, dict] = {}
        self.layouts: dict[tuple, "Layout"] = {}

    def add_kernel(self, kernel, output_spec=None, mutates_args=()) -> str:
        """Register ``kernel`` (jitted or plain) with its output contract; re-adding the same function
        with the same ``output_spec`` object and ``mutates_args`` returns the same key (a different
        contract is a new entry: pass a module-level spec function, not a fresh lambda per call)."""
        func = kernel.func if isinstance(kernel, Kernel) else kernel
        spec = output_spec if output_spec is not None else getattr(kernel, "output_spec", None)
        muts = frozenset(mutates_args or getattr(kernel, "mutates_args", ()))
        ident = (id(func), id(spec), muts)
        with self.lock:
            hit = self.func_to_key.get(ident)
            if hit is not None and hit[0] is func and hit[2] is spec:
                return hit[1]
            base = kernel_name(func)
            key, n = base, 1
            while key in self.kernels:
                n += 1
                key = f"{base}#{n}"
            sig = inspect.signature(func)
            self.kernels[key] = KernelEntry(
                key=key, func=func, arg_names=tuple(sig.parameters),
                defaults={p.name: p.default for p in sig.parameters.values()
                          if p.default is not inspect.Parameter.empty},
                output_spec=spec,
                mutates_args=muts)
            self.func_to_key[ident] = (func, key, spec)
            return key

    def get_kernel(self, key: str) -> KernelEntry:
        try:
            return self.kernels[key]
        except KeyError:
            raise KeyError(f"nki_kernel_wrapper: kernel {key!r} is not registered in this process "
                           f"(call wrap_nki on it first)") from None

    def add_constant_args(self, constants: dict) -> str:
        """Store a constants dict; the key is ``constant_digest`` of it (equal constants, equal key;
        arrays differing in one element, dtype or shape get different keys)."""
        key = constant_digest(constants)[:16]
        with self.lock:
            self.constant_args.setdefault(key, dict(constants))
        return key

    def get_constant_args(self, key: str) -> dict:
        if not key:
            return {}
        try:
            return self.constant_args[key]
        except KeyError:
            raise KeyError(f"nki_kernel_wrapper: constant args {key!r} are not in this process's "
                           f"side table") from None

    def reset_table(self) -> None:
        with self.lock:
            self.kernels.clear()
            self.func_to_key.clear()
            self.constant_args.clear()
            self.layouts.clear()


kernel_side_table = KernelSideTable()


def _feed(h, v) -> None:
    """Feed a canonical, process-independent encoding of ``v`` to hash ``h``."""
    if isinstance(v, np.ndarray):
        h.update(f"ndarray|{v.dtype.name}|{v.dtype.str}|{v.shape}|".encode())
        h.update(np.ascontiguousarray(v).tobytes())
    elif isinstance(v, torch.Tensor):
        from torch._subclasses.fake_tensor import is_fake
        h.update(f"tensor|{v.dtype}|{tuple(v.shape)}|{v.device.type}|".encode())
        if is_fake(v) or v.device.type == "meta":
            h.update(f"nodata|{id(v)}".encode())      # no data to hash: only this object matches
        else:
            h.update(v.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(v, (tuple, list)):
        h.update(f"{type(v).__name__}|{len(v)}|".encode())
        for x in v:
            _feed(h, x)
    elif isinstance(v, dict):
        h.update(f"dict|{len(v)}|".encode())
        for k in sorted(v, key=repr):
            _feed(h, k)
            _feed(h, v[k])
    elif isinstance(v, np.generic):
        h.update(f"scalar|{v.dtype.name}|".encode() + np.asarray(v).tobytes())
    elif callable(v) and hasattr(v, "__qualname__"):
        h.update(f"callable|{getattr(v, '__module__', '?')}.{v.__qualname__}|".encode())
    else:
        h.update(f"{type(v).__module__}.{type(v).__qualname__}|{v!r}|".encode())
    h.update(b";")


def constant_digest(value) -> str:
    """SHA-1 hex digest of ``value`` (constants: scalars, strings, dtypes, arrays, tensors, nested
    tuples/lists/dicts) from dtypes, shapes and bytes, never ``repr`` of an array (NumPy shortens
    it) or ``hash()``: equal in every process for equal values."""
    h = hashlib.sha1()
    _feed(h, value)
    return h.hexdigest()


@dataclass(frozen=True)
class Out:
    """One kernel output: an input returned as-is (``alias`` = its name) or a new tensor."""
    alias: str | None = None
    shape: tuple = ()
    dtype: Any = None


@dataclass(frozen=True)
class Layout:
    """What a call returns (``kind``: "none", "one" or "tuple") and which inputs it writes."""
    kind: str
    outs: tuple
    written: frozenset


def _is_dtype(x) -> bool:
    return isinstance(x, (torch.dtype, np.dtype)) or (isinstance(x, type) and issubclass(x, np.generic))


def _entry(x, named) -> Out:
    if isinstance(x, str):
        if x not in named:
            raise ValueError(f"output_spec names {x!r}, which is not an argument of the kernel")
        return Out(alias=x)
    if isinstance(x, torch.Tensor):
        name = next((n for n, v in named.items() if v is x), None)
        return Out(alias=name) if name else Out(shape=tuple(x.shape), dtype=x.dtype)
    shape, dtype = x
    return Out(shape=tuple(int(s) for s in shape), dtype=convert.torch_dtype(dtype))


def _from_spec(entry: KernelEntry, named: dict) -> Layout:
    res = entry.output_spec(**named)
    if res is None:
        kind, items = "none", ()
    elif isinstance(res, (tuple, list)) and not (len(res) == 2 and _is_dtype(res[1])
                                                 and not isinstance(res[0], (str, torch.Tensor))):
        kind, items = "tuple", tuple(res)
    else:
        kind, items = "one", (res,)
    outs = tuple(_entry(x, named) for x in items)
    return Layout(kind, outs, entry.mutates_args | {o.alias for o in outs if o.alias})


def _signature_key(entry, lnc, named) -> tuple:
    parts = []
    for n, v in named.items():
        if isinstance(v, torch.Tensor):
            parts.append((n, tuple(int(s) for s in v.shape), str(v.dtype)))
        else:
            parts.append((n, constant_digest(v)))
    return (entry.key, lnc, tuple(parts))


def _shape_run(entry: KernelEntry, lnc: int, named: dict) -> Layout:
    """Run the kernel once on ones of the same shapes/dtypes; record outputs and written inputs."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing
    with unset_fake_temporarily(), disable_proxy_modes_tracing():
        dummies = {n: (torch.ones([int(s) for s in v.shape], dtype=v.dtype)
                       if isinstance(v, torch.Tensor) else v) for n, v in named.items()}
        log: list = []
        token = convert.written_log.set(log)
        try:
            res = launch.run(entry.func, (), dummies, lnc=lnc, program_ndim=1 if lnc > 1 else 0,
                             settings=Settings.from_env())
        finally:
            convert.written_log.reset(token)
    check_result(entry.key, res)
    kind = "none" if res is None else "tuple" if isinstance(res, (tuple, list)) else "one"
    items = () if res is None else tuple(res) if kind == "tuple" else (res,)
    outs = []
    for x in items:
        name = next((n for n, v in dummies.items() if v is x), None)
        outs.append(Out(alias=name) if name else Out(shape=tuple(x.shape), dtype=x.dtype))
    written = {n for n, v in dummies.items() if any(v is w for w in log)}
    return Layout(kind, tuple(outs), frozenset(written) | entry.mutates_args
                  | {o.alias for o in outs if o.alias})


def check_result(key: str, res) -> None:
    """A wrapped kernel returns None, a tensor, or a tuple/list of tensors (a list comes back as a
    tuple in every mode). Decision: anything else (an int, a nested tuple, ...) is a TypeError in
    every mode, eager included, since a traced graph could not return it.
    Raises TypeError ``<kernel>: a wrapped kernel must return None, a tensor or a tuple/list of
    tensors, got int``."""
    items = () if res is None else res if isinstance(res, (tuple, list)) else (res,)
    bad = next((x for x in items if not isinstance(x, torch.Tensor)), None)
    if bad is not None or (items and not isinstance(res, (tuple, list, torch.Tensor))):
        got = type(bad if bad is not None else res).__name__
        raise TypeError(f"{key}: a wrapped kernel must return None, a tensor or a tuple/list of "
                        f"tensors, got {got}")


def describe_outputs(entry: KernelEntry, lnc: int, named: dict) -> Layout:
    """The call's Layout: from ``output_spec`` when declared (never runs the kernel), else from one
    shape-only simulator run on ones, cached per (kernel, LNC, shapes, dtypes, constants)."""
    if entry.output_spec is not None:
        return _from_spec(entry, named)
    key = _signature_key(entry, lnc, named)
    hit = kernel_side_table.layouts.get(key)
    if hit is None:
        hit = _shape_run(entry, lnc, named)
        with kernel_side_table.lock:
            kernel_side_table.layouts[key] = hit
    return hit


__all__ = ["KernelEntry", "KernelSideTable", "kernel_side_table", "Layout", "Out",
           "describe_outputs", "check_result", "constant_digest"]
