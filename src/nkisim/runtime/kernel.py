"""``nki.jit``, the ``Kernel`` object, ``nki.simulate`` and ``simulate_kernel``; program ids.

Settings are read when a kernel is called, never at decoration. Source: aws-neuron-sdk
nki/api/nki/__init__.py (jit, simulate), nki/get-started simulator page, nki/api/nki/language
(program_id, num_programs, program_ndim).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from .. import state
from ..config import SIMULATE_OPTIONS, Settings
from ..errors import ArgumentError, SimulatorOffError, UnsupportedError
from . import launch as _launch

_SIM_OPTIONS = SIMULATE_OPTIONS      # one per knob of the settings table that has an option


class Kernel:
    """A jitted NKI kernel: ``kernel(*args)`` (LNC1), ``kernel[2](*args)`` (LNC2).

    A call simulates when ``NKI_SIMULATOR=1`` (read at call time) or when made from inside a
    simulated kernel (a sub-kernel); otherwise it raises SimulatorOffError, since there is no
    Neuron device to run on.
    """

    def __init__(self, func: Callable, grid: tuple = (), options: dict | None = None):
        if isinstance(func, Kernel):
            func = func.func
        self.func = func
        self.grid = tuple(grid)
        self.options = dict(options or {})
        functools.update_wrapper(self, func)

    @property
    def lnc(self) -> int:
        return self.grid[0] if self.grid else 1

    def __getitem__(self, grid) -> "Kernel":
        grid = grid if isinstance(grid, tuple) else (grid,)
        grid = tuple(getattr(g, "value", g) for g in grid)
        try:
            grid = tuple(int(g) for g in grid)
        except (TypeError, ValueError):
            raise TypeError(f"kernel grid must be integers, got {grid!r}") from None
        if len(grid) != 1:
            raise UnsupportedError("nki.jit", f"launch grid {list(grid)} is not supported: Beta 2 kernels launch as "
                                      f"kernel[1] or kernel[2] (LNC2)", where="?")
        return Kernel(self.func, grid, self.options)

    def __call__(self, *args, **kwargs):
        if state.maybe_core() is not None:           # a sub-kernel called from a running kernel
            return self.func(*args, **kwargs)
        settings = Settings.from_env()
        if not settings.simulator:
            raise SimulatorOffError(
                f"{self.__name__}: no Neuron device here and the simulator is off; set NKI_SIMULATOR=1 "
                f"or call nki.simulate({self.__name__})(...)")
        return _launch.run(self.func, args, kwargs, lnc=self.lnc, program_ndim=len(self.grid),
                           settings=settings)

    def with_schedule(self, *args, **kwargs) -> "Kernel":
        """Scheduling edges between named instructions: no effect on a sequential simulator."""
        return self

    def __repr__(self):
        return f"<nki.jit kernel {self.__name__}{list(self.grid) if self.grid else ''}>"


def jit(func: Callable | None = None, **options) -> Any:
    """``@nki.jit``, ``@nki.jit()``, ``@nki.jit(mode=..., ...)``: wrap a kernel function.

    Options (``mode``, ``debug_kernel``, ``show_compiler_tb``, ``experimental_flags``,
    ``platform_target``, ...) are accepted and ignored: they steer the compiler, not semantics.
    """
    if func is None:
        return lambda f: Kernel(f, options=options)
    return Kernel(func, options=options)


class _Simulated:
    def __init__(self, kernel, overrides):
        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        self.overrides = overrides
        self.findings: list = []        # with findings="all"/"warn": every NkiError of the last call
        functools.update_wrapper(self, self.kernel.func)

    def __getitem__(self, grid):
        return _Simulated(self.kernel[grid], self.overrides)

    def __call__(self, *args, **kwargs):
        self.findings = []
        from . import beta1
        if isinstance(self.kernel, beta1.Beta1Kernel):     # a neuronxcc.nki.jit kernel: its grid's
            settings = beta1._settings(self.kernel.options, **self.overrides)    # programs, Beta 1
            return self.kernel.run(args, kwargs, settings, self.findings)
        settings = Settings.from_env(**self.overrides)
        return _launch.run(self.kernel.func, args, kwargs, lnc=self.kernel.lnc,
                           program_ndim=len(self.kernel.grid), settings=settings, findings=self.findings)


def simulate(kernel, **options) -> Callable:
    """``nki.simulate(kernel)(*args, **kwargs)``: run a jitted kernel (or plain function) on NumPy
    arrays (or torch CPU tensors) and return its outputs as arrays of the same kind.

    ``kernel[2]`` (or ``simulate(kernel)[2]``) runs LNC2. A Beta-1 ``neuronxcc.nki.jit`` kernel
    (``kernel[grid]`` or ``simulate(kernel)[grid]``) runs as its own launch does: every program
    of its grid in Beta-1 semantics, these options over its ``platform_target``. Options override the environment:
    ``target`` ("trn1"|"trn2"|"trn3"), ``precise_fp``, ``uninitialized_reads``, ``detect_races``,
    ``iteration_order``, ``seed``, ``findings`` ("first": stop at the first broken rule; "all": skip
    each failing instruction, print every finding grouped by rule, keep them in ``.findings`` of
    the returned callable, then raise one ``FindingsError`` holding them all; "warn": the same but
    return normally; in every mode a rule broken outside any instruction, e.g. an out-of-bounds
    slice, is always fatal: see ``runtime.launch.run``), ``barrier_timeout_s``, ``fast_paths`` (False: every fast path off;
    results are bit-identical). The options are the knobs of ``config.KNOBS`` that have one; an
    option given is not read from the environment. Unknown options raise TypeError.

    ``ranks=N`` runs N ranks of the kernel together (``nki.collectives``): the call returns the
    list of every rank's results; ``nki.per_rank(values)`` marks an argument that differs
    between ranks (see ``runtime.ranks.run_ranks``).
    """
    ranks = options.pop("ranks", None)
    bad = set(options) - set(_SIM_OPTIONS)
    if bad:
        raise TypeError(f"nki.simulate: unknown option(s) {sorted(bad)}; expected {list(_SIM_OPTIONS)}")
    if ranks is not None:
        from .ranks import RankSimulated
        return RankSimulated(kernel, ranks, options)
    return _Simulated(kernel, options)


def simulate_kernel(func, args=(), kwargs=None, lnc: int = 1, **options):
    """``nki.simulator.simulate_kernel(func, args, kwargs, lnc)``: the entry vLLM-on-Neuron calls."""
    k = func if isinstance(func, Kernel) else Kernel(func)
    if lnc and lnc != 1:
        k = k[lnc]
    return simulate(k, **options)(*tuple(args), **dict(kwargs or {}))


def program_id(axis: int = 0) -> int:
    """Index of this core on grid ``axis``: 0/1 under LNC2, 0 for a plain call."""
    c = state.core("nl.program_id")
    if axis != 0 and not (axis == 0 or axis < c.launch.program_ndim):
        raise ArgumentError("nl.program_id", f"axis {axis} out of range for a {c.launch.program_ndim}-d grid")
    return c.core_id if axis == 0 else 0


def num_programs(axes: int = 0) -> int:
    """Number of instances on ``axes``: the LNC degree, 1 for a plain call."""
    return state.core("nl.num_programs").launch.lnc


def program_ndim() -> int:
    """Number of grid axes: 0 for a plain call, 1 for ``kernel[n]``."""
    return state.core("nl.program_ndim").launch.program_ndim


def signature_of(kernel) -> inspect.Signature:
    return inspect.signature(kernel.func if isinstance(kernel, Kernel) else kernel)


__all__ = ["Kernel", "jit", "simulate", "simulate_kernel", "program_id", "num_programs",
           "program_ndim"]
