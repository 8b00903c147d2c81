"""Where the tiny Llama's simulated decode step spends its CPU time: a SIGPROF sampler.

Usage: python benchmarks/sample_decode.py [--steps N] [--top K]

cProfile and thread-based samplers misattribute time here: the LNC2 cores are greenlets that
switch inside one thread, and NumPy releases the GIL. This samples the Python stack of the one
thread on ITIMER_PROF (process CPU time) and prints three tables, in percent of the samples:
the nkisim call each kernel line made (instruction, ``nl.ndarray``, indexing, ...; "outside
kernels" is launch, torch layer and model), the functions on the stack (inclusive), and the
innermost functions (self). Caveat: a signal is handled at the next Python function entry or
backward jump, so time spent in one long NumPy call is booked to the innermost Python frame
that runs next (a copy's time shows on the function called after it); read inclusive figures.
The kernel interval is the system's tick (often 4 ms): run enough steps for a few thousand
samples. Linux/macOS only (signal.setitimer).
"""
from __future__ import annotations

import argparse
import collections
import os
import signal
import sys

import torch
from threadpoolctl import threadpool_limits

from nkisim.models import demo_prompts
from nkisim.models.llama import TinyLlama
from nkisim.models.modes import mode_env

_KERNEL_FILES = ("mlp.py", "attention.py", "linear.py", "norm.py", "rope.py", "sampling.py")


def sample(steps: int) -> collections.Counter:
    """Stacks (innermost first, ``file:function``) of ``steps`` simulated decode steps, counted."""
    stacks: collections.Counter = collections.Counter()
    on = [False]

    def handler(sig, frame):
        if on[0]:
            out = []
            while frame is not None:
                out.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}")
                frame = frame.f_back
            stacks[tuple(out)] += 1

    old = signal.signal(signal.SIGPROF, handler)
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1), mode_env("simulator"):
            model = TinyLlama()
            prompts = demo_prompts()
            first = model.prefill(prompts)
            positions = torch.tensor([len(p) for p in prompts], dtype=torch.int64)
            model.decode_step(first.tokens, positions)          # warm-up
            signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
            on[0] = True
            for i in range(steps):                               # replays the same positions
                model.decode_step(first.tokens, positions)
            on[0] = False
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, old)
    return stacks


def report(stacks: collections.Counter, top: int) -> None:
    total = sum(stacks.values()) or 1
    calls, incl, self_ = collections.Counter(), collections.Counter(), collections.Counter()
    for stack, n in stacks.items():
        self_[stack[0]] += n
        for f in set(stack):
            incl[f] += n
        k = next((i for i, f in enumerate(stack)
                  if f.split(":")[0] in _KERNEL_FILES and "kernel" in f.split(":")[1]), None)
        calls["<outside kernels>" if k is None else "<kernel line itself>" if k == 0 else stack[k - 1]] += n
    print(f"{total} samples")
    for title, table in (("call made by the kernel line", calls), ("inclusive", incl), ("self", self_)):
        print(f"--- {title}")
        for name, n in table.most_common(top):
            print(f"{100 * n / total:6.2f} {name}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    report(sample(args.steps), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
