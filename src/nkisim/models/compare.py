"""Run the tiny model in each mode on the same seeded prompts and collect what a report needs:
tokens, logits, timings, per-kernel route counts and per-op wall time (``nkisim demo`` and
benchmarks/model.py print these). Imports torch, nkisim.torch and the models package.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from ..torch import reset_route_stats, route_stats
from .llama import Generation, LlamaConfig, TinyLlama
from .modes import OpTimer, mode_env

PROMPT_SEED = 10            # prompts whose greedy choices are far from ties (see the model tests)
PROMPT_LENS = (11, 23)      # odd, different; 23 spans two KV blocks, the second one partial


def demo_prompts(config: LlamaConfig | None = None, seed: int = PROMPT_SEED,
                 lengths=PROMPT_LENS) -> list[list[int]]:
    """Seeded token-id prompts of the given lengths."""
    vocab = (config or LlamaConfig()).vocab_size
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


def logit_bound(dtype: torch.dtype, config: LlamaConfig | None = None) -> float:
    """Relative bound on |logit difference| / max |logit| between two routes: 10 rounding stages
    per layer + 2, each at most one unit roundoff of ``dtype`` plus fp32 summation-order error
    over the widest dot product (sqrt(K) fp32 roundoffs), added linearly (see tests/models)."""
    c = config or LlamaConfig()
    u = 2.0**-24 if dtype == torch.float32 else 2.0**-8
    return (10 * c.n_layers + 2) * (u + math.sqrt(c.intermediate_size) * 2.0**-24)


@dataclass
class ModeRun:
    """One mode's generation and its measurements."""
    mode: str
    dtype: torch.dtype
    backend: str | None
    generation: Generation
    batch: int
    kernel_calls: dict = field(default_factory=dict)     # kernel short name -> simulator runs
    fallback_calls: dict = field(default_factory=dict)   # kernel short name -> fallback runs
    op_seconds: dict | None = None                       # op -> wall seconds (eager modes)
    op_calls: dict | None = None
    compile_s: float | None = None                       # first (compiling) run, compiled mode

    @property
    def decode_tokens(self) -> int:
        return (self.generation.tokens.shape[1] - 1) * self.batch

    @property
    def s_per_token(self) -> float:
        """Decode wall time per generated token (all decode steps / tokens they produced)."""
        return self.generation.decode_s / max(1, self.decode_tokens)


def run_mode(mode: str, *, dtype: torch.dtype = torch.float32, prompts=None, n_new: int = 4,
             backend: str = "inductor", seed: int = 0, config: LlamaConfig | None = None) -> ModeRun:
    """Generate ``n_new`` tokens per prompt in ``mode`` (see ``modes.MODES``) and measure it.

    Eager modes time every op through an ``OpTimer``. The compiled mode compiles with
    ``backend`` during a first 2-token generation (its time is ``compile_s``), then generates
    again, untimed by op, with every decode step under ``fail_on_recompile``.
    """
    prompts = prompts if prompts is not None else demo_prompts(config)
    with mode_env(mode):
        if mode == "compiled":
            torch._dynamo.reset()
            model = TinyLlama(config, dtype=dtype, seed=seed, compile=backend)
            t0 = time.perf_counter()
            model.generate(prompts, min(2, n_new))
            compile_s = time.perf_counter() - t0
            reset_route_stats()
            with torch.compiler.set_stance("fail_on_recompile"):
                gen = model.generate(prompts, n_new)
            timer = None
        else:
            timer = OpTimer()
            model = TinyLlama(config, dtype=dtype, seed=seed, ops=timer)
            compile_s, backend = None, None
            reset_route_stats()
            gen = model.generate(prompts, n_new)
        stats = route_stats()
    short = {k.rsplit(".", 1)[-1]: v for k, v in stats.items()}
    return ModeRun(mode, dtype, backend, gen, len(prompts),
                   kernel_calls={k: v["kernel"] for k, v in short.items()},
                   fallback_calls={k: v["fallback"] for k, v in short.items()},
                   op_seconds=dict(timer.seconds) if timer else None,
                   op_calls=dict(timer.calls) if timer else None, compile_s=compile_s)


__all__ = ["ModeRun", "run_mode", "demo_prompts", "logit_bound", "PROMPT_SEED", "PROMPT_LENS"]
