"""Models built on ``nkisim.kernels``: a tiny Llama with a paged KV cache, and the three ways to
run it (PyTorch fallbacks, NKI kernels in the simulator, the simulator under torch.compile).

The top layer: imports torch and nkisim.kernels; nothing below imports it.
"""
from .kv_cache import PagedKVCache, allocation_order
from .llama import Generation, LlamaConfig, StepOutput, TinyLlama, rope_tables
from .modes import MODES, OP_NAMES, OpTimer, mode_env
from .compare import ModeRun, demo_prompts, logit_bound, run_mode

__all__ = ["LlamaConfig", "TinyLlama", "StepOutput", "Generation", "PagedKVCache", "allocation_order",
           "rope_tables", "MODES", "OP_NAMES", "OpTimer", "mode_env", "ModeRun", "run_mode", "demo_prompts",
           "logit_bound"]
