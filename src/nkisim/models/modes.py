"""The three ways to run the tiny model with the same code, and an op timer for reports.

fallback: VLLM_NEURON_CPU_MODE=1, NKI_SIMULATOR unset (every op takes its PyTorch fallback);
simulator: VLLM_NEURON_CPU_MODE=1, NKI_SIMULATOR=1 (every op runs its NKI kernel, eagerly);
compiled: as simulator, with the step functions under torch.compile(fullgraph=True).
Imports torch and the models package only.
"""
from __future__ import annotations

import contextlib
import os
import time
from types import SimpleNamespace

MODES = ("fallback", "simulator", "compiled")

# The ops the model calls (nkisim.kernels' functional ops).
OP_NAMES = ("rms_norm", "qkv_proj", "rope", "linear", "swiglu_mlp", "greedy_sample",
            "flash_attention", "write_kv_cache", "paged_attention_decode")

_ENV = {"fallback": {"VLLM_NEURON_CPU_MODE": "1", "NKI_SIMULATOR": None},
        "simulator": {"VLLM_NEURON_CPU_MODE": "1", "NKI_SIMULATOR": "1"},
        "compiled": {"VLLM_NEURON_CPU_MODE": "1", "NKI_SIMULATOR": "1"}}
# Switches that would change the route under our feet.
_CLEARED = ("VLLM_NEURON_DISABLE_NKI_KERNELS",)


@contextlib.contextmanager
def mode_env(mode: str):
    """Set the environment switches of ``mode`` (one of MODES) for the ``with`` body, then restore
    them. Raises ValueError for an unknown mode."""
    if mode not in _ENV:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    changes = dict(_ENV[mode], **{k: None for k in _CLEARED})
    saved = {k: os.environ.get(k) for k in changes}
    try:
        for k, v in changes.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class OpTimer(SimpleNamespace):
    """The model's op namespace with every call timed (eager use only: under torch.compile the
    timer itself would be traced). ``seconds[name]`` and ``calls[name]`` accumulate per op."""

    def __init__(self, ops=None):
        if ops is None:
            import nkisim.kernels as ops
        super().__init__()
        self.seconds = {n: 0.0 for n in OP_NAMES}
        self.calls = {n: 0 for n in OP_NAMES}
        for name in OP_NAMES:
            setattr(self, name, self._timed(name, getattr(ops, name)))

    def _timed(self, name, fn):
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
                self.calls[name] += 1
        call.__name__ = name
        return call

    def reset(self) -> None:
        for name in OP_NAMES:
            self.seconds[name], self.calls[name] = 0.0, 0


__all__ = ["MODES", "OP_NAMES", "mode_env", "OpTimer"]
