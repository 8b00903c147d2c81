"""Reductions: ``tensor_reduce`` (free dims, VectorE), ``tensor_partition_reduce`` (across
partitions, GpSimd), ``tensor_scalar_reduce`` (tensor_scalar + free-dim reduction into the VectorE
accumulator).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_reduce, tensor_partition_reduce,
tensor_scalar_reduce) and nki/api/nki.api.shared.rst (ALU operators). Imports memory, checks,
alu, state. Each op is an ``@instruction`` spec: rules (static, memoised) + compute (values,
the VectorE accumulator).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import ArgumentError, DtypeError, ShapeError, UnsupportedError
from ..memory.access import read_f32, read_raw, write
from ..memory.tensor import NkiTensor
from . import alu
from .activation import accumulator
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine, reduce_cmd as _cmd
from .operands import column_f32, pf

F32 = np.float32

# ALU operators that can fold a sequence (the "R" column of the ALU table).
_REDUCE_OPS = frozenset(("add", "subtract", "multiply", "maximum", "minimum", "logical_and",
                         "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"))
_PARTITION_OPS = ("add", "average", "maximum", "bitwise_or", "bitwise_and")
_SCALAR_REDUCE_OPS = ("add", "multiply", "maximum", "minimum")
_SCALAR_REDUCE_CMDS = (_cmd.reset_reduce, _cmd.reduce, _cmd.load_reduce)
_EXACT_INT = (_dt.int32, _dt.uint32)
# An operator token this instruction does not take raises a bare NkiError, the class of
# alu.lookup_alu's "not an ALU operator" (tests/corpus pins it); every other rule a subclass.


def _fold(row, a, axis):
    """``row`` folded left to right along ``axis`` (ufunc.reduce where the op is a ufunc)."""
    if isinstance(row.fn, np.ufunc):
        return row.fn.reduce(a, axis=axis)
    a = np.moveaxis(a, axis, 0)
    acc = a[0]
    for k in range(1, a.shape[0]):
        acc = row.fn(acc, a[k])
    return acc


def _axes(opn, axis, data):
    """The reduced axes as a sorted tuple; they must be trailing free dims ending at the last."""
    nd = data.ndim
    raw = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    if not raw:
        raise ShapeError(opn, "axis is empty; give at least one free dim")
    try:
        axes = sorted({int(a) + nd if int(a) < 0 else int(a) for a in raw})
    except TypeError:
        raise ShapeError(opn, f"axis must be an int or a list of ints, got {axis!r}") from None
    if axes[0] == 0:
        raise ShapeError(opn, f"axis {tuple(raw)} includes the partition dim 0, which cannot be reduced")
    if axes[-1] >= nd or axes[0] < 0 or axes != list(range(axes[0], nd)):
        raise ShapeError(opn, f"axis {tuple(raw)} must be trailing free dims ending at the last dim "
                              f"{nd - 1} of data {data.shape}")
    return tuple(axes)


def _tr_rules(ins, dst, op, data, axis, negate, keepdims, name):
    """tensor_reduce's rules (see its docstring): (ALU row, reduced axes, kept and reduced sizes)."""
    opn, t = ins.op, ins.target
    row = alu.lookup_alu(op, opn, "op")
    if row.name not in _REDUCE_OPS:
        raise ArgumentError(opn, f"op {row.name} is not a reduction operator; expected one of "
                            f"{', '.join(sorted(_REDUCE_OPS))}")
    rules.tiles(opn, t, dst=dst, data=data)
    axes = _axes(opn, axis, data)
    kept = data.shape[1:axes[0]]
    if dst.shape[0] != data.shape[0]:
        raise ShapeError(opn, f"dst partition dim {dst.shape[0]} does not match data partition dim "
                              f"{data.shape[0]}")
    want = math.prod(kept)
    if dst.free_size != want:
        out_shape = (data.shape[0],) + kept + ((1,) * len(axes) if keepdims else ())
        raise ShapeError(opn, f"dst has {dst.free_size} elements per partition, reducing axis "
                              f"{axes} of data {data.shape} gives {want} (shape {out_shape})")
    n = math.prod(data.shape[axes[0]:])
    if row.kind == "bitvec":
        if negate:
            raise ShapeError(opn, f"negate=True needs an arithmetic op, got bitvec op {row.name}")
        rules.int_dtype(opn, "data", data, f"bitvec op {row.name}")
        rules.int_dtype(opn, "dst", dst, f"bitvec op {row.name}")
    return Passed(_engine.vector, (row, want, n))


def _tr_compute(ins, dst, op, data, axis, negate, keepdims, name):
    row, want, n = ins.info
    a = read_raw(data) if row.kind == "bitvec" else read_f32(data)
    a = a.reshape((data.shape[0], want, n))
    res = _fold(row, a, 2) if n else np.full(a.shape[:2], row.identity, a.dtype)
    if negate:
        res = np.negative(res, dtype=F32)
    write(dst, res)


