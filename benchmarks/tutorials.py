"""Estimated device time of the public NKI tutorials' kernels, run unmodified from a checkout.

Usage: python benchmarks/tutorials.py SDK_CHECKOUT [--sdk226 CHECKOUT] [--target trn1] [--check]
       [--loop-tile-buffers K] [--no-large]

``SDK_CHECKOUT`` is a checkout of aws-neuron/aws-neuron-sdk; its files
``nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py`` and
``nki/examples/fused_mamba/mamba_nki_kernels.py`` are imported as they are (nothing of them is
copied here) and each kernel is profiled with ``nkisim.profile(compute=False)`` at the shapes the
tutorials (nki/guides/tutorials/matrix_multiplication.rst, fused_mamba.rst) benchmark:

- matmul: ``[4096, 1024] @ [1024, 2048]`` bf16 (the tutorial's torch check), kernels tiled ->
  hoisted loads -> blocked free dimension -> fully optimised, which the tutorial says improve in
  that order; the basic kernel at its one-tile shape (lhsT [128, 64], rhs [128, 512]); and the
  same four at ``[4096, 8192] @ [8192, 8192]`` bf16, where the v2.26.0 tutorial
  (general/nki/tutorials/matrix_multiplication.rst) publishes Trn1 latencies 51.80 / 42.96 /
  22.07 / 6.97 ms and HFU 10.98 / 13.24 / 26.51 / 85.24 % (``--no-large`` skips them: ~1 min).
- Mamba ``[batch, seq_len, channels, state_size]``: v1 at [1, 512, 256, 16] (published 172.93 us),
  v1 / v2 / v3 at [1, 512, 4096, 16] (published 2.34 ms, 1.61 ms, 1.6 ms) and v2 / v3 at
  longer seq_len (the tutorial's table: 2048 -> 8.9 / 6.6 ms, 8192 -> 52.2 / 27.8 ms).
- ``--sdk226 CHECKOUT`` (aws-neuron-sdk at v2.26.0, Beta-1 ``neuronxcc.nki`` kernels under
  ``general/nki/examples``): the LayerNorm tutorial's v1 / v2 at (300, 1000) fp32 (published
  p50 2311 us / 1969 us on trn1, general/nki/tutorials/layernorm.rst) and that release's
  mamba_v1, whose loop order (state outer, channel tiles inner) is the one fused_mamba.rst
  describes and measured; and (unless ``--no-large``) that release's four Beta-1 matmul steps at
  ``[4096, 8192] @ [8192, 8192]``, the kernels those published latencies were measured for.
  Decision: their step order is printed, not checked (exit status). (The fully optimised kernel
  zeroes each PSUM tile with ``nl.zeros`` inside its innermost tile loop; as the docs' PSUM
  accumulation pattern says, that fill is the first matmul's overwrite, no memset: beta1.zeros.)

It prints each estimate, the published latency where a tutorial gives one and estimate /
published, and whether each step improves as the tutorial says: by more than ``MIN_GAIN``
(Decision: 1 %; estimates closer than that are equal, not an improvement). Decision: the
published figures are compared with the ``trn1`` estimate by default (the tutorials were written
in 2024 against the Trainium / Inferentia2 architecture guide, before trn2; the matmul and
LayerNorm tables say Trn1). ``--check`` also runs the matmul kernels with compute on and compares
them with NumPy; ``--loop-tile-buffers K`` sets the physical buffers of a loop body's tile
(``Settings.loop_tile_buffers``; default the setting's). Exit status 1 when a step does not
improve. Not part of CI (the checkout comes from the network).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
import nkisim  # noqa: E402

MATMUL = "nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py"
MAMBA = "nki/examples/fused_mamba/mamba_nki_kernels.py"
LAYERNORM_226 = "general/nki/examples/layernorm/layernorm_nki_kernel.py"
MATMUL_226 = "general/nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py"
MAMBA_226 = "general/nki/examples/fused_mamba/mamba_nki_kernels.py"
MIN_GAIN = 0.01          # Decision: a step improves when its estimate is more than 1 % lower
# v2.26.0 matrix_multiplication.rst: [4096,8192] @ [8192,8192] bf16 on Trn1.32xlarge, (ms, HFU %)
MATMUL_LARGE_PUBLISHED = {"nki_matmul_tiled_": (51.80, 10.98), "nki_matmul_hoist_load_": (42.96, 13.24),
                          "nki_matmul_block_free_dimension_": (22.07, 26.51),
                          "nki_matmul_fully_optimized_": (6.97, 85.24)}
# v2.26.0 layernorm.rst: input (300, 1000) fp32, measured on trn1, NCLatency p50 (us)
LAYERNORM_PUBLISHED = {"nki_layernorm_kernel_v1": 2311.0, "nki_layernorm_kernel_v2": 1969.0}
MATMUL_STEPS = ("nki_matmul_tiled_", "nki_matmul_hoist_load_", "nki_matmul_block_free_dimension_",
                "nki_matmul_fully_optimized_")
# (kernel, (batch, seq_len, channels, state_size)) -> published device latency in us
# (nki/guides/tutorials/fused_mamba.rst: the text and its seq_len scaling table)
MAMBA_PUBLISHED = {
    ("mamba_v1", (1, 512, 256, 16)): 172.93,
    ("mamba_v1", (1, 512, 4096, 16)): 2340.0,
    ("mamba_v2", (1, 512, 4096, 16)): 1610.0,
    ("mamba_v3", (1, 512, 4096, 16)): 1600.0,
    ("mamba_v2", (1, 2048, 4096, 16)): 8900.0,
    ("mamba_v3", (1, 2048, 4096, 16)): 6600.0,
    ("mamba_v2", (1, 8192, 4096, 16)): 52200.0,
    ("mamba_v3", (1, 8192, 4096, 16)): 27800.0,
}
# each (faster, slower) pair the tutorial says improves, at one shape
MAMBA_STEPS = (("mamba_v2", "mamba_v1", (1, 512, 4096, 16)), ("mamba_v3", "mamba_v2", (1, 2048, 4096, 16)),
               ("mamba_v3", "mamba_v2", (1, 8192, 4096, 16)))


def load(checkout: str, rel: str):
    """Import one tutorial file from the checkout, unmodified."""
    path = os.path.join(checkout, rel)
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(rel))[0], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def profile(kernel, args, target, buffers=None, with_profile=False):
    """(estimate us, seconds taken, error text or None[, the Profile or None])."""
    t0 = time.perf_counter()
    opts = {} if buffers is None else {"loop_tile_buffers": buffers}
    try:
        p = nkisim.profile(kernel, target=target, compute=False, **opts)(*args)
    except Exception as exc:    # report the kernel that does not run, go on with the others
        err = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        return (None, time.perf_counter() - t0, err) + ((None,) if with_profile else ())
    return (p.total_us, time.perf_counter() - t0, None) + ((p,) if with_profile else ())


def improves(faster, slower) -> bool:
    """``faster`` is more than MIN_GAIN below ``slower`` (both estimates, us)."""
    return faster is not None and slower is not None and faster < slower * (1 - MIN_GAIN)


def mamba_inputs(batch, seq_len, channels, state_size):
    rng = np.random.default_rng(0)
    f = np.float32
    return (rng.random((batch, channels, seq_len), dtype=f), rng.random((batch, channels, seq_len), dtype=f),
            -rng.random((channels, state_size), dtype=f), rng.random((batch, state_size, seq_len), dtype=f),
            rng.random((batch, state_size, seq_len), dtype=f))


def row(name, shape, est, published, secs, err):
    ratio = f"{est / published:6.2f}" if est is not None and published else "     -"
    pub = f"{published:10.1f}" if published else "         -"
    val = f"{est:10.1f}" if est is not None else "     error"
    print(f"{name:42s} {shape:22s} {val} {pub} {ratio}  {secs:6.1f} s" + (f"  {err}" if err else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout")
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--check", action="store_true", help="also run the matmul kernels with compute on")
    ap.add_argument("--loop-tile-buffers", type=int, default=None, metavar="K",
                    help="physical buffers of a loop body's tile (default: NKISIM_LOOP_TILE_BUFFERS or 2)")
    ap.add_argument("--sdk226", metavar="CHECKOUT", help="aws-neuron-sdk at v2.26.0: LayerNorm v1/v2, Beta-1 mamba_v1")
    ap.add_argument("--no-large", action="store_true", help="skip the [4096,8192]@[8192,8192] matmul steps")
    a = ap.parse_args(argv)
    mm, mb = load(a.checkout, MATMUL), load(a.checkout, MAMBA)
    print(f"target {a.target}; estimates in us (nkisim.profile(compute=False)); published: the tutorial's "
          f"hardware figure")
    print(f"{'kernel':42s} {'shape':22s} {'estimate':>10s} {'published':>10s} {'ratio':>6s}")
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(0)
    lhsT = rng.random((1024, 4096), dtype=np.float32).astype(bf16)
    rhs = rng.random((1024, 2048), dtype=np.float32).astype(bf16)
    ok = True
    est, secs, err = profile(mm.nki_matmul_basic_, (rng.random((128, 64), dtype=np.float32),
                                                    rng.random((128, 512), dtype=np.float32)),
                             a.target, a.loop_tile_buffers)
    row("nki_matmul_basic_", "[64,128]@[128,512]", est, None, secs, err)
    prev = None
    for name in MATMUL_STEPS:
        est, secs, err = profile(getattr(mm, name), (lhsT, rhs), a.target, a.loop_tile_buffers)
        row(name, "[4096,1024]@[1024,2048]", est, None, secs, err)
        if est is None or (prev is not None and not improves(est, prev)):
            ok = False
        prev = est
        if a.check and est is not None:
            out = nkisim.nki.simulate(getattr(mm, name))(lhsT, rhs)
            ref = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
            print(f"  {name}: max |out - numpy| / max |numpy| = "
                  f"{np.max(np.abs(np.asarray(out, np.float32) - ref)) / np.max(np.abs(ref)):.2e}")
    print(f"matmul steps improve in the tutorial's order: {'yes' if ok else 'NO'}")
    if not a.no_large:
        big_l = np.zeros((8192, 4096), bf16)
        big_r = np.zeros((8192, 8192), bf16)
        prev, big_ok = None, True
        for name in MATMUL_STEPS:
            est, secs, err, p = profile(getattr(mm, name), (big_l, big_r), a.target, a.loop_tile_buffers, True)
            ms, hfu = MATMUL_LARGE_PUBLISHED[name]
            row(name, "[4096,8192]@[8192,8192]", est, ms * 1000, secs, err)
            if p is not None:
                print(f"  HFU estimate {100 * p.hfu:.1f} %, published {hfu} %")
            if est is None or (prev is not None and not improves(est, prev)):
                big_ok = False
            prev = est
        print(f"matmul steps at [4096,8192]@[8192,8192] improve in the tutorial's order: {'yes' if big_ok else 'NO'}")
        ok = ok and big_ok
    got = {}
    for (name, shape), published in MAMBA_PUBLISHED.items():
        est, secs, err = profile(getattr(mb, name), mamba_inputs(*shape), a.target, a.loop_tile_buffers)
        got[name, shape] = est
        row(name, str(list(shape)).replace(" ", ""), est, published, secs, err)
    if a.sdk226:
        mb226 = load(a.sdk226, MAMBA_226)
        for shape in ((1, 512, 256, 16), (1, 512, 4096, 16)):
            est, secs, err = profile(mb226.mamba_v1, mamba_inputs(*shape), a.target, a.loop_tile_buffers)
            got["mamba_v1 (v2.26.0)", shape] = est
            row("mamba_v1 (v2.26.0)", str(list(shape)).replace(" ", ""), est, MAMBA_PUBLISHED["mamba_v1", shape],
                secs, err)
    for fast, slow, shape in MAMBA_STEPS + ((("mamba_v2", "mamba_v1 (v2.26.0)", (1, 512, 4096, 16)),)
                                            if a.sdk226 else ()):
        f, s = got.get((fast, shape)), got.get((slow, shape))
        verdict = "n/a" if f is None or s is None else ("yes" if improves(f, s) else "NO")
        print(f"{fast} faster than {slow} at {list(shape)}: {verdict}")
        ok = ok and verdict == "yes"
    if a.sdk226 and not a.no_large:
        mm226 = load(a.sdk226, MATMUL_226)
        prev, steps_226 = None, True
        for name in MATMUL_STEPS:
            est, secs, err, p = profile(getattr(mm226, name), (big_l, big_r), a.target, a.loop_tile_buffers, True)
            ms, hfu = MATMUL_LARGE_PUBLISHED[name]
            row(name + " (v2.26.0)", "[4096,8192]@[8192,8192]", est, ms * 1000, secs, err)
            if p is not None:
                print(f"  HFU estimate {100 * p.hfu:.1f} %, published {hfu} %")
            steps_226 = steps_226 and est is not None and (prev is None or improves(est, prev))
            prev = est
        print(f"v2.26.0 (Beta-1) matmul steps at [4096,8192]@[8192,8192] improve in the tutorial's order: "
              f"{'yes' if steps_226 else 'NO'} (not checked)")
    if a.sdk226:
        ln = load(a.sdk226, LAYERNORM_226)
        x = rng.random((300, 1000), dtype=np.float32)
        g, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
        est_ln = {}
        for name, published in LAYERNORM_PUBLISHED.items():
            est, secs, err = profile(getattr(ln, name), (x, 1e-5, g, b), a.target, a.loop_tile_buffers)
            est_ln[name] = est
            row(name, "[300,1000]", est, published, secs, err)
        verdict = "yes" if improves(est_ln["nki_layernorm_kernel_v2"], est_ln["nki_layernorm_kernel_v1"]) else "NO"
        print(f"layernorm v2 faster than v1: {verdict}")
        ok = ok and verdict == "yes"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
