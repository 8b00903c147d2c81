"""Route counters: per kernel, how many calls ran the kernel in the simulator and how many ran the
torch fallback, so a test can prove which path ran; ``dispatch`` picks the route per call.

Imports torch (for ``is_compiling``) and the torch layer's settings only.
"""
from __future__ import annotations

import threading
import types
from typing import Callable

import torch

from .settings import can_run_kernel

_lock = threading.Lock()
_counts: dict[str, dict[str, int]] = {}


def kernel_name(kernel) -> str:
    """``module.qualname`` of a kernel, jitted kernel, NKIHOPCaller or function."""
    name = getattr(kernel, "kernel_name", None)
    if isinstance(name, str):
        return name
    func = getattr(kernel, "func", kernel)
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


_FUNC_NAMES: dict = {}    # id(function) -> (function, module, qualname, kernel_name), for count_kernel


def count_kernel(func) -> None:
    """``count(kernel_name(func), "kernel")``, with the name of a plain function (one without a
    ``kernel_name`` or ``func`` attribute) remembered while its ``__module__`` and
    ``__qualname__`` stay the same objects (every launch with torch arguments counts one)."""
    if type(func) is not types.FunctionType or "kernel_name" in func.__dict__ or "func" in func.__dict__:
        count(kernel_name(func), "kernel")
        return
    hit = _FUNC_NAMES.get(id(func))
    if hit is None or hit[0] is not func or hit[1] is not func.__module__ or hit[2] is not func.__qualname__:
        if len(_FUNC_NAMES) >= 4096:
            _FUNC_NAMES.clear()
        hit = _FUNC_NAMES[id(func)] = (func, func.__module__, func.__qualname__, kernel_name(func))
    count(hit[3], "kernel")


def count(name: str, route: str) -> None:
    """Add one call of ``route`` ("kernel" or "fallback") to kernel ``name``."""
    with _lock:
        slot = _counts.setdefault(name, {"kernel": 0, "fallback": 0})
        slot[route] += 1


def route_stats() -> dict[str, dict[str, int]]:
    """A snapshot ``{kernel name: {"kernel": n, "fallback": m}}``.

    "kernel" counts successful simulator runs with at least one torch tensor argument, whatever
    the entry point: wrap_nki / NKIHOPCaller calls (eager, or inside any compiled graph),
    simulate_nki_kernel, nki.simulate, a jitted call with NKI_SIMULATOR=1, simulate_kernel. Not
    counted: runs on NumPy arrays only, runs that raise, and the shape-only runs tracing does to
    learn output shapes. "fallback" counts ``dispatch`` choosing the fallback in eager code (a
    compiled graph runs the fallback's torch ops without Python, so those calls are not counted).
    """
    with _lock:
        return {k: dict(v) for k, v in _counts.items()}


def reset_route_stats() -> None:
    """Zero every counter (for tests)."""
    with _lock:
        _counts.clear()


def dispatch(kernel, fallback: Callable) -> Callable:
    """A function that, per call, runs ``kernel`` (usually an NKIHOPCaller) when
    ``can_run_kernel(first tensor argument, kernel)`` says yes, else ``fallback``, with the same
    arguments. The kernel route is counted where the simulator runs; the fallback route here."""
    name = kernel_name(kernel)

    def call(*args, **kwargs):
        first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), "")
        if can_run_kernel(first, kernel):
            return kernel(*args, **kwargs)
        if not torch.compiler.is_compiling():
            count(name, "fallback")
        return fallback(*args, **kwargs)

    call.__name__ = getattr(fallback, "__name__", "dispatch")
    return call


__all__ = ["route_stats", "reset_route_stats", "dispatch", "count", "kernel_name"]
