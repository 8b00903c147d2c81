"""nkisim benchmarks: every figure is a ratio to plain NumPy computing the same result on the same
inputs in the same run. BLAS is pinned to one thread (threadpoolctl). Each case warms up both sides
once, then alternates one simulator run and one reference run several times (interleaved, so the
machine's speed drift hits both series alike); the figure is the ratio of the two medians.
Prints a table and writes the figures as JSON.

Four cases have another baseline: ``lnc2_add`` (the LNC1 simulation), ``lnc2_launch_trivial``
(an LNC1 launch of the same trivial kernel),
``profile512_fp32_tutorial_tiled`` (``nki.simulate`` of the same kernel: what the estimate costs)
and ``timing_only2048_bf16`` (``nki.simulate`` of the same kernel: what ``compute=False`` saves).
The three ``matmul*`` cases of the benchmark kernel also time ``tile_loop``, the same tiled
algorithm written plainly in NumPy (same bits), and print sim/loop: what simulating costs over the
kernel's own arithmetic (issue 14).

Usage: python benchmarks/run.py [--quick] [--json PATH] [--only NAME,...]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels  # noqa: E402
import tutorial_kernels  # noqa: E402

import nkisim.nki as nki  # noqa: E402

BF16 = ml_dtypes.bfloat16
TARGETS = {"matmul512_fp32": 2.0, "matmul512_bf16": 3.0, "softmax": 3.0, "rmsnorm": 3.0,
           "tensor_tensor_overhead": 2.0, "partial_tile_adds": 3.0, "matmul512_fp32_tutorial_tiled": 2.0,
           "matmul512_fp32_tutorial_hoist": 2.0, "profile512_fp32_tutorial_tiled": 1.5,
           "timing_only2048_bf16": 0.1, "lnc2_launch_trivial": 1.5, "tiny_llama_decode": 5.0}
TARGETS["flash_attention_s1024"] = 2.0      # issue 14; S=4096 is measured, with no target
# matmul512_fp32_tutorial_nl has no target: by the nl API's definition each K step makes a new
# PSUM tile (nl.matmul) and adds it to the accumulator (+=), one more tile write and add per step
# than nc_matmul's in-place accumulation; it is measured and reported (README).
TUTORIAL = {"tiled": "tutorial-style nisa tiled kernel", "hoist": "tutorial-style hoisted loads",
            "nl": "tutorial-style nl.load/nl.matmul"}


def _seconds(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved_times(sim_fn, ref_fn, repeat, loop_fn=None):
    """Median seconds of ``sim_fn`` and of ``ref_fn``, plus timing details for the JSON.

    Three warm-up calls of each, then ``repeat`` rounds of one ``sim_fn`` call followed by one
    ``ref_fn`` call, so a slow or fast spell of the machine lands on both series. ``loop_fn`` (a
    second reference, the equal-algorithm NumPy loop) runs third in every round; its median is
    ``loop_s`` in the details, with ``sim_over_loop`` and ``loop_over_reference``.
    """
    fns = (sim_fn, ref_fn) if loop_fn is None else (sim_fn, ref_fn, loop_fn)
    for _ in range(3):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, t in zip(fns, times):
            t.append(_seconds(fn))
    t_sim, t_ref = times[0], times[1]
    pair = statistics.median(s / r for s, r in zip(t_sim, t_ref))
    extra = {"timing": "interleaved", "runs": repeat, "pair_ratio_median": pair,
             "sim_s_min": min(t_sim), "reference_s_min": min(t_ref)}
    med_sim, med_ref = statistics.median(t_sim), statistics.median(t_ref)
    if loop_fn is not None:
        med_loop = statistics.median(times[2])
        extra.update(loop_s=med_loop, sim_over_loop=med_sim / med_loop, loop_over_reference=med_loop / med_ref)
    return med_sim, med_ref, extra


def tile_loop(lhsT, rhs, tk=128, tm=128, tn=512):
    """``kernels.matmul_tiled`` written plainly with NumPy: the same (tm, tn) output tiles, each
    the fp32 sum over K of (tk, tm).T @ (tk, tn) tile products added in K order (the first
    product written, the others added, as PSUM accumulates), then rounded once into the output
    dtype. Each loaded tile is converted to fp32 once (bf16: its bits shifted up 16, exact).
    Gives the simulator's bits (``case_matmul`` checks): the floor for any simulator of that
    kernel, whose time over this loop's is what simulating costs."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = np.empty((M, N), lhsT.dtype)
    acc = np.empty((tm, tn), np.float32)
    for m in range(0, M, tm):
        for n in range(0, N, tn):
            for k in range(0, K, tk):
                s, v = _f32(lhsT[k:k + tk, m:m + tm]), _f32(rhs[k:k + tk, n:n + tn])
                if k == 0:
                    np.matmul(s.T, v, out=acc)
                else:
                    acc += s.T @ v
            out[m:m + tm, n:n + tn] = acc
    return out


