"""Estimated device time of kernel launches: ``nkisim.profile``, ``nki.benchmark`` /
``nki.profile`` on CPU, and the launch hook ``nkisim profile SCRIPT.py`` uses (``session``).

A profiled launch is simulated under ``trace.record()``; its events go to
``trace.schedule.estimate`` (the cost model and scheduler, imported when first needed) and the
``Timeline`` it returns becomes a ``trace.profile.Profile``. Sources: aws-neuron-sdk
nki/api/nki/__init__.py as of commit cca37847 (``benchmark``, ``profile``: signatures,
``benchmark_result.nc_latency.get_latency_percentile``), nki/guides/use-neuron-profile.rst.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import os
from typing import Any, Callable

from .. import arch, progress, state, trace
from ..config import SIMULATE_OPTIONS, Settings
from ..errors import ArgumentError, UnsupportedError
from ..trace.profile import Profile
from . import launch as _launch
from .kernel import Kernel

# "Available percentiles: [0, 1, 10, 25, 50, 90, 99, 100]" (nki.benchmark's docstring)
LATENCY_PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


def _estimate(events, target: arch.Target, lnc: int, settings: Settings | None = None):
    """``trace.schedule.estimate(events, target, lnc, settings.loop_tile_buffers)`` (default:
    the environment's settings); UnsupportedError when this build has no scheduler module."""
    try:
        schedule = importlib.import_module("nkisim.trace.schedule")
    except ModuleNotFoundError as exc:
        if exc.name != "nkisim.trace.schedule":
            raise
        raise UnsupportedError("nkisim.profile", "the cost model (nkisim.trace.schedule) is not in this "
                                                 "build; nki.simulate runs the kernel without timing",
                               where="?") from None
    buffers = (settings or Settings.from_env()).loop_tile_buffers
    return schedule.estimate(list(events), target, lnc, loop_buffers=buffers)


def _name(func) -> str:
    func = func.func if isinstance(func, Kernel) else func
    return getattr(func, "__name__", "kernel")


def _recorded(func, args, kwargs, lnc, program_ndim, settings, compute, outer):
    """(outputs, events) of one recorded launch. A timing-only launch in which ``runtime.replay``
    synthesised loop iterations and that then failed (any exception, ``ReplayMismatch`` included)
    runs again without replay, so a replayed launch gives what a plain one gives or raises what it
    raises; the events of the launch that counts reach ``outer``."""
    with trace.record(timing_only=not compute) as events:
        retry = False
        try:
            out = _launch.run(func, args, kwargs, lnc=lnc, program_ndim=program_ndim, settings=settings)
            return out, events
        except Exception:
            retry = bool(events.replayed)
            if not retry:
                raise
        finally:
            if outer is not None and not retry:
                outer.add_launch([list(events)], events.fast_paths)
    return _recorded(func, args, kwargs, lnc, program_ndim, settings.replace(loop_replay=False), compute, outer)


def run_profiled(func: Callable, args: tuple, kwargs: dict, *, lnc: int = 1, program_ndim: int = 0,
                 settings: Settings | None = None, compute: bool = True) -> Profile:
    """Simulate one launch of ``func`` recording its events, estimate its device time; return the
    ``Profile`` (its ``outputs``: what the launch returned). The events also reach an enclosing
    ``trace.record()``; the ``nkisim profile`` hook is off for this launch (it is profiled here).
    Raises whatever the launch raises (the events recorded so far still reach the enclosing
    recording)."""
    settings = settings or Settings.from_env()
    outer = trace.active()
    token = _launch.LAUNCH_HOOK.set(None)
    with progress.activity(f"nkisim.profile: simulating {_name(func)}") as shown:
        try:
            out, events = _recorded(func, args, kwargs, lnc, program_ndim, settings, compute, outer)
        finally:
            _launch.LAUNCH_HOOK.reset(token)
        shown.set_description(f"nkisim.profile: estimating {_name(func)} ({len(events)} instructions)", refresh=False)
        with _no_gc():
            timeline = _estimate(events, arch.get(settings.target), lnc, settings)
            return Profile(timeline, events, kernel=_name(func), outputs=out if compute else None)


@contextlib.contextmanager
def _no_gc():
    """No cyclic garbage collection inside the block (restored after, also on error): the schedule
    and the Profile build only acyclic data (spans, records, tuples), which reference counting
    frees, yet their thousands of new objects each trigger young-generation collections that walk
    every object still alive (a tenth of a timing-only profile's time). Decision: the collector's
    state is process-wide; left off if it was off, and another thread's pause may overlap."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def publish(kernel, prof: Profile, path: str | None, detail: Callable[[], str]):
    """The end of an ``nki.benchmark`` / ``nki.profile`` call (Beta 2 and Beta 1): set
    ``profile_result`` (and, benchmarking, ``benchmark_result``) on the kernel and the decorated
    kernel it came from, print the estimate (``detail()`` in brackets), write the trace to ``path``
    if given; return the launch's outputs."""
    kernel.profile_result = kernel._owner.profile_result = prof
    if kernel.mode == "benchmark":
        kernel.benchmark_result = kernel._owner.benchmark_result = BenchmarkResult(prof)
        print(f"nki.benchmark {kernel.__name__}: estimated {prof.total_us:.3f} us on {prof.target} ({detail()})")
    if path:
        prof.save_trace(path)
        print(f"nki.{kernel.mode} {kernel.__name__}: trace written to {path} (open in ui.perfetto.dev)")
    return prof.outputs


class Profiler:
    """``nkisim.profile(kernel, ...)``: calling it with the kernel's arguments returns a Profile."""

    def __init__(self, kernel, target=None, compute=True, lnc=None, options=None):
        from .kernel import _Simulated
        if isinstance(kernel, _Simulated):          # nkisim.profile(nki.simulate(k, **options))
            options = {**kernel.overrides, **(options or {})}
            target = target if target is not None else options.pop("target", None)
            kernel = kernel.kernel
        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        if lnc is not None and lnc != self.kernel.lnc:
            self.kernel = self.kernel[lnc]
        self.target, self.compute = target, compute
        self.options = dict(options or {})
        functools.update_wrapper(self, self.kernel.func)

    def __getitem__(self, grid) -> "Profiler":
        return Profiler(self.kernel[grid], self.target, self.compute, None, self.options)

    def __call__(self, *args, **kwargs) -> Profile:
        settings = Settings.from_env(target=self.target, **self.options)
        from . import beta1
        if isinstance(self.kernel, beta1.Beta1Kernel):
            # a neuronxcc.nki.jit kernel runs as its own launch does: its programs on each core, in
            # Beta-1 semantics (the grid's programs; plain func would run Beta-2 rules)
            grid = beta1.Grid(self.kernel.specs)
            args = beta1._specs_as_arrays(args)
            kwargs = {k: beta1._specs_as_arrays(v) for k, v in kwargs.items()}
            return run_profiled(beta1._body(self.kernel.func, grid), args, kwargs, lnc=grid.cores,
                                program_ndim=len(grid.dims), settings=settings, compute=bool(self.compute))
        return run_profiled(self.kernel.func, args, kwargs, lnc=self.kernel.lnc,
                            program_ndim=len(self.kernel.grid), settings=settings,
                            compute=bool(self.compute))


def profile(kernel, target: str | None = None, compute: bool = True, lnc: int | None = None,
            **options) -> Profiler:
    """``nkisim.profile(kernel, target=None, compute=True, lnc=None)(*args, **kwargs)``: simulate
    one launch and return its ``Profile`` (estimated device time; see ``trace.profile``).

    ``kernel``: an ``@nki.jit`` kernel or a plain kernel function (``kernel[2]`` or ``lnc=2`` for
    LNC2); ``target``: "trn1" | "trn2" | "trn3" (default: the environment's, as ``nki.simulate``);
    ``options``: the other ``nki.simulate`` options (``precise_fp``, ``detect_races``, ...).
    The simulator is on for this call whatever ``NKI_SIMULATOR`` says. Decision: the kernel's
    outputs (as ``nki.simulate`` returns them) are ``profile.outputs``, so one call gives both the
    values and the time. ``compute=False`` (timing only): the same instructions, checks and
    estimate, but TensorE skips its arithmetic (``nc_matmul`` / ``nc_matmul_mx`` write zeros,
    accumulating as they would; their operands are still read, so capacity, races and
    uninitialised reads are checked) — the GEMMs are most of a big kernel's simulation time.
    Decision: every other engine computes, so control flow that reads values still works unless
    it reads a matmul's result (then it sees zeros); ``profile.outputs`` is None (the values are
    not the kernel's) and the caller's arrays are left exactly as they were (nothing the
    kernel wrote to its arguments reaches them).
    Decision (timing only, ``loop_replay`` / ``NKISIM_LOOP_REPLAY``, default on): a loop whose body
    provably issues the same instructions every iteration, each operand moved by a constant
    stride, runs iterations 0, 1, 2 and the last; the other iterations' events are synthesised
    (``runtime.replay``), so the Profile is the one of the plain run, event for event. Values the
    skipped iterations would have written are not written; a launch that reads a value back
    (a register load, ``np.asarray(tile)``) or fails after a skip runs again without replay.
    Raises: TypeError for an unknown option; UnsupportedError when the cost model is missing; any
    error of the kernel.
    """
    bad = set(options) - set(SIMULATE_OPTIONS)
    if bad:
        raise TypeError(f"nkisim.profile: unknown option(s) {sorted(bad)}; expected target, compute, lnc "
                        f"or one of {[o for o in SIMULATE_OPTIONS if o != 'target']}")
    return Profiler(kernel, target, compute, lnc, options)


# ---- nki.benchmark / nki.profile ---------------------------------------------------------------
class LatencyStats:
    """``benchmark_result.nc_latency``: every percentile is the one estimate (µs)."""

    def __init__(self, estimate_us: float):
        self.estimate_us = float(estimate_us)

    def get_latency_percentile(self, percentile: int) -> float:
        """The ``percentile`` latency in µs: the estimate, for every percentile (the simulator runs
        once and the estimate is deterministic). Raises ValueError for a percentile outside
        [0, 1, 10, 25, 50, 90, 99, 100] (the documented ones)."""
        if percentile not in LATENCY_PERCENTILES:
            raise ValueError(f"nki.benchmark: percentile {percentile!r} is not available; "
                             f"available: {list(LATENCY_PERCENTILES)}")
        return self.estimate_us

    def __repr__(self):
        return f"<nc_latency: every percentile {self.estimate_us:.3f} us (estimate)>"


class BenchmarkResult:
    """``kernel.benchmark_result``: ``nc_latency`` (``LatencyStats``) and ``profile`` (the Profile)."""

    def __init__(self, prof: Profile):
        self.profile = prof
        self.nc_latency = LatencyStats(prof.total_us)


def trace_file(name) -> str:
    """Where a ``save_trace_name`` goes: the name, with a ``.ntff`` suffix made ``.json``
    (Decision: the file is Chrome-trace JSON, not the device's NTFF; the suffix says so)."""
    name = os.fspath(name)
    return name[:-5] + ".json" if name.endswith(".ntff") else name


class ProfiledKernel(Kernel):
    """A kernel under ``@nki.benchmark`` (``mode="benchmark"``) or ``@nki.profile``
    (``mode="profile"``): each call simulates one launch, estimates its time, returns the outputs."""

    def __init__(self, func, grid=(), options=None, *, mode: str, settings: dict):
        super().__init__(func, grid, options)
        self.mode, self.settings = mode, dict(settings)
        self.benchmark_result = None
        self.profile_result = None
        self._owner = self              # the decorated kernel: ``k[2](...)`` sets k.benchmark_result too

    def __getitem__(self, grid) -> "ProfiledKernel":
        k = super().__getitem__(grid)
        sub = ProfiledKernel(k.func, k.grid, k.options, mode=self.mode, settings=self.settings)
        sub._owner = self._owner
        return sub

    def _trace_path(self) -> str | None:
        cfg = self.settings
        if self.mode == "benchmark":
            return trace_file(cfg["save_trace_name"]) if cfg.get("save_trace_name") else None
        return os.path.join(cfg.get("working_directory") or os.getcwd(), trace_file(cfg["save_trace_name"]))

    def __call__(self, *args, **kwargs):
        if state.maybe_core() is not None:           # a sub-kernel called from a running kernel
            return self.func(*args, **kwargs)
        path = self._trace_path()
        if self.mode == "profile" and path and os.path.exists(path) and not self.settings.get("overwrite"):
            raise FileExistsError(f"nki.profile: {path} exists; pass overwrite=True to replace it")
        prof = run_profiled(self.func, args, kwargs, lnc=self.lnc, program_ndim=len(self.grid),
                            settings=Settings.from_env())
        return publish(self, prof, path, lambda: (
                       f"LNC{prof.lnc}; nkisim cost model, one simulated run: warmup={self.settings['warmup']}, "
                       f"iters={self.settings['iters']} not repeated, every percentile is this estimate"))

    def __repr__(self):
        return f"<nki.{self.mode} kernel {self.__name__}{list(self.grid) if self.grid else ''}>"


def benchmark(kernel=None, *, warmup: int = 10, iters: int = 100, save_neff_name=None, save_trace_name=None,
              additional_compile_opt=None, **options):
    """``@nki.benchmark(warmup=10, iters=100, save_neff_name=None, save_trace_name=None,
    additional_compile_opt=None)``: on CPU, each call simulates the kernel once with the cost
    model, prints the estimated device time and sets
    ``kernel.benchmark_result.nc_latency.get_latency_percentile(p)`` (µs): every percentile
    (0, 1, 10, 25, 50, 90, 99, 100) equals the estimate, since the estimate is deterministic and
    ``warmup``/``iters`` repetitions would all give it. ``kernel.benchmark_result.profile`` and
    ``kernel.profile_result`` hold the ``Profile``. The call returns the kernel's simulated
    outputs (Decision: computed values, where the device tool's outputs are undefined).

    ``save_trace_name``: writes the timeline as Chrome-trace / Perfetto JSON there (this replaces
    the NTFF the device writes; a ``.ntff`` suffix becomes ``.json``). ``save_neff_name`` and
    ``additional_compile_opt``: accepted, no effect (no compiler runs, no NEFF exists). Decision:
    the simulator is on for these calls whatever ``NKI_SIMULATOR`` says (there is no device).
    Raises ArgumentError when ``warmup`` is not an integer >= 0 or ``iters`` not an integer >= 1
    (Decision: the device tool needs at least one measured iteration to have a percentile).
    Source: nki/api/nki/__init__.py ``benchmark`` (aws-neuron-sdk commit cca37847).
    """
    for what, value, least in (("warmup", warmup, 0), ("iters", iters, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ArgumentError("nki.benchmark", f"{what} must be an integer >= {least}, got {value!r}")
    settings = dict(warmup=warmup, iters=iters, save_neff_name=save_neff_name, save_trace_name=save_trace_name,
                    additional_compile_opt=additional_compile_opt)
    if kernel is None:
        return lambda f: ProfiledKernel(f, options=options, mode="benchmark", settings=settings)
    return ProfiledKernel(kernel.func if isinstance(kernel, Kernel) else kernel, options=options,
                          mode="benchmark", settings=settings)


def nki_profile(func=None, *, working_directory=None, save_neff_name="file.neff", save_trace_name="profile.ntff",
                additional_compile_opt=None, overwrite: bool = False, profile_nth: int = 1, **options):
    """``@nki.profile(working_directory=..., save_neff_name='file.neff', save_trace_name='profile.ntff',
    additional_compile_opt=None, overwrite=False, profile_nth=1)``: on CPU, each call simulates the
    kernel once with the cost model and writes the trace (Chrome-trace / Perfetto JSON, in place of
    the device's NTFF) at ``working_directory/save_trace_name`` (a ``.ntff`` suffix becomes
    ``.json``), where the device tool writes its profile; returns the kernel's outputs and keeps
    the ``Profile`` in ``kernel.profile_result``.

    Decisions: ``working_directory`` defaults to the current directory (the device tool requires an
    absolute path); an existing trace raises FileExistsError unless ``overwrite=True``;
    ``profile_nth`` is accepted (every simulated execution is the same); ``save_neff_name`` and
    ``additional_compile_opt`` have no effect (no NEFF exists). Raises ValueError for
    ``profile_nth`` < 1. Source: nki/api/nki/__init__.py ``profile`` (aws-neuron-sdk commit cca37847).
    """
    if not isinstance(profile_nth, int) or profile_nth < 1:
        raise ValueError(f"nki.profile: profile_nth must be an integer >= 1, got {profile_nth!r}")
    settings = dict(working_directory=working_directory, save_neff_name=save_neff_name,
                    save_trace_name=save_trace_name, additional_compile_opt=additional_compile_opt,
                    overwrite=overwrite, profile_nth=profile_nth)
    if func is None:
        return lambda f: ProfiledKernel(f, options=options, mode="profile", settings=settings)
    return ProfiledKernel(func.func if isinstance(func, Kernel) else func, options=options, mode="profile",
                          settings=settings)


# ---- the `nkisim profile` hook -------------------------------------------------------------------
@contextlib.contextmanager
def session(on_profile: Callable[[Profile], Any]):
    """``with session(on_profile) as profiles:`` every launch made in the block (in this thread's
    context; not multi-rank launches) is recorded and estimated, ``on_profile(profile)`` is called
    with its Profile and the Profile is appended to ``profiles``. A launch that raises is not
    profiled (its error propagates)."""
    profiles: list = []

    def hook(func, go, target, lnc):
        outer = trace.active()
        token = _launch.LAUNCH_HOOK.set(None)       # a launch inside this one is not hooked again
        with progress.activity(f"nkisim profile: simulating {_name(func)}") as shown:
            try:
                with trace.record() as events:
                    try:
                        out = go()
                    finally:
                        if outer is not None:
                            outer.add_launch([list(events)], events.fast_paths)
            finally:
                _launch.LAUNCH_HOOK.reset(token)
            shown.set_description(f"nkisim profile: estimating {_name(func)} ({len(events)} instructions)", refresh=False)
            timeline = _estimate(events, target, lnc)
        prof = Profile(timeline, events, kernel=_name(func), outputs=out)
        profiles.append(prof)
        on_profile(prof)
        return out

    token = _launch.LAUNCH_HOOK.set(hook)
    try:
        yield profiles
    finally:
        _launch.LAUNCH_HOOK.reset(token)


__all__ = ["profile", "Profiler", "run_profiled", "benchmark", "nki_profile", "ProfiledKernel",
           "BenchmarkResult", "LatencyStats", "LATENCY_PERCENTILES", "session", "trace_file"]
