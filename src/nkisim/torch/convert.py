"""Zero-copy torch <-> NumPy conversion: the adapter ``runtime.launch`` uses for torch arguments.

``to_numpy`` returns a NumPy view that shares memory with the tensor for every dtype (bf16 and fp8
through a same-width integer view), so values the core writes back reach the caller's tensor;
``to_kernel_array`` adds the target's dtype check and fp8 reinterpretation (every entry point).
Imports torch, numpy, ml_dtypes and nkisim's errors, dtypes and the torch layer's routes.
"""
from __future__ import annotations

import contextvars
import os
import sys

import ml_dtypes
import numpy as np
import torch

from .. import dtypes as _dt
from ..errors import DtypeError
from . import routes

# torch dtypes NumPy has natively: ``tensor.numpy()`` is already a view.
_NATIVE = {torch.float32, torch.float16, torch.float64, torch.int8, torch.int16, torch.int32,
           torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.bool}
# torch dtypes NumPy lacks: (same-width torch int dtype, its NumPy twin, the ml_dtypes type).
_VIA_INT = {
    torch.bfloat16: (torch.int16, np.int16, ml_dtypes.bfloat16),
    torch.float8_e4m3fn: (torch.uint8, np.uint8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.uint8, np.uint8, ml_dtypes.float8_e5m2),
}
# ml_dtypes types back to torch (by bits). float8_e4m3 (IEEE-style, trn2) has no torch twin:
# Decision: it comes back as torch.float8_e4m3fn with the same bits (equal values for |x| <= 240;
# e4m3's inf/NaN patterns read as fn's 256..448/NaN), the mirror of simulate_nki_kernel's trn2 input
# reinterpretation, so an fp8 tensor round-trips bit-exactly on every target.
_FROM_ML = {
    np.dtype(ml_dtypes.bfloat16): (np.int16, torch.bfloat16),
    np.dtype(ml_dtypes.float8_e4m3fn): (np.uint8, torch.float8_e4m3fn),
    np.dtype(ml_dtypes.float8_e4m3): (np.uint8, torch.float8_e4m3fn),
    np.dtype(ml_dtypes.float8_e5m2): (np.uint8, torch.float8_e5m2),
}

# Set by a shape-only run: collects the tensors the kernel wrote (see registry.describe_outputs).
written_log: contextvars.ContextVar[list | None] = contextvars.ContextVar("nkisim_written", default=None)


def check_tensor(t, what: str = "kernel argument") -> None:
    """Raise ValueError when ``t`` cannot be simulated: it needs grad, lives off the CPU, or has no
    data. Decision: a requires-grad tensor is accepted while grad mode is off (``torch.no_grad``,
    inference) and viewed through ``detach()``; with grad mode on it is an error."""
    if t.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"nkisim.torch: {what} requires grad; NKI kernels run outside autograd — "
                         f"pass tensor.detach() (it shares memory, so in-place writes still land)")
    if _maybe_fake(t) or t.device.type != "cpu":
        kind = "a fake tensor" if _maybe_fake(t) else f"on device {t.device}"
        raise ValueError(f"nkisim.torch: {what} is {kind}; the simulator needs CPU tensors with data "
                         f"(move it with .cpu())")


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _maybe_fake(t) -> bool:
    """torch's ``is_fake(t)``. A plain ``torch.Tensor`` or ``Parameter`` (not a FakeTensor, a
    FunctionalTensor or a wrapper subclass, which are other types) is fake only through a
    functionalization or functorch wrapper around a fake tensor, so one that is neither is
    answered without the call (speed: this runs for every tensor argument of every launch)."""
    if type(t) in _PLAIN_TENSORS and not torch._is_functional_tensor(t) \
            and not _is_functorch_wrapped(t):
        return False
    from torch._subclasses.fake_tensor import is_fake
    return is_fake(t)


_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of ``t`` (same memory, same strides and storage offset) in its NKI dtype.

    bf16 and fp8 go through ``t.view(int16/uint8).numpy().view(ml_dtypes...)``: no copy.
    Raises: TypeError for a dtype NumPy/ml_dtypes cannot view (complex, uint64, fnuz fp8, ...);
    ValueError for a tensor that needs grad (grad mode on), lives off the CPU, or is fake.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"nkisim.torch.to_numpy: expected a torch.Tensor, got {type(t).__name__}")
    check_tensor(t)
    t = t.detach()
    if t.dtype in _NATIVE:
        return t.numpy()
    if t.dtype in _VIA_INT:
        int_dt, np_int, ml = _VIA_INT[t.dtype]
        return t.view(int_dt).numpy().view(np_int).view(ml)
    raise TypeError(f"nkisim.torch: tensor dtype {t.dtype} has no NKI twin; expected one of float32, "
                    f"float16, bfloat16, float8_e4m3fn, float8_e5m2, int8..int32, uint8..uint32, bool")