@instruction(reads=("data",), writes=("dst",), rules=_tr_rules, compute=_tr_compute)
def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    """dst = op-reduction of data over the trailing free dims ``axis`` (times -1 if ``negate``).

    ``axis``: an int or a list of ints, the last free dims of data ending at the final dim, e.g.
    (3,), (2, 3) or (1, 2, 3) for a 4-D tile; axis 0 is illegal. Decision: negative axes count from
    the end. ``op``: add, subtract, multiply, maximum, minimum, logical_and/or/xor (arithmetic,
    fp32 math) or bitwise_and/or/xor (bitvec: integer data and dst, bit patterns). Decision: the
    fold runs left to right from the first element (``subtract`` gives x0 - x1 - ...).
    ``negate`` (arithmetic only) multiplies the fp32 result by -1. ``keepdims`` only shapes the
    result; dst needs P partitions and as many elements per partition as the kept dims hold.
    Buffers: SBUF or PSUM. Engine: Vector.
    Raises: ShapeError (axis, dst size, negate with a bitvec op), DtypeError (bitvec on floats),
    MemorySpaceError, NkiError (op not a reduction operator).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_reduce).
    """


def _tpr_rules(ins, dst, op, data, name):
    """tensor_partition_reduce's rules (see its docstring): the canonical op name."""
    opn, t = ins.op, ins.target
    name_ = alu.op_name(op, opn, "op")
    name_ = "average" if name_ == "mean" else name_
    if name_ not in _PARTITION_OPS:
        raise ArgumentError(opn, f"op {name_} is not supported; expected one of {', '.join(_PARTITION_OPS)}")
    rules.tiles(opn, t, dst=dst, data=data)
    rules.sbuf_only(opn, "data", data)
    rules.sbuf_only(opn, "dst", dst)
    if dst.shape[0] != 1:
        raise ShapeError(opn, f"dst partition dim {dst.shape[0]} must be 1")
    if dst.free_size != data.free_size:
        raise ShapeError(opn, f"dst has {dst.free_size} elements per partition, data has "
                              f"{data.free_size} (shapes {dst.shape} vs {data.shape})")
    if name_ in ("bitwise_or", "bitwise_and"):
        rules.int_dtype(opn, "data", data, f"bitvec op {name_}")
        rules.int_dtype(opn, "dst", dst, f"bitvec op {name_}")
    return Passed(_engine.gpsimd, name_)


def _tpr_compute(ins, dst, op, data, name):
    name_ = ins.info
    p = data.shape[0]
    if name_ in ("bitwise_or", "bitwise_and"):
        res = alu.ALU[name_].fn.reduce(pf(read_raw(data)), axis=0)
    elif data.dtype in _EXACT_INT and name_ != "average":
        res = alu.ALU[name_].fn.reduce(pf(read_raw(data)).astype(np.int64), axis=0)
    elif name_ == "average":
        res = np.add.reduce(pf(read_f32(data)), axis=0, dtype=F32) / F32(p)
    else:
        res = alu.ALU[name_].fn.reduce(pf(read_f32(data)), axis=0)
    write(dst, res.reshape(1, -1))


@instruction(reads=("data",), writes=("dst",), rules=_tpr_rules, compute=_tpr_compute)
def tensor_partition_reduce(dst, op, data, name=None):
    """dst[0, f] = op-reduction of data[:, f] across the partition dim, for every free element f.

    ``op``: add, average (``nl.average``; the sum divided by the partition count), maximum
    (``nl.max``), bitwise_or, bitwise_and (bitvec: integer data and dst, bit patterns).
    Shapes: data (P, F...) with P <= pmax; dst (1, F...) with the same elements per partition.
    Dtypes: arithmetic in fp32; Decision: int32/uint32 data with add/maximum is exact integer math
    (GpSimd has native int32, as in ``tensor_tensor``), saturated into dst.dtype.
    Buffers: SBUF only (GpSimd engine).
    Raises: ShapeError, MemorySpaceError, DtypeError, NkiError (op).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_partition_reduce).
    """


