"""A tiny Llama (RMSNorm, RoPE, grouped-query attention, SwiGLU) whose every covered tensor op
goes through ``nkisim.kernels``, with a paged KV cache, batched prefill and decode steps and
greedy generation. The same code runs on the PyTorch fallbacks, on the NKI kernels in the
simulator, or under ``torch.compile(fullgraph=True)`` (see ``nkisim.models.modes``).

Imports torch and nkisim.kernels only. Embedding lookups, the RoPE table lookup and residual adds
are plain torch; everything else is a kernel op.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import torch

from .kv_cache import PagedKVCache


@dataclass(frozen=True, kw_only=True)
class LlamaConfig:
    """The tiny model's shape (about 4.1 M parameters with the defaults)."""
    vocab_size: int = 2048
    hidden_size: int = 256
    n_layers: int = 4
    n_q_heads: int = 8
    n_kv_heads: int = 2
    head_dim: int = 32
    intermediate_size: int = 768
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0
    block_size: int = 16                 # KV cache block size (tokens per block)
    num_blocks: int = 32                 # KV cache blocks per layer, shared by the batch
    max_blocks_per_seq: int = 8          # block table width: decode shapes never change

    def __post_init__(self):
        if self.n_q_heads % self.n_kv_heads:
            raise ValueError(f"LlamaConfig: n_q_heads {self.n_q_heads} must be a multiple of "
                             f"n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"LlamaConfig: head_dim must be even for RoPE, got {self.head_dim}")

    @property
    def max_positions(self) -> int:
        return self.max_blocks_per_seq * self.block_size


class StepOutput(NamedTuple):
    """One prefill or decode step: the last position's logits ``[B, V]`` and the greedy tokens
    ``[B]`` (int64)."""
    logits: torch.Tensor
    tokens: torch.Tensor


class Generation(NamedTuple):
    """``generate``'s result: tokens ``[B, n_new]`` int64, the logits that chose them
    ``[n_new, B, V]`` (float32 copies), and the wall time of the prefill and of all decode steps."""
    tokens: torch.Tensor
    logits: torch.Tensor
    prefill_s: float = 0.0
    decode_s: float = 0.0


def _kernel_ops():
    import nkisim.kernels
    return nkisim.kernels


def rope_tables(config: LlamaConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 cos and sin ``[max_positions, head_dim // 2]``: angle p * theta**(-2i / head_dim)."""
    d = config.head_dim
    inv_freq = config.rope_theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(config.max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


class TinyLlama(torch.nn.Module):
    """A seeded tiny Llama with a paged KV cache.

    ``prefill(prompts)`` packs the prompts' tokens into one [T, H] batch for the row-wise ops,
    runs ``flash_attention`` per sequence and ``write_kv_cache`` for all tokens;
    ``decode_step(tokens, positions)`` runs ``paged_attention_decode`` for the batch (which writes
    the new K/V in place); ``generate(prompts, n_new)`` is greedy. Weights are stored [in, out].

    ``dtype``: float32 or bfloat16 for weights, activations and the cache (the bf16 model is the
    fp32 one rounded). ``compile``: None (eager) or a torch.compile backend ("aot_eager",
    "inductor", ...): the prefill and decode step functions are then compiled with
    ``fullgraph=True, dynamic=False``; decode shapes are fixed (the block table is padded to
    ``max_blocks_per_seq``), so decode steps after the first never recompile.
    Decision: under compile, each op's route (kernel or fallback) is chosen while tracing, from the
    environment at that time; change the switches, then ``torch._dynamo.reset()`` and rebuild.
    ``ops``: the op namespace (default ``nkisim.kernels``); a wrapper with the same functions may
    be passed to time or count calls.
    Decision: weights come from a private ``torch.Generator`` seeded with ``seed`` (same values as
    ``torch.manual_seed(seed)`` would give, without touching the global RNG). Linear weights are
    N(0, 1 / fan_in) (fan-in scaling keeps activations and logits O(1)); RMSNorm gains
    1 + N(0, 0.1^2) so the gain is exercised; embeddings N(0, 1).
    """

    def __init__(self, config: LlamaConfig | None = None, *, dtype: torch.dtype = torch.float32,
                 seed: int = 0, compile: str | None = None, ops=None):
        super().__init__()
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"TinyLlama: dtype must be torch.float32 or torch.bfloat16, got {dtype}")
        self.config = c = config or LlamaConfig()
        self.dtype = dtype
        self.ops = ops if ops is not None else _kernel_ops()
        g = torch.Generator().manual_seed(seed)
        qkv_width = (c.n_q_heads + 2 * c.n_kv_heads) * c.head_dim

        def dense(fan_in, fan_out):
            w = torch.randn(fan_in, fan_out, generator=g) / math.sqrt(fan_in)
            return torch.nn.Parameter(w.to(dtype), requires_grad=False)

        def gain():
            w = 1.0 + 0.1 * torch.randn(c.hidden_size, generator=g)
            return torch.nn.Parameter(w.to(dtype), requires_grad=False)

        self.embed = torch.nn.Parameter(torch.randn(c.vocab_size, c.hidden_size, generator=g).to(dtype),
                                        requires_grad=False)
        self.layers = torch.nn.ModuleList()
        for _ in range(c.n_layers):
            layer = torch.nn.Module()
            layer.attn_norm = gain()
            layer.w_qkv = dense(c.hidden_size, qkv_width)
            layer.w_o = dense(c.n_q_heads * c.head_dim, c.hidden_size)
            layer.mlp_norm = gain()
            layer.w_gate = dense(c.hidden_size, c.intermediate_size)
            layer.w_up = dense(c.hidden_size, c.intermediate_size)
            layer.w_down = dense(c.intermediate_size, c.hidden_size)
            self.layers.append(layer)
        self.final_norm = gain()
        self.lm_head = dense(c.hidden_size, c.vocab_size)
        cos, sin = rope_tables(c)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.cache: PagedKVCache | None = None
        self.compile_backend = compile
        self._prefill_fn = self.prefill_forward
        self._decode_fn = self.decode_forward
        if compile is not None:
            self._prefill_fn = torch.compile(self.prefill_forward, backend=compile, fullgraph=True,
                                             dynamic=False)
            self._decode_fn = torch.compile(self.decode_forward, backend=compile, fullgraph=True,
                                            dynamic=False)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # ------------------------------------------------------------------------------------------
    # Step functions: tensors in, tensors out (these are what torch.compile sees)

    def _attention_in(self, layer, x, positions):
        c, ops = self.config, self.ops
        h = ops.rms_norm(x, layer.attn_norm, c.rms_eps)
        q, k, v = ops.qkv_proj(h, layer.w_qkv, c.n_q_heads, c.n_kv_heads, c.head_dim)
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]
        return ops.rope(q, cos, sin), ops.rope(k, cos, sin), v

    def _attention_out_and_mlp(self, layer, x, attn):
        c, ops = self.config, self.ops
        x = x + ops.linear(attn.reshape(x.shape[0], c.n_q_heads * c.head_dim), layer.w_o)
        h = ops.rms_norm(x, layer.mlp_norm, c.rms_eps)
        return x + ops.swiglu_mlp(h, layer.w_gate, layer.w_up, layer.w_down)

    def _head(self, x):
        logits = self.ops.linear(self.ops.rms_norm(x, self.final_norm, self.config.rms_eps), self.lm_head)
        return StepOutput(logits, self.ops.greedy_sample(logits))

    def prefill_forward(self, tokens, positions, slot_mapping, last_index, seq_spans: tuple,
                        k_caches: list, v_caches: list) -> StepOutput:
        """Packed prefill. tokens, positions [T] int64 (all prompts back to back); slot_mapping
        [T] int32; last_index [B] int64 (each prompt's last token in the packing); seq_spans
        ((start, length), ...) Python ints; k_caches/v_caches one pool per layer (written)."""
        c, ops = self.config, self.ops
        scale = c.head_dim ** -0.5
        x = self.embed[tokens]
        for i, layer in enumerate(self.layers):
            q, k, v = self._attention_in(layer, x, positions)
            attn = torch.cat([ops.flash_attention(q[s:s + n], k[s:s + n], v[s:s + n], scale)
                              for s, n in seq_spans])
            ops.write_kv_cache(k, v, k_caches[i], v_caches[i], slot_mapping)
            x = self._attention_out_and_mlp(layer, x, attn)
        return self._head(x[last_index])

    def decode_forward(self, tokens, positions, block_table, context_lens, k_caches: list,
                       v_caches: list) -> StepOutput:
        """One decode step for the batch. tokens, positions [B] int64; block_table [B, max_blocks]
        int32 (-1 unused); context_lens [B] int32 = positions + 1; caches written in place."""
        c, ops = self.config, self.ops
        scale = c.head_dim ** -0.5
        x = self.embed[tokens]
        for i, layer in enumerate(self.layers):
            q, k, v = self._attention_in(layer, x, positions)
            attn = ops.paged_attention_decode(q, k, v, k_caches[i], v_caches[i], block_table,
                                              context_lens, scale)
            x = self._attention_out_and_mlp(layer, x, attn)
        return self._head(x)

    # ------------------------------------------------------------------------------------------
    # Host side: cache bookkeeping around the step functions

    def new_cache(self, batch: int) -> PagedKVCache:
        """A fresh, empty paged cache for ``batch`` sequences (also becomes ``self.cache``)."""
        c = self.config
        self.cache = PagedKVCache(n_layers=c.n_layers, num_blocks=c.num_blocks, block_size=c.block_size,
                                  n_kv_heads=c.n_kv_heads, head_dim=c.head_dim, batch=batch,
                                  max_blocks=c.max_blocks_per_seq, dtype=self.dtype)
        return self.cache

    @torch.no_grad()
    def prefill(self, prompt_ids: Sequence[Sequence[int]]) -> StepOutput:
        """Start a new cache for the prompts, fill it, and return the logits of each prompt's last
        token and the greedy next tokens. Raises ValueError for an empty prompt or a token id out
        of range; RuntimeError when a prompt does not fit the cache."""
        prompts = [[int(t) for t in p] for p in prompt_ids]
        for b, p in enumerate(prompts):
            if not p:
                raise ValueError(f"TinyLlama.prefill: prompt {b} is empty")
            bad = [t for t in p if not 0 <= t < self.config.vocab_size]
            if bad:
                raise ValueError(f"TinyLlama.prefill: prompt {b} has token id {bad[0]} outside "
                                 f"0 .. {self.config.vocab_size - 1}")
        cache = self.new_cache(len(prompts))
        spans, slots, positions, start = [], [], [], 0
        for b, p in enumerate(prompts):
            cache.reserve(b, len(p))
            spans.append((start, len(p)))
            slots += cache.slots(b, range(len(p)))
            positions += range(len(p))
            start += len(p)
        tokens = torch.tensor([t for p in prompts for t in p], dtype=torch.int64)
        last = torch.tensor([s + n - 1 for s, n in spans], dtype=torch.int64)
        return self._prefill_fn(tokens, torch.tensor(positions, dtype=torch.int64),
                                torch.tensor(slots, dtype=torch.int32), last, tuple(spans),
                                cache.k, cache.v)

    @torch.no_grad()
    def decode_step(self, tokens: torch.Tensor, positions: torch.Tensor) -> StepOutput:
        """Feed ``tokens[b]`` at position ``positions[b]`` of sequence b (after ``prefill``);
        return the logits there and the greedy next tokens. Blocks are reserved as needed."""
        if self.cache is None:
            raise RuntimeError("TinyLlama.decode_step: call prefill first")
        positions = torch.as_tensor(positions, dtype=torch.int64)
        for b, p in enumerate(positions.tolist()):
            self.cache.reserve(b, p + 1)
        context_lens = (positions + 1).to(torch.int32)
        return self._decode_fn(torch.as_tensor(tokens, dtype=torch.int64), positions,
                               self.cache.block_table, context_lens, self.cache.k, self.cache.v)

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], n_new: int) -> Generation:
        """Greedy generation of ``n_new`` tokens after each prompt (one prefill, n_new - 1
        decode steps)."""
        if n_new < 1:
            raise ValueError(f"TinyLlama.generate: n_new must be >= 1, got {n_new}")
        t0 = time.perf_counter()
        step = self.prefill(prompts)
        t1 = time.perf_counter()
        tokens, logits = [step.tokens], [step.logits.float()]
        positions = torch.tensor([len(p) for p in prompts], dtype=torch.int64)
        for _ in range(n_new - 1):
            step = self.decode_step(step.tokens, positions)
            tokens.append(step.tokens)
            logits.append(step.logits.float())
            positions = positions + 1
        t2 = time.perf_counter()
        return Generation(torch.stack(tokens, dim=1), torch.stack(logits), t1 - t0, t2 - t1)


__all__ = ["LlamaConfig", "TinyLlama", "StepOutput", "Generation", "rope_tables"]
