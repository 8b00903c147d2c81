"""``nkisim demo``: run every example kernel on seeded inputs, check it against its NumPy
reference and print one table row per kernel.

Columns: kernel; input shapes and dtypes; max abs err = max |got - want|; max rel err =
max |got - want| / max |want| (normwise, so outputs near zero do not inflate it); PASS when every
element satisfies |got - want| <= ATOL + RTOL * |want| (the example's own tolerance) and is finite;
simulated wall time (one simulated call); NumPy time (best of 3 calls of the reference); their ratio.
An example that raises gets an ERROR row, its error is printed below the table, and the rest still
run. Imports the examples package; nothing below the CLI imports this module.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Sequence, TextIO

import numpy as np

SEED = 0

_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32",
          "float8_e4m3": "fp8e4", "float8_e5m2": "fp8e5"}

_COLUMNS = (("kernel", 10, "<"), ("inputs", 36, "<"), ("max abs err", 11, ">"),
            ("max rel err", 11, ">"), ("check", 5, "<"), ("sim ms", 9, ">"), ("numpy ms", 9, ">"),
            ("ratio", 8, ">"))


@dataclass
class Result:
    """One example's outcome; ``error`` is set (and the numbers are None) when it raised."""
    name: str
    inputs: str
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    sim_s: float | None = None
    numpy_s: float | None = None
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.sim_s is None or not self.numpy_s:
            return None
        return self.sim_s / self.numpy_s


def describe(inputs: Sequence[np.ndarray]) -> str:
    """``"4000x2048 f32 x2"``-style summary of the input arrays (runs of equal shape and dtype merged)."""
    parts: list[list] = []
    for a in inputs:
        key = ("x".join(str(n) for n in a.shape), _SHORT.get(a.dtype.name, a.dtype.name))
        if parts and parts[-1][0] == key:
            parts[-1][1] += 1
        else:
            parts.append([key, 1])
    return ", ".join(f"{s} {d}" + (f" x{n}" if n > 1 else "") for (s, d), n in parts)


def compare(got, want: np.ndarray, rtol: float, atol: float) -> tuple[bool, float, float]:
    """(passed, max abs err, normwise max rel err) of ``got`` against the float32 ``want``."""
    got = np.asarray(got)
    if got.shape != want.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference's {want.shape}")
    g = got.astype(np.float32)
    w = want.astype(np.float32)
    err = np.abs(g - w)
    max_abs = float(err.max()) if err.size else 0.0
    scale = float(np.abs(w).max()) if w.size else 0.0
    max_rel = max_abs / scale if scale > 0 else max_abs
    passed = bool(np.isfinite(g).all() and (err <= atol + rtol * np.abs(w)).all())
    return passed, max_abs, max_rel


def run_example(name: str, small: bool = False, seed: int = SEED) -> Result:
    """Simulate example ``name`` on inputs from ``np.random.default_rng(seed)`` and check it."""
    from . import examples
    from .nki import simulate
    mod = examples.load(name)
    label = "-"
    try:
        inputs = mod.make_inputs(np.random.default_rng(seed), small=small)
        label = describe(inputs)
        sim = simulate(mod.KERNEL)
        t0 = time.perf_counter()
        got = sim(*inputs)
        sim_s = time.perf_counter() - t0
        numpy_s = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            want = mod.reference(*inputs)
            numpy_s = min(numpy_s, time.perf_counter() - t0)
        passed, max_abs, max_rel = compare(got, np.asarray(want), mod.RTOL, mod.ATOL)
    except Exception as exc:  # reported as an ERROR row; the demo goes on with the next example
        from .errors import NkiError
        where = traceback.extract_tb(exc.__traceback__)[-1]
        # NkiError messages already end with the kernel's file:line; others get the raising frame.
        suffix = "" if isinstance(exc, NkiError) else f" [{os.path.basename(where.filename)}:{where.lineno}]"
        return Result(name, label, False, error=f"{type(exc).__name__}: {exc}{suffix}")
    return Result(name, label, passed, max_abs, max_rel, sim_s, numpy_s)


def _fmt_row(values) -> str:
    return "  ".join(f"{v:{align}{width}}" for v, (_, width, align) in zip(values, _COLUMNS))


def _cells(r: Result) -> list[str]:
    if r.error is not None:
        return [r.name, r.inputs, "-", "-", "ERROR", "-", "-", "-"]
    return [r.name, r.inputs, f"{r.max_abs_err:.2e}", f"{r.max_rel_err:.2e}",
            "PASS" if r.passed else "FAIL", f"{r.sim_s * 1e3:.1f}", f"{r.numpy_s * 1e3:.2f}",
            f"{r.ratio:.1f}x" if r.ratio is not None else "-"]


def run(small: bool = False, only: list | None = None, file: TextIO | None = None) -> int:
    """Run the examples (all, or those named in ``only``), print the table; return the exit code:
    0 when every example passed, 1 when any failed or raised, 2 for an unknown example name."""
    from . import examples
    from .config import Settings
    out = file if file is not None else sys.stdout
    names = list(only) if only else list(examples.NAMES)
    unknown = [n for n in names if n not in examples.NAMES]
    if unknown:
        print(f"nkisim demo: unknown example(s) {', '.join(unknown)}; expected some of "
              f"{', '.join(examples.NAMES)}", file=out)
        return 2
    target = Settings.from_env().target
    plural = "s" if len(names) != 1 else ""
    print(f"nkisim demo: {len(names)} example kernel{plural}, {'small' if small else 'full-size'} "
          f"inputs, seed {SEED}, target {target}, 1 BLAS thread", file=out)
    header = _fmt_row([c[0] for c in _COLUMNS])
    print(header, file=out)
    print("-" * len(header), file=out)
    results = []
    t_start = time.perf_counter()
    # One BLAS thread for the simulation and the NumPy reference alike: a fair ratio, and many
    # small matmuls do not stall on a busy machine.
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        for name in names:
            r = run_example(name, small=small)
            results.append(r)
            print(_fmt_row(_cells(r)), file=out, flush=True)
    print("-" * len(header), file=out)
    failed = [r for r in results if not r.passed]
    for r in failed:
        if r.error is not None:
            print(f"{r.name}: {r.error}", file=out)
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed "
          f"({time.perf_counter() - t_start:.1f} s)", file=out)
    return 1 if failed else 0


__all__ = ["run", "run_example", "Result", "compare", "describe"]
