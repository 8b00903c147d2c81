"""``nkisim demo``: run every example kernel on seeded inputs, check it against its NumPy
reference and print one table row per kernel.

Columns: kernel; input shapes and dtypes; max abs err = max |got - want|; max rel err =
max |got - want| / max |want| (normwise, so outputs near zero do not inflate it); PASS when every
element satisfies |got - want| <= ATOL + RTOL * |want| (the example's own tolerance) and is finite;
simulated wall time (one simulated call); NumPy time (best of 3 calls of the reference); their ratio;
the estimated device time on the target (``nkisim.profile(..., compute=False)``, µs: the cost
model's estimate, not a measurement; "-" when the estimate fails).
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

from . import progress

SEED = 0
MODEL = "tiny_llama"      # the name of the model section in ``--only``

_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32",
          "float8_e4m3": "fp8e4", "float8_e5m2": "fp8e5"}

_VERDICT = {True: "PASS", False: "FAIL", None: "skipped"}   # run_model's result, as printed

_COLUMNS = (("kernel", 10, "<"), ("inputs", 36, "<"), ("max abs err", 11, ">"),
            ("max rel err", 11, ">"), ("check", 5, "<"), ("sim ms", 9, ">"), ("numpy ms", 9, ">"),
            ("ratio", 8, ">"), ("est. us", 9, ">"))


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
    device_us: float | None = None

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
        device_us = _estimate(mod.KERNEL, inputs)
    except Exception as exc:  # reported as an ERROR row; the demo goes on with the next example
        from .errors import NkiError
        where = traceback.extract_tb(exc.__traceback__)[-1]
        # NkiError messages already end with the kernel's file:line; others get the raising frame.
        suffix = "" if isinstance(exc, NkiError) else f" [{os.path.basename(where.filename)}:{where.lineno}]"
        return Result(name, label, False, error=f"{type(exc).__name__}: {exc}{suffix}")
    return Result(name, label, passed, max_abs, max_rel, sim_s, numpy_s, device_us=device_us)


def _estimate(kernel, inputs) -> float | None:
    """The estimated device time of one call (µs), or None when the cost model cannot give it."""
    from .runtime.profiling import profile
    try:
        return profile(kernel, compute=False)(*inputs).total_us
    except Exception:       # the check above already ran the kernel: the estimate is extra
        return None


def _fmt_row(values) -> str:
    return "  ".join(f"{v:{align}{width}}" for v, (_, width, align) in zip(values, _COLUMNS))


def _cells(r: Result) -> list[str]:
    if r.error is not None:
        return [r.name, r.inputs, "-", "-", "ERROR", "-", "-", "-", "-"]
    return [r.name, r.inputs, f"{r.max_abs_err:.2e}", f"{r.max_rel_err:.2e}",
            "PASS" if r.passed else "FAIL", f"{r.sim_s * 1e3:.1f}", f"{r.numpy_s * 1e3:.2f}",
            f"{r.ratio:.1f}x" if r.ratio is not None else "-",
            f"{r.device_us:.1f}" if r.device_us is not None else "-"]


def run(small: bool = False, only: list | None = None, file: TextIO | None = None) -> int:
    """Run the examples (all, or those named in ``only``), print the table, then the tiny model
    section (``run_model``; in ``only`` it is named MODEL); return the exit code: 0 when every
    example and the model passed (or the model was skipped: torch absent), 1 when any failed or
    raised, 2 for an unknown name. The closing line names the model's verdict: PASS, FAIL or
    skipped."""
    from . import examples
    out = file if file is not None else sys.stdout
    with_model = not only or MODEL in only
    names = [n for n in only if n != MODEL] if only else list(examples.NAMES)
    unknown = [n for n in names if n not in examples.NAMES]
    if unknown:
        print(f"nkisim demo: unknown example(s) {', '.join(unknown)}; expected some of "
              f"{', '.join(examples.NAMES + (MODEL,))}", file=out)
        return 2
    failed = _run_examples(names, small, out) if names else []
    model_ok = None
    if with_model:
        if names:
            print(file=out)
        model_ok = run_model(small=small, file=out)
        if names:        # one closing line with both verdicts
            print(f"examples: {len(names) - len(failed)} passed, {len(failed)} failed; tiny model: "
                  f"{_VERDICT[model_ok]}", file=out)
    return 1 if failed or model_ok is False else 0


def _run_examples(names: list, small: bool, out: TextIO) -> list:
    """Print the example table; return the results that did not pass."""
    from .config import Settings
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
    with threadpool_limits(limits=1, user_api="blas"), \
            progress.bar(len(names), desc="nkisim demo: examples", unit=" kernels") as bar:
        for name in names:
            bar.set_description(f"nkisim demo: {name}")
            r = run_example(name, small=small)
            results.append(r)
            bar.update()
            progress.echo(bar, _fmt_row(_cells(r)), file=out)
    print("-" * len(header), file=out)
    failed = [r for r in results if not r.passed]
    for r in failed:
        if r.error is not None:
            print(f"{r.name}: {r.error}", file=out)
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed "
          f"({time.perf_counter() - t_start:.1f} s)", file=out)
    return failed


# ---------------------------------------------------------------------------------------------
# The tiny Llama (nkisim.models) in its three modes


def _toks(t) -> str:
    return " | ".join(" ".join(str(v) for v in row) for row in t.tolist())


def run_model(small: bool = False, file: TextIO | None = None) -> bool | None:
    """Generate with the tiny Llama in each mode; print tokens, max |logit - fallback logit|,
    time per token, per-kernel calls and simulator time. True when every mode gives the fallback's
    tokens, logits within ``models.logit_bound``, the simulator modes ran every kernel and no
    fallback, and the fallback mode ran no kernel. Full: fp32 and bf16, 8 tokens, inductor;
    small: fp32, 4 tokens, aot_eager (an inductor compile alone takes ~30 s). None (one line
    "tiny model: skipped ...") when torch is not installed: neither a pass nor a failure."""
    out = file if file is not None else sys.stdout
    try:
        import torch
    except ModuleNotFoundError:
        print("tiny model: skipped (torch is not installed; pip install nkisim[torch])", file=out)
        return None
    from threadpoolctl import threadpool_limits
    from .models import LlamaConfig, TinyLlama, demo_prompts, logit_bound
    dtypes = (torch.float32,) if small else (torch.float32, torch.bfloat16)
    n_new, backend = (4, "aot_eager") if small else (8, "inductor")
    c, prompts = LlamaConfig(), demo_prompts()
    n_params = TinyLlama(c).num_parameters()
    print(f"tiny Llama: {n_params / 1e6:.2f} M parameters (vocab {c.vocab_size}, hidden {c.hidden_size}, "
          f"{c.n_layers} layers, {c.n_q_heads} q / {c.n_kv_heads} kv heads x {c.head_dim}, MLP "
          f"{c.intermediate_size}), paged KV cache (blocks of {c.block_size}), 1 thread", file=out)
    print(f"prompts of {' and '.join(str(len(p)) for p in prompts)} tokens, {n_new} new tokens each "
          f"(greedy); modes: fallback (VLLM_NEURON_CPU_MODE=1), simulator (+ NKI_SIMULATOR=1), "
          f"compiled (+ torch.compile(fullgraph=True, backend={backend!r}))", file=out)
    if small:
        print("--small: float32 only, aot_eager instead of inductor (an inductor compile alone takes "
              "~30 s); the full demo runs float32 and bfloat16 with inductor", file=out)
    ok, t_start = True, time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            for dtype in dtypes:
                ok &= _model_table(dtype, prompts, n_new, backend, logit_bound(dtype, c), out)
    except Exception as exc:  # reported; the demo then exits non-zero
        where = traceback.extract_tb(exc.__traceback__)[-1]
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"tiny model: ERROR {type(exc).__name__}: {first} [{os.path.basename(where.filename)}:"
              f"{where.lineno}]", file=out)
        ok = False
    finally:
        torch.set_num_threads(threads)
    print(f"tiny model: {'PASS' if ok else 'FAIL'} ({time.perf_counter() - t_start:.1f} s)", file=out)
    return ok


def _model_table(dtype, prompts, n_new, backend, rel_bound, out) -> bool:
    """One dtype's table of the three modes. On a terminal, a bar ticks once per mode and a second
    counts the mode's kernel launches while it runs; both are gone before the table prints."""
    from .cli import count_launches
    from .models import MODES, run_mode
    runs, name = {}, str(dtype).replace("torch.", "")
    with progress.bar(len(MODES), desc=f"tiny model: {name}", unit=" modes") as bar:
        for m in MODES:
            bar.set_description(f"tiny model: {name} {m}")
            launches = progress.bar(None, desc="  kernel launches", unit=" launches")
            with launches, count_launches(launches):
                runs[m] = run_mode(m, dtype=dtype, prompts=prompts, n_new=n_new, backend=backend)
            bar.update()
    ref = runs["fallback"].generation
    bound = rel_bound * float(ref.logits.abs().max())
    print(f"\n{str(dtype).replace('torch.', '')}: max |dlogit| bound {bound:.2e}", file=out)
    w = max(len("tokens (seq 0 | seq 1)"), *(len(_toks(r.generation.tokens)) for r in runs.values()))
    print(f"{'mode':<10}  {'tokens (seq 0 | seq 1)':<{w}}  {'max |dlogit|':>12}  {'prefill ms':>10}  "
          f"{'ms/token':>9}  check", file=out)
    ok = True
    for mode, r in runs.items():
        g = r.generation
        diff = float((g.logits - ref.logits).abs().max())
        kernels_ok = (all(v == 0 for v in r.kernel_calls.values()) if mode == "fallback" else
                      all(v > 0 for v in r.kernel_calls.values())
                      and all(v == 0 for v in r.fallback_calls.values()))
        good = _equal(g.tokens, ref.tokens) and diff <= bound and kernels_ok and bool(r.kernel_calls)
        ok &= good
        note = f" (compile + first run {r.compile_s:.1f} s)" if r.compile_s is not None else ""
        print(f"{mode:<10}  {_toks(g.tokens):<{w}}  {diff:>12.2e}  {g.prefill_s * 1e3:>10.1f}  "
              f"{r.s_per_token * 1e3:>9.1f}  {'PASS' if good else 'FAIL'}{note}", file=out)
    sim, fb, comp = runs["simulator"], runs["fallback"], runs["compiled"]
    print(f"{'kernel':<32}  {'sim calls':>9}  {'compiled calls':>14}  {'fallback calls':>14}", file=out)
    for name in sorted(sim.kernel_calls):
        print(f"{name:<32}  {sim.kernel_calls[name]:>9}  {comp.kernel_calls.get(name, 0):>14}  "
              f"{fb.fallback_calls.get(name, 0):>14}", file=out)
    print(f"{'op (eager wall time)':<32}  {'calls':>9}  {'simulator ms':>14}  {'fallback ms':>14}",
          file=out)
    for op, sec in sim.op_seconds.items():
        print(f"{op:<32}  {sim.op_calls[op]:>9}  {sec * 1e3:>14.1f}  {fb.op_seconds[op] * 1e3:>14.2f}",
              file=out)
    return ok


def _equal(a, b) -> bool:
    return a.shape == b.shape and bool((a == b).all())


__all__ = ["run", "run_example", "run_model", "Result", "compare", "describe"]
