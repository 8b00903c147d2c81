"""Small ``nl`` helpers: ``ds``, ``NKIObject``, ``device_print``, ``no_reorder``, fp32/bf16 minima, and
the documented random-number functions nkisim does not simulate (``dropout``, ``random_seed``)."""
from __future__ import annotations

import contextlib
import types

import numpy as np

from .. import state
from ..errors import UnsupportedError
from ..isa.dispatch import api_function
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


@api_function("nl.dropout")
def dropout(x, rate, dtype=None):
    """Randomly zero elements of ``x`` with probability ``rate`` (a scalar or an (x.shape[0], 1)
    tile). Not simulated (like nisa.dropout, random numbers are not): raises UnsupportedError;
    an unknown keyword raises TypeError. Source: aws-neuron-sdk nki/api/nki/language/__init__.py
    (dropout)."""
    raise UnsupportedError("nl.dropout", "random numbers are documented but not simulated by nkisim yet")


@api_function("nl.random_seed")
def random_seed(seed):
    """Set the seed of ``nl.rand`` from a (1, 1) SBUF/PSUM tile. Not simulated (random numbers are
    not): raises UnsupportedError. Source: aws-neuron-sdk nki/api/nki/language/__init__.py
    (random_seed)."""
    raise UnsupportedError("nl.random_seed", "random numbers are documented but not simulated by nkisim yet")


fp32 = types.SimpleNamespace(min=float(np.float32(-3.4028235e38)), max=float(np.float32(3.4028235e38)))
bfp16 = types.SimpleNamespace(min=-3.3895313892515355e38, max=3.3895313892515355e38)

__all__ = ["ds", "NKIObject", "device_print", "no_reorder", "fp32", "bfp16", "dropout", "random_seed"]
