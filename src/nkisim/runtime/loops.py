"""Kernel loops: ``affine_range``, ``sequential_range``, ``static_range``, ``range`` are Python
iterables (compile-time unrolled loops), all run in order (see affine_range for race detection).

Source: aws-neuron-sdk nki/api/nki/language/__init__.py (loops). Imports state only.
"""
from __future__ import annotations

import builtins
import random

from .. import state
from ..checks import races
from ..errors import kernel_location


class _Range:
    """An iterable over ``range(start, stop, step)`` that tells the checks what kind of loop it is."""
    __slots__ = ("r", "kind")

    def __init__(self, kind, start, stop=None, step=1):
        if stop is None:
            start, stop = 0, start
        self.r = builtins.range(int(start), int(stop), int(step))
        self.kind = kind

    def __iter__(self):
        if self.kind == "affine":
            c = state.maybe_core()
            if c is not None:
                order = self.r
                if c.settings.iteration_order == "shuffled":
                    order = list(self.r)
                    random.Random(c.settings.seed + len(order)).shuffle(order)
                if c.settings.detect_races:
                    return _watched(c, order)
                return iter(order)
        return iter(self.r)

    def __len__(self):
        return len(self.r)

    def __reversed__(self):
        return reversed(self.r)

    def __repr__(self):
        return f"{self.kind}_range({self.r.start}, {self.r.stop}, {self.r.step})"


def _watched(core, order):
    """Iterate with a race-detection scope open (see checks.races)."""
    scope = races.LoopScope(core.serial + 1, kernel_location())
    core.loops.append(scope)
    try:
        for i in order:
            scope.iteration = i
            yield i
    finally:
        core.loops.remove(scope)


def affine_range(start, stop=None, step=1):
    """A deprecated alias of ``range()`` (current docs: nki/api/nki/language/__init__.py,
    nki/get-started/about/index.rst): iterations run in order, so reading an earlier iteration's
    results (a scan's state, ``+=``/nc_matmul/tensor_tensor accumulation) and reusing on-chip
    tiles declared outside the loop are legal. Decision: with ``detect_races``, an iteration overwriting HBM elements another
    iteration wrote and nothing read since raises RaceError (lost results: the former parallel
    meaning's write-write race); ``iteration_order="shuffled"`` still runs it in a shuffled order."""
    return _Range("affine", start, stop, step)


def sequential_range(start, stop=None, step=1):
    """A deprecated alias of ``range()`` (current docs); always runs in order, and race detection
    does not look at its iterations (the last write may be meant to win)."""
    return _Range("sequential", start, stop, step)


def static_range(start, stop=None, step=1):
    """A fully unrolled loop; runs in order."""
    return _Range("static", start, stop, step)


def _int(v):
    return int(v)


def dynamic_range(start, stop=None, step=1):
    """An on-device loop; bounds may be registers. Yields read-only induction registers."""
    from ..isa.registers import VirtualRegister
    if stop is None:
        start, stop = 0, start
    for i in builtins.range(_int(start), _int(stop), int(step)):
        yield VirtualRegister(i, frozen=True)


def fori_loop(lower, upper, body_fun, step=1):
    """Call ``body_fun(i)`` for i in range(lower, upper, step); ``i`` is a read-only register."""
    for i in dynamic_range(lower, upper, step):
        body_fun(i)


def while_loop(init, body_fun):
    """``r = init; while r != 0: r = body_fun(r)`` (the condition is tested first)."""
    r = init
    while int(r) != 0:
        r = body_fun(r)
    return r


def range(start, stop=None, step=1):  # noqa: A001 - NKI's own name
    """``nl.range``: a plain loop, in order."""
    return _Range("sequential", start, stop, step)


__all__ = ["affine_range", "sequential_range", "static_range", "range", "dynamic_range", "fori_loop",
           "while_loop"]
