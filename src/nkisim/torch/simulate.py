"""``simulate_nki_kernel(func, lnc, kwargs)``: vllm-neuron's torch <-> NumPy simulator adapter.

Imports torch, nkisim.runtime and nkisim.config; never isa or checks.
"""
from __future__ import annotations

import numpy as np

from ..config import Settings
from ..runtime import launch
from ..runtime.kernel import Kernel
from . import convert


def _to_torch(value):
    """NumPy arrays left in a result (a launch without torch arguments) as torch tensors."""
    if isinstance(value, np.ndarray):
        return convert.from_numpy(value)
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(_to_torch(v) for v in value)
    return value


def simulate_nki_kernel(func, lnc: int, kwargs: dict):
    """Run ``func`` (jitted kernel or plain function) in the simulator on ``lnc`` cores with
    ``kwargs`` (torch CPU tensors, scalars, constants); return what the kernel returns, each
    array a torch tensor.

    Tensors are viewed, not copied: an input the kernel writes is updated in place, and an input
    the kernel returns comes back as the caller's tensor object. Arguments that share memory
    share HBM (``runtime.launch``). Settings (target, precision) are read from the environment
    now. The torch arguments go through the core's torch adapter like nki.simulate's
    (``convert.to_kernel_array``: on trn2 float8_e4m3fn is reinterpreted bit for bit as
    float8_e4m3 and comes back by bits, vllm-neuron converted outputs by value), which also counts
    one "kernel" route for the function after success.
    Raises: whatever the kernel raises (NkiError ...); DtypeError for a dtype the target lacks;
    ValueError/TypeError from ``convert.to_numpy`` for tensors it cannot view.
    """
    raw = func.func if isinstance(func, Kernel) else func
    return _to_torch(launch.run(raw, (), dict(kwargs), lnc=int(lnc), program_ndim=1 if lnc > 1 else 0,
                                settings=Settings.from_env()))


__all__ = ["simulate_nki_kernel"]
