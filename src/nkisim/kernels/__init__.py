"""LLM kernels: NKI kernels written like production ones, each with a PyTorch fallback and a
functional op (torch tensors in and out) that picks kernel or fallback per call.

Every op routes through ``nkisim.torch`` (``wrap_nki`` + ``routes.dispatch``): the kernel runs in
the simulator when ``can_run_kernel(tensor)`` and the kernel's own shape limits allow, else the
fallback; ``nkisim.torch.route_stats()`` counts both. Imports torch; sits above nkisim.torch.
"""
from .linear import linear, qkv_proj
from .mlp import swiglu_mlp
from .norm import rms_norm
from .rope import rope
from .sampling import greedy_sample

__all__ = ["rms_norm", "rope", "linear", "qkv_proj", "swiglu_mlp", "greedy_sample"]

# Attention and KV-cache ops live in their own modules (written separately); the package must
# import even before they exist.
_SIBLINGS = (f"{__name__}.attention", f"{__name__}.kvcache")
try:
    from .attention import flash_attention, paged_attention_decode  # noqa: F401
    __all__ += ["flash_attention", "paged_attention_decode"]
except ModuleNotFoundError as _exc:    # only a missing module is tolerated, never a broken one
    if getattr(_exc, "name", None) not in _SIBLINGS:
        raise
try:
    from .kvcache import write_kv_cache  # noqa: F401
    __all__ += ["write_kv_cache"]
except ModuleNotFoundError as _exc:
    if getattr(_exc, "name", None) not in _SIBLINGS:
        raise
