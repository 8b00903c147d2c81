"""Small ``nl`` helpers: ``ds``, ``NKIObject``, ``device_print``, ``no_reorder``, fp32/bf16 minima."""
from __future__ import annotations

import contextlib
import types

import numpy as np

from .. import state
from .creation import unknown_keyword


def ds(start, size):
    """``nl.ds(start, size)`` is the slice ``start:start + size``; with a runtime start (a register
    or a 1-element tile) a ``DynamicSlice``, whose bounds the using instruction checks."""
    if hasattr(start, "shape") or type(start).__name__ == "VirtualRegister":
        from ..memory.tensor import DynamicSlice
        return DynamicSlice(start, int(size))
    start, size = int(start), int(size)
    return slice(start, start + size)


class NKIObject:
    """Base class for kernel-side classes and dataclasses (configs passed to kernels)."""


def device_print(print_prefix, tensor, **kw):
    """Print a tensor's values with a prefix (on hardware this dumps to NEURON_RT_DEBUG_OUTPUT_DIR;
    "In CPU simulation, this prints immediately to stdout"). Issues no instruction. Under LNC2
    each line starts with ``[core <id>]``. Raises: TypeError (unknown keyword).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (device_print).
    """
    from ..memory.tensor import NkiTensor
    if kw:
        unknown_keyword("nl.device_print", device_print, kw)
    c = state.maybe_core()
    core = f"[core {c.core_id}] " if c is not None and c.launch.lnc > 1 else ""
    values = tensor.np() if isinstance(tensor, NkiTensor) else tensor
    print(f"{core}{print_prefix}", np.array(values), flush=True)


@contextlib.contextmanager
def no_reorder():
    """Keep program order: the simulator always does."""
    yield


fp32 = types.SimpleNamespace(min=float(np.float32(-3.4028235e38)), max=float(np.float32(3.4028235e38)))
bfp16 = types.SimpleNamespace(min=-3.3895313892515355e38, max=3.3895313892515355e38)

__all__ = ["ds", "NKIObject", "device_print", "no_reorder", "fp32", "bfp16"]
