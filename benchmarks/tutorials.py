"""Estimated device time of the public NKI tutorials' kernels, run unmodified from a checkout.

Usage: python benchmarks/tutorials.py SDK_CHECKOUT [--target trn1] [--check] [--loop-tile-buffers K]

``SDK_CHECKOUT`` is a checkout of aws-neuron/aws-neuron-sdk; its files
``nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py`` and
``nki/examples/fused_mamba/mamba_nki_kernels.py`` are imported as they are (nothing of them is
copied here) and each kernel is profiled with ``nkisim.profile(compute=False)`` at the shapes the
tutorials (nki/guides/tutorials/matrix_multiplication.rst, fused_mamba.rst) benchmark:

- matmul: ``[4096, 1024] @ [1024, 2048]`` bf16 (the tutorial's torch check), kernels tiled ->
  hoisted loads -> blocked free dimension -> fully optimised, which the tutorial says improve in
  that order; the basic kernel at its one-tile shape (lhsT [128, 64], rhs [128, 512]).
- Mamba ``[batch, seq_len, channels, state_size]``: v1 at [1, 512, 256, 16] (published 172.93 us),
  v1 / v2 / v3 at [1, 512, 4096, 16] (published 2.34 ms, 1.61 ms, 1.6 ms) and v2 / v3 at
  longer seq_len (the tutorial's table: 2048 -> 8.9 / 6.6 ms, 8192 -> 52.2 / 27.8 ms).

It prints each estimate, the published latency where the tutorial gives one and estimate /
published, and whether each step improves as the tutorial says. Decision: the published figures
are compared with the ``trn1`` estimate by default (the tutorials were written in 2024 against the
Trainium / Inferentia2 architecture guide, before trn2). ``--check`` also runs the matmul kernels
with compute on and compares them with NumPy; ``--loop-tile-buffers K`` sets the physical buffers of a
loop body's tile (``Settings.loop_tile_buffers``; default the setting's). Not part of CI (the checkout comes from the network).
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


def profile(kernel, args, target, buffers=None):
    """(estimate us, seconds taken, error text or None)."""
    t0 = time.perf_counter()
    opts = {} if buffers is None else {"loop_tile_buffers": buffers}
    try:
        p = nkisim.profile(kernel, target=target, compute=False, **opts)(*args)
    except Exception as exc:    # report the kernel that does not run, go on with the others
        return None, time.perf_counter() - t0, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return p.total_us, time.perf_counter() - t0, None


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
    print(f"{name:34s} {shape:22s} {val} {pub} {ratio}  {secs:6.1f} s" + (f"  {err}" if err else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout")
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--check", action="store_true", help="also run the matmul kernels with compute on")
    ap.add_argument("--loop-tile-buffers", type=int, default=None, metavar="K",
                    help="physical buffers of a loop body's tile (default: NKISIM_LOOP_TILE_BUFFERS or 2)")
    a = ap.parse_args(argv)
    mm, mb = load(a.checkout, MATMUL), load(a.checkout, MAMBA)
    print(f"target {a.target}; estimates in us (nkisim.profile(compute=False)); published: the tutorial's "
          f"hardware figure")
    print(f"{'kernel':34s} {'shape':22s} {'estimate':>10s} {'published':>10s} {'ratio':>6s}")
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
        if est is None or (prev is not None and not est < prev):
            ok = False
        prev = est
        if a.check and est is not None:
            out = nkisim.nki.simulate(getattr(mm, name))(lhsT, rhs)
            ref = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
            print(f"  {name}: max |out - numpy| / max |numpy| = "
                  f"{np.max(np.abs(np.asarray(out, np.float32) - ref)) / np.max(np.abs(ref)):.2e}")
    print(f"matmul steps improve in the tutorial's order: {'yes' if ok else 'NO'}")
    got = {}
    for (name, shape), published in MAMBA_PUBLISHED.items():
        est, secs, err = profile(getattr(mb, name), mamba_inputs(*shape), a.target, a.loop_tile_buffers)
        got[name, shape] = est
        row(name, str(list(shape)).replace(" ", ""), est, published, secs, err)
    for fast, slow, shape in MAMBA_STEPS:
        f, s = got.get((fast, shape)), got.get((slow, shape))
        verdict = "n/a" if f is None or s is None else ("yes" if f < s else "NO")
        print(f"{fast} faster than {slow} at {list(shape)}: {verdict}")
        ok = ok and verdict == "yes"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
