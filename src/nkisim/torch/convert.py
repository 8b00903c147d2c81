"""Zero-copy torch <-> NumPy conversion: the adapter ``runtime.launch`` uses for torch arguments.

``to_numpy`` returns a NumPy view that shares memory with the tensor for every dtype (bf16 and fp8
through a same-width integer view), so values the core writes back reach the caller's tensor.
Imports torch, numpy, ml_dtypes; nothing from nkisim but errors.
"""
from __future__ import annotations

import contextvars

import ml_dtypes
import numpy as np
import torch

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
    from torch._subclasses.fake_tensor import is_fake
    if t.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"nkisim.torch: {what} requires grad; NKI kernels run outside autograd — "
                         f"pass tensor.detach() (it shares memory, so in-place writes still land)")
    if is_fake(t) or t.device.type != "cpu":
        kind = "a fake tensor" if is_fake(t) else f"on device {t.device}"
        raise ValueError(f"nkisim.torch: {what} is {kind}; the simulator needs CPU tensors with data "
                         f"(move it with .cpu())")


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


__all__ = ["to_numpy", "from_numpy", "after_write", "torch_dtype", "check_tensor"]