def _f32(tile):
    """A float32 or bfloat16 tile as float32 (bf16 is the top half of a float32)."""
    if tile.dtype == np.float32:
        return tile
    return (tile.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def case_matmul(n, dtype, repeat, kernel=kernels.matmul_tiled):
    """``kernel(lhsT, rhs)`` (n, n, n) vs one numpy.matmul fp32 of the same (upcast) inputs; the
    benchmark kernel is also timed against ``tile_loop`` (same bits, asserted)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    sim = nki.simulate(kernel)
    out = sim(a, b)
    ref = af.T @ bf
    err = float(np.max(np.abs(out.astype(np.float32) - ref)) / np.max(np.abs(ref)))
    loop = None
    if kernel is kernels.matmul_tiled:
        if not np.array_equal(tile_loop(a, b).view(np.uint8), out.view(np.uint8)):
            raise AssertionError("tile_loop and the simulator differ: the loop is not the kernel's algorithm")
        loop = lambda: tile_loop(a, b)      # noqa: E731
    t_sim, t_np, timing = interleaved_times(lambda: sim(a, b), lambda: af.T @ bf, repeat, loop)
    return t_sim, t_np, {"max_rel_err": err, "kernel": f"{kernel.__module__}.{kernel.__name__}",
                         **timing}


def case_tutorial(variant, repeat, n=512):
    """A tiled matmul written in the public NKI tutorial's style (benchmarks/tutorial_kernels.py)."""
    t_sim, t_np, extra = case_matmul(n, np.float32, repeat, tutorial_kernels.KERNELS[variant])
    return t_sim, t_np, {**extra, "style": TUTORIAL[variant]}


def _placed(shape, page_offset, dtype=np.float32):
    """An empty C-contiguous array starting ``page_offset`` bytes into a 4 KiB page."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = np.empty(nbytes + 4096, np.uint8)
    start = (page_offset - buf.ctypes.data) % 4096
    return buf[start:start + nbytes].view(dtype).reshape(shape)


def _fastest_out(a, b, trials=50):
    """An output array for ``np.add(a, b, out=...)`` placed where NumPy runs fastest: large arrays
    often share a page offset, and a store stream at an unlucky distance (mod 4 KiB) from a load
    stream stalls the CPU ("4K aliasing", up to 2x here). Tries 16 placements 256 bytes apart."""
    buf = np.empty(a.nbytes + 8192, np.uint8)
    outs = []
    for k in range(16):
        start = (a.ctypes.data + 256 * k - buf.ctypes.data) % 4096
        outs.append(buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape))
    best = [float("inf")] * 16
    for _ in range(3):                      # three passes: a slow spell hits every placement
        for k, c in enumerate(outs):
            t0 = time.perf_counter()
            for _ in range(trials):
                np.add(a, b, out=c)
            best[k] = min(best[k], time.perf_counter() - t0)
    return outs[best.index(min(best))]


def case_overhead(repeat, n_ops=1000):
    """1,000 tensor_tensor adds of one (128, 512) fp32 tile pair vs 1,000 NumPy adds of the same
    arrays. The NumPy reference writes into one output array placed, relative to the inputs' page
    offsets (the faster of NumPy's ways here; a fresh ``a + b`` result may share their page
    offset and run at half speed, which would flatter the simulator). The JSON also gives that
    fresh-result timing."""
    rng = np.random.default_rng(0)
    a = _placed((128, 512), 0)              # fixed page offsets: the same case in every process
    b = _placed((128, 512), 1344)
    a[...] = rng.standard_normal((128, 512), dtype=np.float32)
    b[...] = rng.standard_normal((128, 512), dtype=np.float32)
    c = _fastest_out(a, b)
    sim = nki.simulate(kernels.tensor_tensor_loop)
    np.testing.assert_array_equal(sim(a, b, 3), a + b)

    def numpy_loop():
        for _ in range(n_ops):
            np.add(a, b, out=c)
        return c

    def numpy_fresh():
        for _ in range(n_ops):
            d = a + b
        return d
    t_sim, t_np, timing = interleaved_times(lambda: sim(a, b, n_ops), numpy_loop, repeat)
    _, t_fresh, _ = interleaved_times(numpy_fresh, numpy_loop, max(3, repeat // 2))
    return t_sim, t_np, {"us_per_op_sim": t_sim / n_ops * 1e6, "us_per_op_numpy": t_np / n_ops * 1e6,
                         "us_per_op_numpy_fresh_result": t_fresh / n_ops * 1e6, **timing}


def partial_tile_reference(a, b, n_ops):
    """NumPy doing what ``kernels.partial_tile_loop`` does, on the same views (built per add as
    the kernel builds them), into one output array."""
    P, F = a.shape
    W = F // 4
    c = np.subtract(a, b)
    for i in range(n_ops):
        if i % 2 == 0:
            np.add(a[0:P // 2, 0:F // 2], b[0:P // 2, 0:F // 2], out=c[0:P // 2, 0:F // 2])
        else:
            j = (i // 2) % 4
            np.add(a[:, j * W:(j + 1) * W], b[:, j * W:(j + 1) * W], out=c[:, j * W:(j + 1) * W])
    return c


def case_partial_tiles(repeat, n_ops=1000):
    """1,000 tensor_tensor adds on partial views of (128, 512) fp32 SBUF tiles (a (64, 256)
    corner and (128, 128) column blocks, alternating) vs NumPy adding the same views of the same
    arrays (``partial_tile_reference``)."""
    rng = np.random.default_rng(0)
    a = _placed((128, 512), 0)
    b = _placed((128, 512), 1344)
    a[...] = rng.standard_normal((128, 512), dtype=np.float32)
    b[...] = rng.standard_normal((128, 512), dtype=np.float32)
    sim = nki.simulate(kernels.partial_tile_loop)
    np.testing.assert_array_equal(sim(a, b, 7), partial_tile_reference(a, b, 7))
    t_sim, t_np, timing = interleaved_times(lambda: sim(a, b, n_ops),
                                            lambda: partial_tile_reference(a, b, n_ops), repeat)
    return t_sim, t_np, {"us_per_op_sim": t_sim / n_ops * 1e6, "us_per_op_numpy": t_np / n_ops * 1e6,
                         **timing}


def case_lnc2(repeat):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4096, 512), dtype=np.float32)
    b = rng.standard_normal((4096, 512), dtype=np.float32)
    lnc1 = nki.simulate(kernels.add_lnc)
    lnc2 = nki.simulate(kernels.add_lnc)[2]
    np.testing.assert_array_equal(lnc2(a, b), a + b)
    t2, t1, timing = interleaved_times(lambda: lnc2(a, b), lambda: lnc1(a, b), repeat)
    return t2, t1, {"baseline": "LNC1 simulation of the same kernel", **timing}


def case_lnc2_launch(repeat):
    """An LNC2 launch of a trivial kernel (two rows copied, one per core) against an LNC1 launch
    of it (both rows on one core): what the second core costs when there is almost no work
    (issue 14: target <= 1.5)."""
    a = np.arange(16, dtype=np.float32).reshape(2, 8)
    lnc1 = nki.simulate(kernels.trivial)
    lnc2 = nki.simulate(kernels.trivial)[2]
    np.testing.assert_array_equal(lnc2(a), a)
    np.testing.assert_array_equal(lnc1(a), a)
    t2, t1, timing = interleaved_times(lambda: lnc2(a), lambda: lnc1(a), repeat * 20)
    return t2, t1, {"baseline": "LNC1 launch of the same kernel", **timing}


def case_example(name, repeat):
    """Time a kernel from nkisim.examples against its NumPy reference."""
    import importlib
    mod = importlib.import_module(f"nkisim.examples.{name}")
    inputs = mod.make_inputs(np.random.default_rng(0), small=False)
    sim = nki.simulate(mod.KERNEL)
    out = sim(*inputs)
    ref = mod.reference(*inputs)
    err = float(np.max(np.abs(np.asarray(out, np.float32) - np.asarray(ref, np.float32))))
    t_sim, t_np, timing = interleaved_times(lambda: sim(*inputs), lambda: mod.reference(*inputs),
                                            repeat)
    return t_sim, t_np, {"max_abs_err": err, "shapes": [list(x.shape) for x in inputs], **timing}


_MEM_CHILD = r"""
import sys, tracemalloc, numpy as np, ml_dtypes
sys.path.insert(0, sys.argv[1])
import kernels, nkisim.nki as nki
n = int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
b = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
tracemalloc.start()                       # NumPy reports its data buffers to tracemalloc
out = nki.simulate(kernels.matmul_tiled)(a, b)
_, peak = tracemalloc.get_traced_memory()
print(peak, a.nbytes + b.nbytes, a.nbytes + b.nbytes + out.nbytes)
"""


def case_profile(repeat, n=512):
    """``nkisim.profile`` (simulate + record + estimate) of the tutorial's tiled matmul vs
    ``nki.simulate`` of the same kernel on the same inputs: the cost of the estimate."""
    import nkisim
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    kernel = tutorial_kernels.tiled_matmul
    sim = nki.simulate(kernel)
    prof = nkisim.profile(kernel)
    t_prof, t_sim, timing = interleaved_times(lambda: prof(a, b), lambda: sim(a, b), repeat)
    return t_prof, t_sim, {"estimate_us": prof(a, b).total_us, **timing}


def case_profile_timing_only(m=4096, k=8192, n=8192):
    """``nkisim.profile(compute=False)`` of the tutorial's hoisted bf16 matmul at (m, k, n) vs one
    numpy.matmul fp32 of the same (upcast) inputs; one run each (the GEMM alone takes seconds)."""
    import nkisim
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(BF16)
    prof = nkisim.profile(tutorial_kernels.hoisted_matmul, compute=False)
    t0 = time.perf_counter()
    p = prof(a, b)
    t_prof = time.perf_counter() - t0
    af, bf = a.astype(np.float32), b.astype(np.float32)
    t_np = _seconds(lambda: af.T @ bf)
    return t_prof, t_np, {"estimate_us": p.total_us, "instructions": len(p.records), "shape": [m, k, n],
                          "timing": "one run each"}


def case_timing_only_vs_compute(repeat, n=2048):
    """``nkisim.profile(compute=False)`` vs ``nki.simulate`` of the bf16 tiled matmul (n, n, n):
    what skipping the arithmetic saves (target: at least 10x faster, a ratio <= 0.1)."""
    import nkisim
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(BF16)
    sim = nki.simulate(kernels.matmul_tiled)
    prof = nkisim.profile(kernels.matmul_tiled, compute=False)
    t_prof, t_sim, timing = interleaved_times(lambda: prof(a, b), lambda: sim(a, b), repeat)
    return t_prof, t_sim, {"estimate_us": prof(a, b).total_us, **timing}


def case_memory(n=2048):
    """(peak bytes allocated during the simulation, input bytes, input + output bytes) in a fresh
    process. The peak counts NumPy buffers and Python objects, traced by tracemalloc from the
    call's start (the output included); the caller's inputs exist before it, so the process's
    peak is inputs + that. Not traced: BLAS's own fixed work buffers (part of the fixed 300 MB)."""
    here = os.path.dirname(os.path.abspath(__file__))
    res = subprocess.run([sys.executable, "-c", _MEM_CHILD, here, str(n)], capture_output=True,
                         text=True, check=True)
    extra, in_bytes, io_bytes = map(int, res.stdout.split())
    return extra, in_bytes, io_bytes


FLASH_SHAPE = {"Hq": 4, "Hkv": 2, "D": 128, "dtype": "float32", "causal": True}


def case_flash_attention(S, repeat):
    """``nkisim.kernels.attention.flash_attention_kernel`` (LNC2, as ``flash_attention`` routes
    it) on q [S, Hq, D], k, v [S, Hkv, D] fp32, causal, vs torch's ``scaled_dot_product_attention``
    on the same tensors ([Hq, S, D] views, ``enable_gqa=True``), one torch thread. Imports torch:
    a missing torch skips the case."""
    import torch
    import torch.nn.functional as F
    from nkisim.kernels.attention import flash_attention_kernel
    Hq, Hkv, D = FLASH_SHAPE["Hq"], FLASH_SHAPE["Hkv"], FLASH_SHAPE["D"]
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((S, h, D), dtype=np.float32) for h in (Hq, Hkv, Hkv))
    scale = D ** -0.5
    sim = nki.simulate(flash_attention_kernel)[2]
    qt, kt, vt = (torch.from_numpy(x).transpose(0, 1) for x in (q, k, v))

    def sdpa():
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale, enable_gqa=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = sim(q, k, v, scale, True)
        err = float(np.max(np.abs(out - sdpa().transpose(0, 1).numpy())))
        t_sim, t_ref, timing = interleaved_times(lambda: sim(q, k, v, scale, True), sdpa, repeat)
    finally:
        torch.set_num_threads(threads)
    return t_sim, t_ref, {"max_abs_err": err, "shape": {"S": S, **FLASH_SHAPE}, "lnc": 2, **timing}


