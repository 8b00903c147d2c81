"""``simulate_nki_kernel(func, lnc, kwargs)``: vllm-neuron's torch <-> NumPy simulator adapter.

Imports torch, nkisim.runtime and nkisim.config; never isa or checks.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from ..config import Settings
from ..runtime import launch
from ..runtime.kernel import Kernel
from . import convert, routes


def _arg_to_numpy(value, target, arrays):
    if isinstance(value, torch.Tensor):
        arr = convert.to_numpy(value)
        if target == "trn2" and value.dtype == torch.float8_e4m3fn:
            arr = arr.view(ml_dtypes.float8_e4m3)
        arrays[id(arr)] = (arr, value)
        return arr
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(_arg_to_numpy(v, target, arrays) for v in value)
    return value


def _result_to_torch(value, arrays):
    if isinstance(value, np.ndarray):
        hit = arrays.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]                     # the kernel returned an input: the caller's tensor
        return convert.from_numpy(value)
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(_result_to_torch(v, arrays) for v in value)
    return value


def simulate_nki_kernel(func, lnc: int, kwargs: dict):
    """Run ``func`` (jitted kernel or plain function) in the simulator on ``lnc`` cores with
    ``kwargs`` (torch CPU tensors, scalars, constants); return a tensor or a tuple of tensors.

    Tensors are viewed, not copied: an input the kernel writes is updated in place, and an input
    the kernel returns comes back as the caller's tensor object. Settings (target, precision) are
    read from the environment now. Decision: on trn2, float8_e4m3fn tensors are reinterpreted bit
    for bit as float8_e4m3 (trn2's IEEE-style fp8), and e4m3 results come back as float8_e4m3fn by
    bits (see convert), so the conversion is symmetric (vllm-neuron converted outputs by value).
    Counts one "kernel" route for the function. Raises: whatever the kernel raises (NkiError ...);
    ValueError/TypeError from ``convert.to_numpy`` for tensors it cannot view.
    """
    raw = func.func if isinstance(func, Kernel) else func
    settings = Settings.from_env()
    arrays: dict = {}
    np_kwargs = {k: _arg_to_numpy(v, settings.target, arrays) for k, v in kwargs.items()}
    result = launch.run(raw, (), np_kwargs, lnc=int(lnc), program_ndim=1 if lnc > 1 else 0,
                        settings=settings)
    routes.count(routes.kernel_name(raw), "kernel")
    return _result_to_torch(result, arrays)


__all__ = ["simulate_nki_kernel"]
