"""Kernel loops: ``affine_range``, ``sequential_range``, ``static_range``, ``range`` are Python
iterables (compile-time unrolled loops), all run in order (see affine_range for race detection).

Dynamic loops (``dynamic_range``, ``fori_loop``, ``while_loop`` and a kernel's ``while reg:``,
counted in ``isa.registers``) stop with LoopLimitError past ``settings.max_loop_iterations``.
Source: aws-neuron-sdk nki/api/nki/language/__init__.py (loops). Imports state, checks, errors.
"""
from __future__ import annotations

import builtins
import random
import sys

import numpy as np

from .. import state
from ..checks import races
from ..errors import ArgumentError, LoopLimitError, kernel_location


class _Range:
    """An iterable over ``range(start, stop, step)`` that tells the checks what kind of loop it is."""
    __slots__ = ("r", "kind")

    def __init__(self, kind, start, stop=None, step=1):
        if stop is None:
            start, stop = 0, start
        self.r = builtins.range(int(start), int(stop), int(step))
        self.kind = kind

    def __iter__(self):
        c = state.maybe_core()
        rec = c.launch.recording if c is not None and c.events is not None else None
        if rec is not None and rec.timing_only:
            from . import replay
            if replay.eligible(c):
                it = replay.iterate(c, self.r, sys._getframe(1))
                if it is not None:
                    return it
        if self.kind == "affine":
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


def _cap() -> int:
    c = state.maybe_core()
    return c.settings.max_loop_iterations if c is not None else 1_000_000


_CAP_NOTE = "max_loop_iterations, NKISIM_MAX_LOOP_ITERATIONS"


def _dynamic_bounds(op, start, stop, step):
    """The range of a dynamic loop: bounds are integers or registers (read now), ``step`` a
    positive integer ("must be a compile-time positive integer (not VirtualRegister)")."""
    from ..isa.registers import VirtualRegister
    if isinstance(step, VirtualRegister) or isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise ArgumentError(op, f"step must be a compile-time positive integer, not {type(step).__name__}")
    if step <= 0:
        raise ArgumentError(op, f"step must be a compile-time positive integer, got {int(step)}")
    if stop is None:
        start, stop = 0, start
    r = builtins.range(_int(start), _int(stop), int(step))
    cap = _cap()
    if len(r) > cap:
        raise LoopLimitError(op, f"the loop would run {len(r)} iterations, more than {cap} ({_CAP_NOTE})")
    return r


def dynamic_range(start, stop=None, step=1):
    """An on-device loop; bounds may be registers (read when the loop starts). Yields read-only
    induction registers.

    Decision: a loop of more than ``settings.max_loop_iterations`` iterations raises
    LoopLimitError when it starts (it would keep the simulation busy for hours); ``step`` must be
    a positive integer, not a register (documented), else ArgumentError.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (dynamic_range)."""
    from ..isa.registers import VirtualRegister
    for i in _dynamic_bounds("nl.dynamic_range", start, stop, step):
        yield VirtualRegister(i, frozen=True)


def fori_loop(lower, upper, body_fun, step=1):
    """Call ``body_fun(i)`` for i in range(lower, upper, step); ``i`` is a read-only register.
    The same iteration cap and ``step`` rule as ``dynamic_range``."""
    from ..isa.registers import VirtualRegister
    for i in _dynamic_bounds("nl.fori_loop", lower, upper, step):
        body_fun(VirtualRegister(i, frozen=True))


def while_loop(init, body_fun):
    """``r = init; while r != 0: r = body_fun(r)`` (the condition is tested first).

    Decision: after ``settings.max_loop_iterations`` iterations with the condition still nonzero
    it raises LoopLimitError naming the ``while_loop`` call's line and the count (a condition
    that never clears would hang the simulation).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (while_loop)."""
    where = kernel_location()
    cap = _cap()
    r, n = init, 0
    while int(r) != 0:
        if n >= cap:
            raise LoopLimitError("nl.while_loop", f"the condition register is still nonzero after {cap} "
                                                  f"iterations ({_CAP_NOTE}); does it ever clear?",
                                 where=where)
        r = body_fun(r)
        n += 1
    return r


def range(start, stop=None, step=1):  # noqa: A001 - NKI's own name
    """``nl.range``: a plain loop, in order."""
    return _Range("sequential", start, stop, step)


__all__ = ["affine_range", "sequential_range", "static_range", "range", "dynamic_range", "fori_loop",
           "while_loop"]
