"""Beta-1 launches (``neuronxcc.nki``): ``nki.jit(mode=...)``, SPMD grids of any rank
(``kernel[g0, g1, ...]``), ``nl.spmd_dim`` / ``nl.nc`` grid specs mapping programs onto the cores
of a logical core, the running program's ids, ``nki.simulate_kernel`` and ``nki.benchmark`` /
``nki.profile`` over the Beta-2 launch (``runtime.launch.run``) and cost model (``profiling``).

Decision (SPMD grid): one Beta-1 call is ONE Beta-2 launch (arguments bound once, one trace);
the cores of the logical core (1 unless a grid dim holds ``nl.nc(n)``) each run their programs
one after another in row-major grid order, each program with its own ``nl.program_id``. The k-th
``shared_hbm`` allocation of every program is one tensor ("Shared HBM - Visible to all kernel
instances in the SPMD grid"), so a kernel that allocates and returns its output works at any grid.
Imports runtime, state, config, errors; never torch.
Source: aws-neuron-sdk 2.26 general/nki/api/nki/__init__.py (jit, simulate_kernel, baremetal,
benchmark, profile), api/nki/language/__init__.py (program_id, num_programs, program_ndim, nc,
spmd_dim), programming_model.rst ("SPMD").
"""
from __future__ import annotations

import functools
import inspect
import itertools
import math
import os

import numpy as np

from .. import state
from ..config import Settings, normalize_target
from ..errors import ArgumentError, BoundsError, ShapeError, UnsupportedError
from ..checks import races as _races
from . import launch as _launch
from .kernel import Kernel

PROGRAM_KEY = "beta1_program"          # CoreState.extras entry: the running Program
MODES = ("auto", "simulation", "baremetal", "benchmark", "profile", "jax", "torchxla", "trace")


# ---- grid specs --------------------------------------------------------------------------------
class NC:
    """``nl.nc(n)``: a launch-grid dimension whose programs go to ``n`` physical cores.
    ``nl.nc(2) * 2`` is ``nl.spmd_dim(nl.nc(2), 2)``, ``2 * nl.nc(2)`` is ``nl.spmd_dim(2, nl.nc(2))``."""
    __slots__ = ("n",)

    def __init__(self, n):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ArgumentError("nl.nc", f"the core count must be an integer >= 1, got {n!r}")
        self.n = int(n)

    def __mul__(self, k):
        return SpmdDim(self, k)

    def __rmul__(self, k):
        return SpmdDim(k, self)

    def __repr__(self):
        return f"nl.nc({self.n})"


class SpmdDim:
    """``nl.spmd_dim(a, b, ...)``: one grid dimension of size ``a * b * ...`` split into
    sub-dimensions (mixed radix, the first the slowest); a sub-dimension that is ``nl.nc(n)``
    names the core. E.g. ``spmd_dim(nc(2), 2)``: programs 0, 1 on core 0, 2, 3 on core 1;
    ``spmd_dim(2, nc(2))``: programs 0, 2 on core 0, 1, 3 on core 1 (the docs' examples)."""
    __slots__ = ("parts",)

    def __init__(self, *parts):
        if not parts:
            raise ArgumentError("nl.spmd_dim", "needs at least one sub-dimension")
        flat = []
        for p in parts:
            if isinstance(p, SpmdDim):
                flat.extend(p.parts)
            elif isinstance(p, NC):
                flat.append(p)
            elif isinstance(p, (int, np.integer)) and not isinstance(p, bool) and p >= 1:
                flat.append(int(p))
            else:
                raise ArgumentError("nl.spmd_dim", f"sub-dimension {p!r} is neither an integer >= 1 nor nl.nc(n)")
        self.parts = tuple(flat)

    def __mul__(self, k):
        return SpmdDim(self, k)

    def __rmul__(self, k):
        return SpmdDim(k, self)

    def __repr__(self):
        return f"nl.spmd_dim({', '.join(map(repr, self.parts))})"


def nc(n) -> NC:
    """``nl.nc(n)``: see ``NC``."""
    return NC(n)


