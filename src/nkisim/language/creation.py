"""Tensor creation: ``ndarray``, ``zeros``, ``ones``, ``full``, ``*_like``, ``shared_constant``,
``shared_identity_matrix``.

Source: aws-neuron-sdk nki/api/nki/language/__init__.py (creation functions).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..errors import DtypeError, ShapeError
from ..memory import access
from ..memory.buffers import sbuf, shared_hbm
from ..memory.tensor import NkiTensor


def ndarray(shape, dtype, buffer=sbuf, name: str = "", address=None, **ignored) -> NkiTensor:
    """An uninitialised tensor (NaN for floats, 4 for integers) of ``shape`` and ``dtype``.

    On SBUF/PSUM dim 0 is the partition dim (<= 128). ``address`` (manual placement) is accepted
    and ignored: every allocation gets its own memory.
    Raises: ShapeError, DtypeError, CapacityError.
    """
    return access.allocate(shape, dtype, buffer, name, op="nl.ndarray")


def full(shape, fill_value, dtype, buffer=sbuf, name: str = "", **ignored) -> NkiTensor:
    """A tensor filled with ``fill_value`` (rounded once into ``dtype``)."""
    t = access.allocate(shape, dtype, buffer, name, op="nl.full", fill=False)
    scalar = np.asarray(fill_value, np.int64 if _dt.is_int(t.dtype) else np.float32)
    if not access.fill_deferred(t, scalar):
        access.write(t, np.broadcast_to(scalar, t.shape))     # a stride-0 view: no temporary tile
    return t


def zeros(shape, dtype, buffer=sbuf, name: str = "", **ignored) -> NkiTensor:
    return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name: str = "", **ignored) -> NkiTensor:
    return full(shape, 1, dtype, buffer, name)


def empty_like(x, dtype=None, buffer=None, name: str = "", **ignored) -> NkiTensor:
    """An uninitialised tensor with ``x``'s shape; dtype and buffer default to ``x``'s."""
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def zeros_like(x, dtype=None, buffer=None, name: str = "", **ignored) -> NkiTensor:
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def ones_like(x, dtype=None, buffer=None, name: str = "", **ignored) -> NkiTensor:
    return ones(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def full_like(x, fill_value, dtype=None, buffer=None, name: str = "", **ignored) -> NkiTensor:
    return full(x.shape, fill_value, dtype or x.dtype, buffer or x.buffer, name)


def shared_constant(constant, dtype=None, **ignored) -> NkiTensor:
    """A ``shared_hbm`` tensor holding a NumPy array (or the ``.npy`` file at a path)."""
    arr = np.load(constant) if isinstance(constant, str) else np.asarray(constant)
    dt = _dt.as_dtype(dtype or arr.dtype)
    if dt is None:
        raise DtypeError("nl.shared_constant", f"dtype {dtype or arr.dtype} is not an NKI dtype")
    t = access.allocate(arr.shape or (1,), dt, shared_hbm, "shared_constant", op="nl.shared_constant",
                        fill=False)
    access.write(t, arr.astype(np.float32) if arr.dtype.kind == "f" and dt != arr.dtype else arr)
    return t


def shared_identity_matrix(n, dtype=_dt.uint8, dst=None, **ignored) -> NkiTensor:
    """An ``n`` x ``n`` identity. Decision: returned in SBUF, as real kernels use it (the moving
    operand of TensorE transposes), though the docs also liken it to shared_constant (HBM)."""
    n = int(n)
    tgt = state.core("nl.shared_identity_matrix").target
    if n > tgt.pmax:
        raise ShapeError("nl.shared_identity_matrix", f"n {n} exceeds the partition limit {tgt.pmax} on "
                                                      f"{tgt.name}")
    t = dst if dst is not None else access.allocate((n, n), dtype, sbuf, "identity",
                                                   op="nl.shared_identity_matrix", fill=False)
    access.write(t, np.eye(n, dtype=np.float32))
    return t


__all__ = ["ndarray", "full", "zeros", "ones", "empty_like", "zeros_like", "ones_like", "full_like",
           "shared_constant", "shared_identity_matrix"]
