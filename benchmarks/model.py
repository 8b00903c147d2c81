"""Tiny Llama benchmark: decode time per generated token, NKI kernels in the simulator vs the
PyTorch fallbacks, same seeded prompts, same run, one BLAS/torch thread (threadpoolctl).

Usage: python benchmarks/model.py [--n-new N] [--dtype float32|bfloat16|both] [--compiled BACKEND]
(``run.py`` calls ``measure`` for its "tiny_llama_decode" case.)
"""
from __future__ import annotations

import argparse
import sys

import torch
from threadpoolctl import threadpool_limits

from nkisim.models import logit_bound, run_mode

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def measure(dtype=torch.float32, n_new: int = 8, repeat: int = 3, compiled: str | None = None) -> dict:
    """Per mode, the median over ``repeat`` generations of decode seconds per generated token (and
    prefill seconds), the modes' generations interleaved (one of each mode per round); checks the
    tokens agree with the fallback's. Returns
    {mode: {"s_per_token", "prefill_s", "tokens", "max_abs_logit_diff"}}."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    modes = ["fallback", "simulator"] + (["compiled"] if compiled else [])
    out = {}
    try:
        with threadpool_limits(limits=1):
            runs = {m: [] for m in modes}
            for _ in range(repeat):         # interleaved: a slow spell of the machine hits every mode
                for m in modes:
                    runs[m].append(run_mode(m, dtype=dtype, n_new=n_new, backend=compiled or "inductor"))
    finally:
        torch.set_num_threads(threads)
    ref = runs["fallback"][0].generation
    bound = logit_bound(dtype) * float(ref.logits.abs().max())
    for mode, rs in runs.items():
        per_token = sorted(r.s_per_token for r in rs)[len(rs) // 2]
        prefill = sorted(r.generation.prefill_s for r in rs)[len(rs) // 2]
        g = rs[0].generation
        diff = float((g.logits - ref.logits).abs().max())
        if not torch.equal(g.tokens, ref.tokens) or diff > bound:
            raise AssertionError(f"{mode}: tokens or logits differ from the fallback's "
                                 f"(max |dlogit| {diff:.3g}, bound {bound:.3g})")
        out[mode] = {"s_per_token": per_token, "prefill_s": prefill, "max_abs_logit_diff": diff,
                     "tokens": g.tokens.tolist()}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-new", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dtype", default="both", choices=[*DTYPES, "both"])
    parser.add_argument("--compiled", default=None, help="also time torch.compile with this backend")
    args = parser.parse_args(argv)
    dtypes = list(DTYPES) if args.dtype == "both" else [args.dtype]
    print(f"tiny Llama, 2 prompts (11 and 23 tokens), {args.n_new} new tokens, median of "
          f"{args.repeat}, 1 thread")
    print(f"{'dtype':<9} {'mode':<10} {'ms/token':>9} {'prefill ms':>11} {'vs fallback':>12} "
          f"{'max |dlogit|':>13}")
    for name in dtypes:
        res = measure(DTYPES[name], args.n_new, args.repeat, args.compiled)
        base = res["fallback"]["s_per_token"]
        for mode, r in res.items():
            print(f"{name:<9} {mode:<10} {r['s_per_token'] * 1e3:>9.2f} {r['prefill_s'] * 1e3:>11.1f} "
                  f"{r['s_per_token'] / base:>11.1f}x {r['max_abs_logit_diff']:>13.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