def spmd_dim(*parts) -> SpmdDim:
    """``nl.spmd_dim(*sub_dims)``: see ``SpmdDim``."""
    return SpmdDim(*parts)


def _sizes(parts) -> list:
    return [p.n if isinstance(p, NC) else p for p in parts]


class Grid:
    """A parsed launch grid: dimension sizes, the core count, and each program's core."""

    def __init__(self, specs: tuple):
        self.specs = tuple(specs)
        dims, self.cores, self._where = [], 1, None
        for axis, s in enumerate(self.specs):
            parts = s.parts if isinstance(s, SpmdDim) else (s,)
            for k, p in enumerate(parts):
                if isinstance(p, NC):
                    if self._where is not None:
                        raise UnsupportedError("nki.jit", f"launch grid {list(self.specs)} has more than one "
                                                          f"nl.nc(...) dimension; a kernel runs on one logical "
                                                          f"core", where="?")
                    self._where, self.cores = (axis, k, _sizes(parts)), p.n
            size = math.prod(_sizes(parts)) if isinstance(s, SpmdDim) else (s.n if isinstance(s, NC) else s)
            dims.append(size)
        self.dims = tuple(dims)

    def core_of(self, index: tuple) -> int:
        if self._where is None:
            return 0
        axis, k, sizes = self._where
        return (index[axis] // math.prod(sizes[k + 1:])) % sizes[k]

    def programs(self, core_id: int) -> list:
        return [ix for ix in itertools.product(*map(range, self.dims)) if self.core_of(ix) == core_id]


def parse_grid(grid) -> tuple:
    """A ``kernel[...]`` key as a tuple of grid specs (ints, NC, SpmdDim); TypeError otherwise."""
    grid = grid if isinstance(grid, tuple) else (grid,)
    out = []
    for g in grid:
        if isinstance(g, (NC, SpmdDim)):
            out.append(g)
        elif isinstance(g, (int, np.integer)) and not isinstance(g, bool) and g >= 1:
            out.append(int(g))
        else:
            raise TypeError(f"kernel launch grid: each dimension must be an integer >= 1, nl.nc(n) or "
                            f"nl.spmd_dim(...), got {g!r}")
    return tuple(out)


# ---- the running program -----------------------------------------------------------------------
class Program:
    """One SPMD program of a Beta-1 launch: its index on each grid axis, the grid, and the
    launch's shared_hbm allocations (``shared``) with its own count of them (``shared_k``)."""
    __slots__ = ("index", "dims", "shared", "shared_k")

    def __init__(self, index, dims, shared):
        self.index, self.dims, self.shared, self.shared_k = tuple(index), tuple(dims), shared, 0


def current_program() -> Program | None:
    core = state.maybe_core()
    return None if core is None else core.extras.get(PROGRAM_KEY)


def program_id(axis: int = 0) -> int:
    """``nl.program_id(axis)``: the running program's index on grid ``axis``. Decision: axis 0 of a
    launch without a grid is 0 (one program). Raises ArgumentError for an axis outside the grid."""
    core = state.core("nl.program_id")
    prog = core.extras.get(PROGRAM_KEY)
    if prog is None:                       # a Beta-1 kernel under a Beta-2 launch
        from .kernel import program_id as beta2_program_id
        return beta2_program_id(axis)
    if not isinstance(axis, (int, np.integer)) or not 0 <= axis < max(1, len(prog.dims)):
        raise ArgumentError("nl.program_id", f"axis {axis!r} out of range for a {len(prog.dims)}-d launch grid")
    return prog.index[axis] if prog.index else 0


def num_programs(axes=None) -> int:
    """``nl.num_programs(axes=None)``: programs along ``axes`` (an int or a tuple of ints); all
    programs of the grid when ``axes`` is None."""
    core = state.core("nl.num_programs")
    prog = core.extras.get(PROGRAM_KEY)
    if prog is None:
        return core.launch.lnc
    dims = prog.dims or (1,)
    if axes is None:
        return math.prod(dims)
    for a in (axes if isinstance(axes, (tuple, list)) else (axes,)):
        if not isinstance(a, (int, np.integer)) or not 0 <= a < len(dims):
            raise ArgumentError("nl.num_programs", f"axis {a!r} out of range for a {len(prog.dims)}-d launch grid")
    return math.prod(dims[a] for a in axes) if isinstance(axes, (tuple, list)) else dims[axes]


def program_ndim() -> int:
    """``nl.program_ndim()``: the number of launch-grid axes (0 without a grid)."""
    core = state.core("nl.program_ndim")
    prog = core.extras.get(PROGRAM_KEY)
    return core.launch.program_ndim if prog is None else len(prog.dims)


def shared_allocation(make, shape, dtype):
    """The k-th shared_hbm allocation of the running program: made by ``make()`` in the first
    program that reaches it, the same tensor in every later program (ShapeError if shape or dtype
    differ). Outside a Beta-1 grid launch: ``make()``."""
    prog = current_program()
    if prog is None:
        return make()
    k = prog.shared_k
    prog.shared_k += 1
    if k < len(prog.shared):
        t = prog.shared[k]
        if tuple(t.shape) != tuple(shape) or np.dtype(t.dtype) != np.dtype(dtype):
            raise ShapeError("nl.ndarray", f"shared_hbm allocation #{k} differs between SPMD programs: "
                                           f"{tuple(t.shape)} {t.dtype} vs {tuple(shape)} {np.dtype(dtype)}")
        return t
    t = make()
    prog.shared.append(t)
    return t


# ---- typing ------------------------------------------------------------------------------------
def _check_annotations(func, args, kwargs) -> None:
    """Kernel parameters annotated ``nt.tensor[d0, d1, ...]`` must get arrays of that shape
    (ShapeError naming the parameter); ``nt.tensor``/``nt.mutable_tensor`` without a shape accept any."""
    try:
        sig = inspect.signature(func)
        bound = sig.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return
    for name, value in bound.arguments.items():
        ann = sig.parameters[name].annotation
        shape = getattr(ann, "shape", None)
        if getattr(ann, "is_nki_annotation", False) and shape is not None and hasattr(value, "shape"):
            got = tuple(int(d) for d in value.shape)
            if len(got) != len(shape) or any(isinstance(w, int) and w != g for w, g in zip(shape, got)):
                raise ShapeError("nki.jit", f"argument {name!r} has shape {list(got)}, its annotation "
                                            f"{ann!r} expects {list(shape)}",
                                 where=_launch._def_site(func))
            dt = getattr(ann, "dtype", None)
            if dt is not None and np.dtype(value.dtype) != np.dtype(dt):
                raise ShapeError("nki.jit", f"argument {name!r} has dtype {value.dtype}, its annotation "
                                            f"{ann!r} expects {np.dtype(dt)}", where=_launch._def_site(func))


def _specs_as_arrays(value):
    """A Beta-1 tensor spec argument ``nt.tensor[[d0, d1], dtype]`` (what the SDK's matmul tutorial
    benchmarks with) as a zero-filled NumPy array of that shape and dtype (Decision: the device
    benchmark "does not use the actual inputs" either)."""
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(_specs_as_arrays(v) for v in value)
    if getattr(value, "is_nki_annotation", False) and value.shape is not None and value.dtype is not None:
        return np.zeros(tuple(value.shape), dtype=value.dtype)
    return value


# ---- the kernel --------------------------------------------------------------------------------
def _settings(options, **overrides) -> Settings:
    """A Beta-1 launch's settings: ``overrides`` (``nki.simulate``'s options) over the jit's
    ``platform_target`` over the environment."""
    target = options.get("platform_target")
    if target is not None and "target" not in overrides:
        overrides["target"] = normalize_target(target, "nki.jit platform_target")
    return Settings.from_env(simulator=True, **overrides)


def _body(func, grid: Grid):
    """The function one Beta-2 launch runs on each core: that core's programs, in order."""
    user = _launch._with_keywords(func)
    shared: list = []

    every = list(itertools.product(*map(range, grid.dims)))
    position = {ix: k for k, ix in enumerate(every)}

    @functools.wraps(func)
    def programs(*args, **kwargs):
        core = state.core("nki.jit")
        races = _program_races(core, every)
        result = None
        prev = core.extras.get(PROGRAM_KEY)
        try:
            for ix in grid.programs(core.core_id):
                core.extras[PROGRAM_KEY] = Program(ix, grid.dims, shared)
                core.extras[_races.PROGRAM_POS] = position[ix]
                result = user(*args, **kwargs)
                if races is not None:
                    races.end_program(position[ix])
        finally:
            core.extras[PROGRAM_KEY] = prev
            core.extras.pop(_races.PROGRAM_POS, None)
        return _on_chip_values(result)
    return programs


def _program_races(core, every: list):
    """The launch's ``ProgramRaces`` (made by the first core) when races are detected and the grid
    has two or more programs; else None."""
    launch = core.launch
    if not launch.settings.detect_races or len(every) < 2:
        return None
    with launch.lock:
        if launch.program_races is None:
            launch.program_races = _races.ProgramRaces([ix if len(ix) > 1 else ix[0] for ix in every])
    return launch.program_races


def _on_chip_values(value):
    """A kernel result with its on-chip tiles replaced by their values (NumPy arrays).
    Decision: Beta 1's simulator handed back SBUF/PSUM tiles a kernel returned (the SDK's own
    Beta-1 range_select test returns one), so the Beta-1 face does too, where a Beta-2 launch
    raises MemorySpaceError; HBM tensors come back as usual."""
    from ..memory.access import to_numpy
    from ..memory.buffers import ON_CHIP
    from ..memory.tensor import NkiTensor
    if isinstance(value, NkiTensor):
        return to_numpy(value) if value.buffer in ON_CHIP else value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_on_chip_values(v) for v in value)
    if isinstance(value, list):
        return [_on_chip_values(v) for v in value]
    if isinstance(value, dict):
        return {k: _on_chip_values(v) for k, v in value.items()}
    return value


