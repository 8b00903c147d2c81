"""On-chip copies and fills: ``tensor_copy``, ``memset``.

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_copy, memset). Imports memory, checks.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .. import trace
from ..checks import rules
from ..errors import DtypeError, MemorySpaceError
from ..memory.access import read_f32, read_raw, write
from ..memory.buffers import psum
from .enums import NkiInstruction, as_enum, engine as _engine
from .operands import target


def gpsimd_no_psum(op, engine, **operands):
    """GpSimd cannot reach PSUM."""
    if engine is _engine.gpsimd:
        for name, t in operands.items():
            if t is not None and getattr(t, "buffer", None) is psum:
                raise MemorySpaceError(op, f"{name} is in psum, which the gpsimd engine cannot access")


def tensor_copy(dst, src, engine=_engine.unknown, name=None, dtype=None):
    """dst = src on the Vector, Scalar or GpSimd engine.

    Shapes: same partition count (<= pmax) and elements per partition; free shapes may differ.
    Buffers: SBUF or PSUM (GpSimd: SBUF only). Dtypes: same dtype copies bits exactly, otherwise
    via fp32, rounded once into dst.dtype. ``dtype=`` (seen in old tutorials) is ignored.
    Raises: ShapeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_copy).
    """
    op = "nisa.tensor_copy"
    t = target(op)
    eng = as_enum(_engine, engine, op)
    rules.tensor(op, "dst", dst)
    rules.tensor(op, "src", src)
    rules.on_chip(op, "src", src)
    rules.on_chip(op, "dst", dst)
    rules.partitions(op, "src", src, t)
    rules.partitions(op, "dst", dst, t)
    rules.same_tile(op, "src", src, "dst", dst)
    gpsimd_no_psum(op, eng, src=src, dst=dst)
    write(dst, read_raw(src) if src.dtype == dst.dtype else read_f32(src))
    trace.emit(op, dst=dst, src=src, engine=eng)
    return NkiInstruction(op, name)


def memset(dst, value, engine=_engine.unknown, name=None, **ignored):
    """dst[...] = value (a compile-time constant), on the Vector or GpSimd engine.

    Buffers: SBUF or PSUM (GpSimd: SBUF only). Dtypes: an integer dst takes an integral value
    (Decision: integral floats such as 0.0 are accepted, fractional ones raise DtypeError); the
    value is rounded once into dst.dtype.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (memset).
    """
    op = "nisa.memset"
    t = target(op)
    eng = as_enum(_engine, engine, op)
    rules.tensor(op, "dst", dst)
    rules.on_chip(op, "dst", dst)
    rules.partitions(op, "dst", dst, t)
    gpsimd_no_psum(op, eng, dst=dst)
    v = np.asarray(value)
    if v.ndim != 0:
        raise DtypeError(op, f"value must be a scalar constant, got {type(value).__name__}")
    if _dt.is_int(dst.dtype):
        if v.dtype.kind == "f" and float(v) != int(float(v)):
            raise DtypeError(op, f"value {value} is not an integer but dst dtype is {_dt.name(dst.dtype)}")
        info = np.iinfo(dst.dtype)
        iv = int(float(v)) if v.dtype.kind == "f" else int(v)
        if not info.min <= iv <= info.max:
            raise DtypeError(op, f"value {value} is outside the range of {_dt.name(dst.dtype)}")
        write(dst, np.full(dst.shape, iv, dst.dtype))
    else:
        write(dst, np.full(dst.shape, np.float32(value), np.float32))
    trace.emit(op, dst=dst, engine=eng)
    return NkiInstruction(op, name)


__all__ = ["tensor_copy", "memset"]