def _tsr_rules(ins, dst, data, op0, operand0, reduce_op, reduce_res, reverse0, reduce_cmd,
               reduce_init, reduce_res_negate, name):
    """tensor_scalar_reduce's rules (see its docstring): (op0 row, reduce_op row, reduce_cmd)."""
    opn, t = ins.op, ins.target
    row0 = alu.lookup_alu(op0, opn, "op0", t)
    if row0.kind == "bitvec":
        raise DtypeError(opn, f"op0 {row0.name} is a bitvec operator; only arithmetic operators are supported")
    rrow = alu.lookup_alu(reduce_op, opn, "reduce_op")
    if rrow.name not in _SCALAR_REDUCE_OPS:
        raise ArgumentError(opn, f"reduce_op {rrow.name} is not supported; expected one of "
                            f"{', '.join(_SCALAR_REDUCE_OPS)}")
    if reverse0:
        raise UnsupportedError(opn, "reverse0=True is not supported yet (per the NKI docs)")
    cmd = as_enum(_cmd, reduce_cmd, opn)
    if cmd not in _SCALAR_REDUCE_CMDS:
        raise UnsupportedError(opn, f"reduce_cmd {cmd.name} is not supported; expected one of "
                                    f"{', '.join(c.name for c in _SCALAR_REDUCE_CMDS)}")
    if cmd is _cmd.load_reduce and reduce_init is None:
        raise ShapeError(opn, "reduce_init is required when reduce_cmd is load_reduce")
    if cmd is not _cmd.load_reduce and reduce_init is not None:
        raise ShapeError(opn, f"reduce_init must be None unless reduce_cmd is load_reduce, got "
                              f"reduce_cmd {cmd.name}")
    rules.tiles(opn, t, dst=dst, data=data)
    rules.same_tile(opn, "data", data, "dst", dst)
    p = data.shape[0]
    rules.column(opn, "operand0", operand0, p, t)
    rules.float32_operand(opn, "operand0", operand0, f"for arithmetic op0 {row0.name}")
    rules.column(opn, "reduce_init", reduce_init, p, t)
    rules.float32_operand(opn, "reduce_init", reduce_init)
    if reduce_res is not None:
        rules.tiles(opn, t, reduce_res=reduce_res)
        rules.column(opn, "reduce_res", reduce_res, p, t)
    return Passed(_engine.vector, (row0, rrow, cmd))


def _tsr_compute(ins, dst, data, op0, operand0, reduce_op, reduce_res, reverse0, reduce_cmd,
                 reduce_init, reduce_res_negate, name):
    row0, rrow, cmd = ins.info
    ins.note(reduce_cmd=cmd.name)
    p = data.shape[0]
    x = read_f32(data)
    y = row0.fn(x) if row0.unary else row0.fn(x, column_f32(operand0, x.ndim))
    y = np.asarray(y, F32)
    acc = accumulator(ins.core, "vec", p)          # VectorE state: read and written here, never in rules
    if cmd is _cmd.reset_reduce:
        acc[:p] = rrow.identity
    elif cmd is _cmd.load_reduce:
        acc[:p] = column_f32(reduce_init, 2).reshape(-1) if isinstance(reduce_init, NkiTensor) \
            else F32(reduce_init)
    part = rrow.fn.reduce(pf(y), axis=1, dtype=F32) if y.size else F32(rrow.identity)
    acc[:p] = rrow.fn(acc[:p], part)
    reduced = acc[:p].copy()
    write(dst, y)
    if reduce_res is not None:
        write(reduce_res, (np.negative(reduced) if reduce_res_negate else reduced).reshape(p, 1))


@instruction(reads=("data", "operand0", "reduce_init"), writes=("dst", "reduce_res"), rules=_tsr_rules,
             compute=_tsr_compute)
def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False,
                         name=None):
    """dst = data op0 operand0; acc = reduce_op(acc, reduce_op over all free dims of the result).

    ``reduce_cmd`` (VectorE accumulator): ``reset_reduce`` (default) starts from the identity of
    ``reduce_op``, ``reduce`` keeps the accumulator, ``load_reduce`` starts from ``reduce_init``
    (required then, and only then). ``reduce_res`` (P, 1) receives the accumulator, negated if
    ``reduce_res_negate`` (the accumulator itself is not); ``None`` keeps it in the accumulator.
    Decision: the docs say reset_reduce resets to 0; we reset to the identity of reduce_op
    (0 add, 1 multiply, -inf max, +inf min), as ``tensor_scalar_cumulative`` documents, since 0
    would make multiply and max/min of negative data meaningless. Decision: the reduction is over
    the fp32 values before rounding into dst.dtype. Decision: the docs mark ``reverse0`` "not
    supported yet", so ``reverse0=True`` raises UnsupportedError. ``reduce_res`` defaults to None
    and ``reduce_res_negate`` is accepted (NKI 0.6 digest and the current documented signature; an
    older stored docstring had ``reduce_res`` positional and no ``reduce_res_negate``).
    Dtypes: a tensor ``reduce_init`` must be float32 ("Supported dtypes: float32"); so must a tensor
    ``operand0`` (Decision: the docs say "Refer to nisa.tensor_scalar for semantics of
    data/op0/operand0", and tensor_scalar's operands "must be float32").
    ``op0``: one arithmetic operator (a unary op ignores operand0); ``reduce_op``: add, multiply,
    maximum (``nl.max``), minimum (``nl.min``). Shapes: data, dst (P, F...), P <= pmax, same
    elements per partition; operand0 and reduce_init a scalar or (P, 1) tensor.
    Buffers: SBUF or PSUM. Engine: Vector.
    Raises: ShapeError (shapes, reduce_init with the wrong reduce_cmd), MemorySpaceError, DtypeError
    (bitvec op0), UnsupportedError (reverse0, reduce_cmd), NkiError (reduce_op).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_scalar_reduce).
    """


__all__ = ["tensor_reduce", "tensor_partition_reduce", "tensor_scalar_reduce"]