class Beta1Kernel(Kernel):
    """A ``neuronxcc.nki.jit`` kernel: ``kernel(*args)``, ``kernel[g0, g1, ...](*args)``.

    Decision (modes): there is no Neuron device where this face is served (it is served only
    when no Neuron SDK is installed), so every mode runs the kernel in the simulator whatever
    ``NKI_SIMULATOR`` says: "simulation", "auto", "baremetal", "jax" and "torchxla" simulate
    (NumPy arrays, torch CPU tensors or jax arrays in, the same kind out, in every mode: the 2.26
    docs say only that "jax"/"torchxla" make the kernel a custom op of that framework, which
    takes and returns its arrays). Torch tensors go through the torch layer (written arguments
    land in the caller's tensor); jax arrays through ``runtime.jax_arrays`` (duck-typed, no jax
    import: copied in with ``np.asarray``, results made by the caller's ``jax.numpy``; a kernel
    that writes a jax argument raises UnsupportedError, jax arrays being immutable); "trace"
    (undocumented, the mode nki-samples gives helper kernels called from other kernels) is a
    plain call inside a kernel and simulates like "auto" when called from Python; "benchmark"
    and "profile" simulate with the cost model (``runtime.profiling``). ``platform_target=`` ("trn1"/"trn2"/"trn3")
    picks the target, overriding NEURON_PLATFORM_TARGET_OVERRIDE.

    Decision (pytest): a kernel is never a test item (``__test__ = False``), even when it is named
    ``test_*`` at module level, as in the SDK's own ``test_nki_nl_broadcast.py``. A kernel is
    a callable object, not a function; pytest would see the function through ``__wrapped__``
    (kept for ``inspect``) and try to call it with fixtures named after the kernel's parameters.
    """

    __test__ = False

    def __init__(self, func, grid=(), options=None, mode: str = "auto", profiling=None):
        super().__init__(func, (), options)
        if mode not in MODES:
            raise ArgumentError("nki.jit", f"mode {mode!r} is not one of {list(MODES)}")
        self.mode, self.specs, self.profiling = mode, tuple(grid), profiling
        self.benchmark_result = self.profile_result = None
        self._owner = self

    @property
    def grid(self):                      # what wrap_nki and the registry read: the core count
        return (Grid(self.specs).cores,) if self.specs else ()

    @grid.setter
    def grid(self, value):
        pass

    @property
    def programs_per_core(self) -> int:
        """Programs each core runs (1 without a grid or with only ``nl.nc(n)``)."""
        g = Grid(self.specs)
        return math.prod(g.dims) // g.cores if self.specs else 1

    @property
    def sign(self) -> inspect.Signature:
        """The kernel's signature (vLLM-on-Neuron reads its parameter list here)."""
        return inspect.signature(self.func)

    def __getitem__(self, grid) -> "Beta1Kernel":
        if state.maybe_core() is not None:
            raise UnsupportedError("nki.jit", f"calling kernel {self.__name__} with an SPMD grid from another "
                                              f"kernel is not supported (err_nested_kernel_with_spmd_grid)")
        k = Beta1Kernel(self.func, parse_grid(grid), self.options, self.mode, self.profiling)
        Grid(k.specs)                                    # grid errors raise here
        k._owner = self._owner
        return k

    def __call__(self, *args, **kwargs):
        if state.maybe_core() is not None:               # a sub-kernel: a plain call
            return self.func(*args, **kwargs)
        return self.run(args, kwargs)

    def run(self, args, kwargs, settings=None, findings=None):
        """One launch of the grid's programs in Beta-1 semantics. ``settings`` (None: the jit
        options over the environment) and ``findings`` (the list ``findings="all"/"warn"`` fills)
        are ``nki.simulate(kernel[grid], **options)``'s: that call runs no benchmark or profile
        mode, only the simulation."""
        try:
            return self._run(args, kwargs, settings, findings)
        except BoundsError as err:
            if getattr(err, "element", None) is None:
                raise
            raise documented_index_error(err) from err

    def _run(self, args, kwargs, settings, findings):
        args, kwargs = _specs_as_arrays(args), {k: _specs_as_arrays(v) for k, v in kwargs.items()}
        grid = Grid(self.specs)
        _check_annotations(self.func, args, kwargs)
        body = _body(self.func, grid)
        if settings is None:
            settings = _settings(self.options)
            if self.mode in ("benchmark", "profile"):
                return self._profiled(body, grid, args, kwargs, settings)
        return _launch.run(body, args, kwargs, lnc=grid.cores, program_ndim=len(grid.dims), settings=settings,
                           findings=findings)

    def _profiled(self, body, grid, args, kwargs, settings):
        from . import profiling
        cfg = self.profiling or {}
        if self.mode == "profile":
            path = os.path.join(cfg.get("working_directory") or os.getcwd(),
                                profiling.trace_file(cfg.get("save_trace_name") or "profile.ntff"))
            if os.path.exists(path) and not cfg.get("overwrite"):
                raise FileExistsError(f"nki.profile: {path} exists; pass overwrite=True to replace it")
        else:
            path = profiling.trace_file(cfg["save_trace_name"]) if cfg.get("save_trace_name") else None
        prof = profiling.run_profiled(body, args, kwargs, lnc=grid.cores, program_ndim=len(grid.dims),
                                      settings=settings)
        return profiling.publish(self, prof, path, lambda:
                                 "nkisim cost model, one simulated run; every percentile is this estimate")

    def __repr__(self):
        return f"<neuronxcc.nki.jit kernel {self.__name__}{list(self.specs) if self.specs else ''} mode={self.mode}>"