_SKIP_DIRS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,    # nkisim
              os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)                   # torch


def caller_location() -> str:
    """``file:line`` of the innermost frame outside nkisim and torch: the user's call of a wrapped
    kernel (a HOP call passes through torch's dispatcher frames; generated code such as FX graphs,
    ``<eval_with_key>``, is skipped too)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<") and not os.path.abspath(name).startswith(_SKIP_DIRS):
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def to_kernel_array(t: torch.Tensor, target, name: str = "kernel argument") -> np.ndarray:
    """``to_numpy(t)`` as a kernel argument on ``target`` (an ``arch.Target``); the hook
    ``runtime.launch`` calls for every torch argument, so nki.simulate, a jitted call with
    NKI_SIMULATOR=1, simulate_kernel, simulate_nki_kernel and wrap_nki all agree.

    Decision: on a target without float8_e4m3fn but with float8_e4m3 (trn2), a float8_e4m3fn tensor
    is reinterpreted bit for bit as float8_e4m3 (trn2's IEEE-style fp8; vllm-neuron's mapping, since
    torch has no e4m3 dtype); results come back as float8_e4m3fn by bits (``from_numpy``), so an
    fp8 tensor round-trips bit-exactly. A NumPy float8_e4m3fn array on trn2 stays a DtypeError
    (NumPy callers can pass float8_e4m3 themselves).
    Raises: DtypeError ``kernel argument: <name>: dtype torch.float64 is not an NKI dtype on trn3
    (convert with .to(torch.float32)) (<caller file>:<line>)`` for a dtype the target lacks, located
    at the user's call; TypeError/ValueError from ``to_numpy``.
    """
    arr = to_numpy(t)
    if arr.dtype == _E4M3FN and "float8_e4m3fn" not in target.dtypes and "float8_e4m3" in target.dtypes:
        return arr.view(ml_dtypes.float8_e4m3)
    d = _dt.as_dtype(arr.dtype)
    if d is None or _dt.name(d) not in target.dtypes:
        kind = arr.dtype.kind
        hint = " (convert with .to(torch.float32))" if kind == "f" else \
            " (convert with .to(torch.int32))" if kind in "iu" else ""
        raise DtypeError("kernel argument", f"{name}: dtype {t.dtype} is not an NKI dtype on "
                                            f"{target.name}{hint}", where=caller_location())
    return arr


_E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)


def torch_dtype(dtype) -> torch.dtype:
    """The torch dtype for a torch, NumPy or ml_dtypes dtype (NKI dtypes are NumPy dtypes)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    d = np.dtype(dtype)
    if d in _FROM_ML:
        return _FROM_ML[d][1]
    return torch.from_numpy(np.empty(0, d)).dtype


def from_numpy(array: np.ndarray, like_tensor=None) -> torch.Tensor:
    """A torch tensor sharing ``array``'s memory (a kernel output, already a fresh array).

    ``like_tensor`` is the caller's first torch argument (kept for the adapter interface; every
    result is a CPU tensor). Arrays with negative strides are made contiguous first.
    """
    a = np.asarray(array)
    if any(s < 0 for s in a.strides):
        a = np.ascontiguousarray(a)
    if a.dtype in _FROM_ML:
        np_int, tdt = _FROM_ML[a.dtype]
        return torch.from_numpy(a.view(np_int)).view(tdt)
    return torch.from_numpy(a)


def after_write(array: np.ndarray, tensor: torch.Tensor) -> None:
    """Called by the core after it wrote a kernel's result into ``array`` (a view of ``tensor``):
    the values already live in the tensor; a running shape-only run records which input it was."""
    log = written_log.get()
    if log is not None:
        log.append(tensor)


def after_run(func) -> None:
    """Called by the core after a launch with torch arguments succeeded: one "kernel" route for
    ``func`` (route_stats), unless it was a shape-only run (``written_log`` set)."""
    if written_log.get() is None:
        routes.count_kernel(func)


__all__ = ["to_numpy", "to_kernel_array", "from_numpy", "after_write", "after_run", "torch_dtype",
           "check_tensor", "caller_location"]
