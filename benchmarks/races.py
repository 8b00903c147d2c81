"""Race-detection overhead: each kernel with NKISIM_DETECT_RACES=1 vs =0 (read at every call),
interleaved runs, medians. BLAS pinned to one thread. Usage: python benchmarks/races.py [--runs N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels  # noqa: E402

import nkisim.nki as nki  # noqa: E402


def _cases():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512), dtype=np.float32)
    b = rng.standard_normal((512, 512), dtype=np.float32)
    x = rng.standard_normal((1024, 512), dtype=np.float32)
    y = rng.standard_normal((1024, 512), dtype=np.float32)
    return {"matmul_tiled 512 fp32": lambda: nki.simulate(kernels.matmul_tiled)(a, b),
            "add_lnc 1024x512 LNC2": lambda: nki.simulate(kernels.add_lnc)[2](x, y)}


def _time(run, races):
    os.environ["NKISIM_DETECT_RACES"] = "1" if races else "0"
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=15)
    args = p.parse_args(argv)
    with threadpool_limits(1):
        for name, run in _cases().items():
            off, on = [], []
            _time(run, False), _time(run, True)   # warm-up
            for _ in range(args.runs):
                off.append(_time(run, False))
                on.append(_time(run, True))
            m_off, m_on = statistics.median(off) * 1e3, statistics.median(on) * 1e3
            print(f"{name:24s} off {m_off:8.2f} ms   races {m_on:8.2f} ms   ratio {m_on / m_off:5.2f}x")


if __name__ == "__main__":
    main()