def case_tiny_llama(repeat, n_new=8):
    """Tiny Llama decode time per generated token: simulator (eager) vs PyTorch fallbacks."""
    import model  # imports torch: a missing torch skips the case
    res = model.measure(n_new=n_new, repeat=repeat)
    sim, ref = res["simulator"], res["fallback"]
    return sim["s_per_token"], ref["s_per_token"], {
        "unit": "seconds per generated token (decode)", "n_new": n_new, "prompt_lens": [11, 23],
        "prefill_sim_s": sim["prefill_s"], "prefill_fallback_s": ref["prefill_s"],
        "max_abs_logit_diff": sim["max_abs_logit_diff"],
        "timing": "interleaved generations, median per mode (model.py)"}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats, skip 2048^3")
    parser.add_argument("--json", default="bench-results.json")
    parser.add_argument("--only", default=None)
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    rep = 5 if args.quick else 11
    rep512 = 9 if args.quick else 41        # the 512^3 cases take milliseconds: more rounds
    cases = [
        ("matmul512_fp32", "one numpy.matmul fp32", lambda: case_matmul(512, np.float32, rep512)),
        ("matmul512_bf16", "one numpy.matmul fp32", lambda: case_matmul(512, BF16, rep512)),
        ("matmul2048_bf16", "one numpy.matmul fp32", lambda: case_matmul(2048, BF16, max(1, rep // 2))),
        ("matmul512_fp32_tutorial_tiled", "one numpy.matmul fp32", lambda: case_tutorial("tiled", rep512)),
        ("matmul512_fp32_tutorial_hoist", "one numpy.matmul fp32", lambda: case_tutorial("hoist", rep512)),
        ("matmul512_fp32_tutorial_nl", "one numpy.matmul fp32", lambda: case_tutorial("nl", rep512)),
        ("softmax", "NumPy softmax", lambda: case_example("softmax", rep)),
        ("rmsnorm", "NumPy RMSNorm", lambda: case_example("rmsnorm", rep)),
        ("tensor_tensor_overhead", "1000 NumPy adds", lambda: case_overhead(rep)),
        ("partial_tile_adds", "1000 NumPy adds, same views", lambda: case_partial_tiles(rep)),
        ("lnc2_add", "LNC1 simulation", lambda: case_lnc2(rep)),
        ("lnc2_launch_trivial", "LNC1 launch", lambda: case_lnc2_launch(rep)),
        ("profile512_fp32_tutorial_tiled", "nki.simulate, same kernel", lambda: case_profile(rep512)),
        ("profile_4096x8192x8192_bf16_timing_only", "one numpy.matmul fp32", case_profile_timing_only),
        ("timing_only2048_bf16", "nki.simulate, same kernel", lambda: case_timing_only_vs_compute(max(1, rep // 2))),
        ("flash_attention_s1024", "torch SDPA, same shapes", lambda: case_flash_attention(1024, rep)),
        ("flash_attention_s4096", "torch SDPA, same shapes", lambda: case_flash_attention(4096, max(3, rep // 2))),
        ("tiny_llama_decode", "PyTorch fallbacks, per token", lambda: case_tiny_llama(rep)),
    ]
    if args.quick:
        cases = [c for c in cases if c[0] not in ("matmul2048_bf16", "profile_4096x8192x8192_bf16_timing_only",
                                                  "timing_only2048_bf16", "flash_attention_s4096")]
    results = {"machine": {"python": platform.python_version(), "numpy": np.__version__,
                           "cpu_count": os.cpu_count()}, "cases": {}}
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        results["machine"]["blas"] = [(i.get("internal_api"), i.get("num_threads"))
                                      for i in threadpool_info() if i.get("user_api") == "blas"]
        for name, baseline, fn in cases:
            if only and name not in only:
                continue
            try:
                t_sim, t_ref, extra = fn()
            except ModuleNotFoundError as exc:
                rows.append((name, "-", "-", "-", "-", f"skipped: {exc}"))
                continue
            ratio = t_sim / t_ref
            target = TARGETS.get(name)
            verdict = "" if target is None else ("ok" if ratio <= target else "OVER")
            results["cases"][name] = {"sim_s": t_sim, "reference_s": t_ref, "ratio": ratio,
                                      "baseline": baseline, "target": target, **extra}
            note = f"{verdict} vs {baseline}" + (f" ({extra['style']})" if "style" in extra else "")
            if "loop_s" in extra:
                note += (f"; sim/loop {extra['sim_over_loop']:.2f} (equal-algorithm NumPy tile loop "
                         f"{extra['loop_s'] * 1e3:.2f} ms, loop/numpy {extra['loop_over_reference']:.2f})")
            rows.append((name, f"{t_sim * 1e3:.2f}", f"{t_ref * 1e3:.2f}", f"{ratio:.2f}",
                         "-" if target is None else f"<= {target}", note))
        if not only or "memory2048_bf16" in only:
            if not args.quick:
                extra, in_bytes, io_bytes = case_memory()
                peak = in_bytes + extra             # the inputs exist before the call
                ratio = peak / io_bytes
                limit = (2 * io_bytes + 300e6) / io_bytes     # 2x (inputs + outputs) + 300 MB
                results["cases"]["memory2048_bf16"] = {"extra_peak_bytes": extra, "input_bytes": in_bytes,
                                                       "peak_bytes": peak, "io_bytes": io_bytes,
                                                       "ratio": ratio, "target": limit}
                rows.append(("memory2048_bf16", f"{peak / 2**20:.0f} MiB", f"{io_bytes / 2**20:.0f} MiB",
                             f"{ratio:.2f}", f"<= {limit:.2f}",
                             ("ok" if ratio <= limit else "OVER") + " peak (inputs + all allocated during "
                                                                   "the call) / (inputs + outputs)"))
    header = ("case", "sim ms", "numpy ms", "ratio", "target", "note")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