_JIT_OPTIONS = ("platform_target", "debug_kernel", "show_compiler_tb", "experimental_flags",
                "additional_compile_opt", "artifacts_dir", "save_neff_name", "save_trace_name")


def documented_index_error(err: BoundsError) -> IndexError:
    """The plain ``IndexError`` the Beta-1 simulator documents for an out-of-bounds runtime index
    of an indirect (index-tile) DMA access with ``oob_mode=error``.

    Decision: the Beta-1 docs (2.26 ``nki.isa.dma_copy``, its example test) show the simulator
    raising exactly ``IndexError`` (not a subclass) with NumPy's message over the flattened HBM
    tensor: "index 66048 is out of bounds for axis 0 with size 65536" (the first element of the
    first bad row). A Beta-1 launch raises that; the nkisim ``BoundsError`` (naming op, operand,
    rule and kernel line) is its ``__cause__`` and its note. Beta-2 launches are unchanged:
    they raise the ``BoundsError`` itself. Every other BoundsError passes through unchanged.
    """
    e = IndexError(f"index {err.element} is out of bounds for axis 0 with size {err.elements}")
    e.add_note(f"nkisim: {err}")
    return e


def jit(func=None, mode: str = "auto", **kwargs):
    """``@nki.jit``, ``@nki.jit(mode=..., platform_target=...)``, ``nki.jit(func, mode=...)``:
    a Beta-1 kernel (see ``Beta1Kernel`` for the modes). Compiler options are accepted and ignored."""
    if func is None:
        return lambda f: jit(f, mode=mode, **kwargs)
    if isinstance(func, Beta1Kernel):
        return Beta1Kernel(func.func, func.specs, {**func.options, **kwargs}, mode, func.profiling)
    return Beta1Kernel(func.func if isinstance(func, Kernel) else func, (), kwargs, mode)


