"""Scalar registers: ``register_alloc``, ``register_move``, ``register_load``, ``register_store``.

A ``VirtualRegister`` holds one 32-bit integer. Kernels use registers as loop bounds
(``nl.dynamic_range``, ``nl.fori_loop``), as ``while reg:`` conditions and as ``scalar_offset`` of
``.ap()``. Decision: the simulator knows every register's value, so ``int(reg)`` and ``bool(reg)``
work (the hardware tracer would reject them). Source: aws-neuron-sdk nki/api/nki/isa/__init__.py.
"""
from __future__ import annotations

import numpy as np

from .. import state, trace
from ..checks import rules
from ..errors import NkiError, ShapeError
from ..memory.access import read_raw, write
from ..memory.tensor import NkiTensor
from .enums import NkiInstruction

_I32 = np.iinfo(np.int32)


class VirtualRegister:
    """A 32-bit scalar register; ``.value`` is its current value (None until written)."""
    __slots__ = ("value", "frozen")

    def __init__(self, value=None, frozen=False):
        self.value = None if value is None else _wrap32(value)
        self.frozen = frozen

    def __int__(self):
        if self.value is None:
            raise NkiError("nisa.VirtualRegister", "register read before it was written")
        return self.value

    __index__ = __int__

    def __bool__(self):
        return int(self) != 0

    def __repr__(self):
        return f"VirtualRegister({self.value})"


def _wrap32(v) -> int:
    v = int(v)
    return (v - _I32.min) % 2**32 + _I32.min


def _value(src, op):
    if isinstance(src, VirtualRegister):
        return int(src)
    if isinstance(src, NkiTensor):
        if src.size != 1:
            raise ShapeError(op, f"src must hold one element, got shape {src.shape}")
        return read_raw(src).reshape(-1)[0].item()
    return src


def register_alloc(x=None) -> VirtualRegister:
    """A new register, uninitialised or holding the integer ``x``."""
    state.core("nisa.register_alloc")
    return VirtualRegister(x)


def _target_register(op, dst):
    if not isinstance(dst, VirtualRegister):
        raise NkiError(op, f"dst must be a VirtualRegister, got {type(dst).__name__}")
    if dst.frozen:
        raise NkiError(op, "dst is a loop induction register, which is read-only")


def register_move(dst, src, name=None):
    """dst <- src (an integer constant or another register)."""
    op = "nisa.register_move"
    state.core(op)
    _target_register(op, dst)
    dst.value = _wrap32(_value(src, op))
    trace.emit(op)
    return NkiInstruction(op, name)


def register_load(dst, src, name=None):
    """dst <- the single element of ``src`` (a [1] or [1, 1] tensor in HBM or SBUF)."""
    op = "nisa.register_load"
    state.core(op)
    _target_register(op, dst)
    rules.tensor(op, "src", src)
    dst.value = _wrap32(_value(src, op))
    trace.emit(op)
    return NkiInstruction(op, name)


def register_store(dst, src, name=None):
    """The single element of ``dst`` (a 1-element tensor) <- register ``src``."""
    op = "nisa.register_store"
    state.core(op)
    rules.tensor(op, "dst", dst)
    if dst.size != 1:
        raise ShapeError(op, f"dst must hold one element, got shape {dst.shape}")
    write(dst, np.array([int(src)], np.int64).reshape(dst.shape))
    trace.emit(op)
    return NkiInstruction(op, name)


__all__ = ["VirtualRegister", "register_alloc", "register_move", "register_load", "register_store"]
