"""Element-wise compute: ``tensor_tensor``, ``tensor_scalar``.

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_tensor, tensor_scalar) and
nki/api/nki.api.shared.rst (ALU operators). Imports memory, checks, alu.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .. import trace
from ..checks import rules
from ..errors import DtypeError, EngineError
from ..memory.access import read_f32, read_raw, write
from . import alu
from .copy import gpsimd_no_psum
from .enums import NkiInstruction, as_enum, engine as _engine
from .operands import column_f32, target

_EXACT_INT = (_dt.int32, _dt.uint32)
_EXACT_INT_OPS = frozenset(("add", "subtract", "multiply", "maximum", "minimum"))


def tensor_tensor(dst, data1, data2, op, engine=_engine.unknown, name=None, **ignored):
    """dst = op(data1, data2), element-wise.

    Shapes: data1, data2, dst have the same partition count (<= pmax) and elements per partition
    (no broadcasting; use tensor_scalar for a (P, 1) operand).
    Buffers: SBUF or PSUM; data1 and data2 not both in PSUM; GpSimd (``nl.power``) SBUF only.
    Dtypes: arithmetic ops compute in fp32 and round once into dst.dtype. Bitvec ops (bitwise_*,
    shifts, invert) need integer operands and work on bit patterns. Exact integer path: when both
    inputs are int32/uint32 and the op is add/subtract/multiply/maximum/minimum, the GpSimd engine
    computes exactly (unless engine=vector); Decision: results saturate to dst's range.
    Raises: ShapeError, MemorySpaceError, DtypeError, NkiError (unknown op).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_tensor).
    """
    opn = "nisa.tensor_tensor"
    t = target(opn)
    row = alu.lookup_alu(op, opn)
    eng = as_enum(_engine, engine, opn)
    for nm, x in (("dst", dst), ("data1", data1), ("data2", data2)):
        rules.tensor(opn, nm, x)
        rules.on_chip(opn, nm, x)
        rules.partitions(opn, nm, x, t)
    rules.same_tile(opn, "data1", data1, "data2", data2)
    rules.same_tile(opn, "data1", data1, "dst", dst)
    rules.not_both_psum(opn, "data1", data1, "data2", data2)
    if row.name == "power":
        if eng not in (_engine.unknown, _engine.gpsimd):
            raise EngineError(opn, f"nl.power runs only on the gpsimd engine, not {eng.name}")
        eng = _engine.gpsimd
    gpsimd_no_psum(opn, eng, dst=dst, data1=data1, data2=data2)
    shape = data1.shape
    if row.kind == "bitvec":
        rules.int_dtype(opn, "data1", data1, f"bitvec op {row.name}")
        rules.int_dtype(opn, "data2", data2, f"bitvec op {row.name}")
        a, b = read_raw(data1), read_raw(data2).reshape(shape)
        res = row.fn(a, b.astype(a.dtype))
    elif (data1.dtype in _EXACT_INT and data2.dtype in _EXACT_INT and row.name in _EXACT_INT_OPS
          and eng is not _engine.vector):
        res = row.fn(read_raw(data1).astype(np.int64), read_raw(data2).astype(np.int64).reshape(shape))
    else:
        res = row.fn(read_f32(data1), read_f32(data2).reshape(shape))
    write(dst, res)
    trace.emit(opn, dst=dst, data1=data1, data2=data2, op=row.name, engine=eng)
    return NkiInstruction(opn, name)


def _apply(row, x, operand, reverse):
    if row.unary:
        return row.fn(x)
    return row.fn(operand, x) if reverse else row.fn(x, operand)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=_engine.unknown, name=None, **ignored):
    """dst = (data op0 operand0) op1 operand1; operands broadcast along the free dims.

    ``reverse0`` computes ``operand0 op0 data``; ``reverse1`` likewise for op1. A unary op0/op1
    (abs, square, relu, rsqrt, reciprocal, ...) ignores its operand.
    Shapes: data, dst (P, F...), P <= pmax, same elements per partition; operand0/1 a scalar or a
    (P, 1) tensor. Dtypes: arithmetic in fp32, rounded once into dst.dtype; bitvec ops (both ops
    bitvec) on integer bit patterns with integer operands.
    Buffers: SBUF or PSUM (GpSimd: SBUF only).
    Raises: ShapeError, MemorySpaceError, DtypeError, NkiError (unknown op).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_scalar).
    """
    opn = "nisa.tensor_scalar"
    t = target(opn)
    row0 = alu.lookup_alu(op0, opn)
    row1 = alu.lookup_alu(op1, opn) if op1 is not None else None
    eng = as_enum(_engine, engine, opn)
    for nm, x in (("dst", dst), ("data", data)):
        rules.tensor(opn, nm, x)
        rules.on_chip(opn, nm, x)
        rules.partitions(opn, nm, x, t)
    rules.same_tile(opn, "data", data, "dst", dst)
    p = data.shape[0]
    rules.column(opn, "operand0", operand0, p, t)
    if row1 is not None:
        rules.column(opn, "operand1", operand1, p, t)
    gpsimd_no_psum(opn, eng, dst=dst, data=data)
    bitvec = row0.kind == "bitvec"
    if row1 is not None and (row1.kind == "bitvec") != bitvec:
        raise DtypeError(opn, f"op0 {row0.name} and op1 {row1.name} must both be bitvec or both arithmetic")
    if bitvec:
        rules.int_dtype(opn, "data", data, f"bitvec op {row0.name}")
        x = read_raw(data)
        o0 = _int_operand(operand0, x)
        x = _apply(row0, x, o0, reverse0)
        if row1 is not None:
            x = _apply(row1, x, _int_operand(operand1, x), reverse1)
    else:
        x = read_f32(data)
        x = _apply(row0, x, column_f32(operand0, x.ndim), reverse0)
        if row1 is not None:
            x = _apply(row1, x, column_f32(operand1, x.ndim), reverse1)
    write(dst, x)
    trace.emit(opn, dst=dst, data=data, op0=row0.name, op1=row1.name if row1 else None, engine=eng)
    return NkiInstruction(opn, name)


def _int_operand(v, x):
    from ..memory.tensor import NkiTensor
    if isinstance(v, NkiTensor):
        a = read_raw(v)
        return a.reshape((a.shape[0],) + (1,) * (x.ndim - 1)).astype(x.dtype)
    return np.asarray(0 if v is None else v).astype(x.dtype)


__all__ = ["tensor_tensor", "tensor_scalar"]