def baremetal(kernel=None, **kwargs):
    """``@nki.baremetal(...)``: simulated (no device here); options accepted and ignored."""
    return jit(kernel, mode="baremetal", **kwargs)


def benchmark(kernel=None, *, warmup: int = 10, iters: int = 100, save_neff_name=None, save_trace_name=None,
              additional_compile_opt=None, **kwargs):
    """``@nki.benchmark(warmup=10, iters=100, ...)``: one simulated run with the cost model; sets
    ``kernel.benchmark_result.nc_latency.get_latency_percentile(p)`` (µs, every percentile the
    estimate); see ``runtime.profiling.benchmark`` for the decisions."""
    for what, value, least in (("warmup", warmup, 0), ("iters", iters, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ArgumentError("nki.benchmark", f"{what} must be an integer >= {least}, got {value!r}")
    cfg = dict(warmup=warmup, iters=iters, save_neff_name=save_neff_name, save_trace_name=save_trace_name)

    def make(f):
        k = jit(f, mode="benchmark", **kwargs)
        k.profiling = cfg
        return k
    return make if kernel is None else make(kernel)


def profile(func=None, *, working_directory=None, save_neff_name="file.neff", save_trace_name="profile.ntff",
            additional_compile_opt=None, overwrite: bool = False, profile_nth: int = 1, **kwargs):
    """``@nki.profile(working_directory=..., ...)``: one simulated run with the cost model, the
    trace written as Perfetto JSON at ``working_directory/save_trace_name`` (see
    ``runtime.profiling.nki_profile``)."""
    if not isinstance(profile_nth, int) or profile_nth < 1:
        raise ValueError(f"nki.profile: profile_nth must be an integer >= 1, got {profile_nth!r}")
    cfg = dict(working_directory=working_directory, save_trace_name=save_trace_name, overwrite=overwrite)

    def make(f):
        k = jit(f, mode="profile", **kwargs)
        k.profiling = cfg
        return k
    return make if func is None else make(func)


def simulate_kernel(kernel, *args, **kwargs):
    """``nki.simulate_kernel(kernel[grid], *args, **kwargs)``: run a Beta-1 kernel (any mode, or
    a plain function) in the simulator. Arrays passed as outputs are written in place; returned
    shared_hbm tensors come back as NumPy arrays."""
    if not isinstance(kernel, Beta1Kernel):
        kernel = jit(kernel, mode="simulation")
    if kernel.mode in ("benchmark", "profile"):
        kernel = Beta1Kernel(kernel.func, kernel.specs, kernel.options, "simulation")
    return kernel.run(args, kwargs)


def trace(func=None, **options):
    """``@nki.trace``: a sub-kernel; the function runs as plain Python inside a kernel."""
    return func if func is not None else (lambda f: f)


__all__ = ["NC", "SpmdDim", "nc", "spmd_dim", "Grid", "Program", "current_program", "program_id",
           "num_programs", "program_ndim", "shared_allocation", "Beta1Kernel", "jit", "baremetal",
           "benchmark", "profile", "simulate_kernel", "trace", "MODES", "documented_index_error"]
