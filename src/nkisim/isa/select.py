"""Selection and masking: ``affine_select`` (GpSimd), ``range_select`` and ``select_reduce``
(Vector, with a max-reduction into the VectorE accumulator).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (affine_select, range_select, select_reduce,
reduce_cmd). Imports memory, checks, alu, dispatch (each op is an ``@instruction`` spec: static
rules; compute reads values, runtime offsets and the VectorE accumulator).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import ArgumentError, DtypeError, ShapeError, UnsupportedError
from ..memory.access import read_f32, read_raw, write
from ..memory.tensor import NkiTensor
from . import alu
from .activation import accumulator
from .copy import affine_values, stored_scalar
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine, reduce_cmd as _cmd
from .operands import column_f32, pf

F32 = np.float32
FP32_MIN = float(np.finfo(np.float32).min)          # -3.4028235e38, range_select's only fill value
_RANGE_CMP = ("equal", "less", "less_equal", "greater", "greater_equal")
_SELECT_PREDICATE_DTYPES = ("int8", "uint8", "int16", "uint16", "bool")
_SELECT_ON_TRUE_EXCLUDED = ("tfloat32", "int32", "uint32")


def _as_rules(ins, dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op, offset, name):
    """affine_select's rules (see its docstring): (comparison row, fp32 fill). The pattern and a
    runtime ``offset`` are checked by compute (``affine_values``), which reads the offset."""
    op, t = ins.op, ins.target
    row = alu.lookup_alu(cmp_op, op, "cmp_op")
    if row.kind != "compare":
        raise ArgumentError(op, f"cmp_op must be a comparison operator, got {row.name}")
    for nm, x in (("dst", dst), ("on_true_tile", on_true_tile)):
        rules.tensor(op, nm, x)
        rules.sbuf_only(op, nm, x)
        rules.partitions(op, nm, x, t)
    rules.same_tile(op, "dst", dst, "on_true_tile", on_true_tile)
    return Passed(_engine.gpsimd, (row, _scalar(op, "on_false_value", on_false_value)))


def _as_compute(ins, dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op, offset, name):
    row, fill = ins.info
    a = affine_values(ins.op, pattern, offset, channel_multiplier, dst.shape[0], dst.free_size)
    mask = row.fn(a, np.int32(0)).astype(bool, copy=False)
    if on_true_tile.dtype == dst.dtype:       # selected elements keep their bits
        values = np.where(mask, pf(read_raw(on_true_tile)), stored_scalar(dst, fill))
    else:
        values = np.where(mask, pf(read_f32(on_true_tile)), fill)
    write(dst, values)


@instruction(reads=("on_true_tile", "offset"), writes=("dst",), rules=_as_rules, compute=_as_compute)
def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op="equal",
                  offset=0, name=None):
    """dst = on_true_tile where cmp_op(a, 0) else on_false_value, with
    a[p, i...] = offset + p * channel_multiplier + sum_k step_k * i_k (int32, as ``iota``).

    ``pattern`` = [[step, count], ...] (up to 4 dims); prod(count) must equal the elements per
    partition of dst and on_true_tile. Causal mask: pattern=[[-1, n]], offset=q0 - k0,
    channel_multiplier=1, cmp_op=nl.greater_equal keeps key j <= query p + q0 - k0.
    ``offset`` may be a runtime register or a 1-element integer tensor. ``cmp_op`` is a comparison
    (equal, not_equal, less, less_equal, greater, greater_equal).
    Shapes: dst, on_true_tile same partitions (<= pmax) and elements per partition.
    Buffers: dst and on_true_tile in SBUF. Engine: GpSimd ("using GpSimd Engine").
    Dtypes: ``on_false_value`` an fp32 scalar; selected on_true elements keep their exact bits
    when dtypes match (Decision: a copy, NaN payloads included), otherwise go via fp32; the fill
    is rounded once into dst.dtype.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError (cmp_op not a comparison).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (affine_select).
    """


def _rs_rules(ins, dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd, reduce_res,
              reduce_op, range_start, on_false_value, name):
    """range_select's rules (see its docstring): ((comp_op0 row, comp_op1 row), reduce_cmd)."""
    op, t = ins.op, ins.target
    if t.nc_version < 3:
        raise UnsupportedError(op, f"range_select needs trn2 or newer, not {t.name}")
    rows = []
    for nm, cmp in (("comp_op0", comp_op0), ("comp_op1", comp_op1)):
        row = alu.lookup_alu(cmp, op, nm)
        if row.name not in _RANGE_CMP:
            raise ArgumentError(op, f"{nm} must be one of {', '.join(_RANGE_CMP)}, got {row.name}")
        rows.append(row)
    cmd = as_enum(_cmd, reduce_cmd, op)
    _max_only(op, reduce_op)
    if cmd is _cmd.load_reduce:
        raise UnsupportedError(op, "reduce_cmd=load_reduce is not supported (no initial value)")
    rules.tiles(op, t, dst=dst, on_true_tile=on_true_tile)
    rules.same_tile(op, "dst", dst, "on_true_tile", on_true_tile)
    if not _dt.is_float(on_true_tile.dtype):
        raise DtypeError(op, f"on_true_tile dtype {_dt.name(on_true_tile.dtype)} is not a float dtype")
    p = dst.shape[0]
    for nm, b in (("bound0", bound0), ("bound1", bound1)):
        rules.tensor(op, nm, b)
        rules.column(op, nm, b, p, t)
        rules.float32_operand(op, nm, b)
    if float(_scalar(op, "on_false_value", on_false_value)) != FP32_MIN:
        raise UnsupportedError(op, f"on_false_value must be FP32_MIN ({FP32_MIN}), got {on_false_value}")
    if isinstance(range_start, bool) or not isinstance(range_start, (int, np.integer)):
        raise DtypeError(op, f"range_start must be a compile-time int, got {range_start!r}")
    _reduce_res(op, reduce_res, p, t)
    return Passed(_engine.vector, (rows, cmd))


def _rs_compute(ins, dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd, reduce_res,
                reduce_op, range_start, on_false_value, name):
    rows, cmd = ins.info
    ins.note(reduce_cmd=cmd.name)
    core, p = ins.core, dst.shape[0]
    x = pf(read_f32(on_true_tile))
    idx = (np.arange(x.shape[1], dtype=np.float64) + int(range_start)).astype(F32).reshape(1, -1)
    mask = rows[0].fn(idx, read_f32(bound0).reshape(p, 1)).astype(bool)
    mask &= rows[1].fn(idx, read_f32(bound1).reshape(p, 1)).astype(bool)
    values = np.where(mask, x, F32(FP32_MIN))
    _write_and_reduce(core, cmd, dst, values, reduce_res, p)


@instruction(reads=("on_true_tile", "bound0", "bound1"), writes=("dst", "reduce_res"), rules=_rs_rules,
             compute=_rs_compute)
def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=_cmd.reset_reduce,
                 reduce_res=None, reduce_op="maximum", range_start=0, on_false_value=FP32_MIN, name=None):
    """dst = on_true_tile where comp_op0(i, bound0) and comp_op1(i, bound1) else on_false_value,
    with i = range_start + f (the flattened free index, as fp32); acc = max(acc, max_f dst).

    Shapes: dst, on_true_tile same partitions (<= pmax) and elements per partition; bound0, bound1
    (P, 1) float32 tensors; ``reduce_res`` (P, 1). ``range_start`` a compile-time int.
    ``comp_op0/1`` in equal, less, less_equal, greater, greater_equal. ``reduce_op`` only maximum.
    ``on_false_value`` must be FP32_MIN (-3.4028235e38; it becomes -inf in a bf16/fp16/fp8 dst).
    Dtypes: on_true_tile a float dtype; math in fp32, rounded once into dst.dtype.
    ``reduce_cmd``: reset/reset_reduce set the VectorE accumulator to -inf; reduce/reset_reduce
    take the max with this result (Decision: the fp32 values before rounding, so an all-false row
    reduces to FP32_MIN, not -inf); idle leaves it; load_reduce is not supported. ``reduce_res``
    then receives the accumulator. Buffers: SBUF or PSUM. Targets: trn2 and newer. Engine: Vector.
    Raises: ShapeError, DtypeError, MemorySpaceError, UnsupportedError, ArgumentError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (range_select).
    """


def _sr_rules(ins, dst, predicate, on_true, on_false, reduce_res, reduce_cmd, reduce_op, reverse_pred,
              name):
    """select_reduce's rules (see its docstring): the reduce_cmd."""
    op, t = ins.op, ins.target
    cmd = as_enum(_cmd, reduce_cmd, op)
    _max_only(op, reduce_op)
    if cmd is _cmd.load_reduce:
        raise UnsupportedError(op, "reduce_cmd=load_reduce is not supported (no initial value)")
    rules.tiles(op, t, dst=dst, predicate=predicate, on_true=on_true)
    rules.same_tile(op, "on_true", on_true, "dst", dst)
    rules.same_tile(op, "on_true", on_true, "predicate", predicate)
    rules.not_both_psum(op, "on_true", on_true, "predicate", predicate)
    rules.dtype_in(op, "predicate", predicate, _SELECT_PREDICATE_DTYPES, t)
    if _dt.name(on_true.dtype) in _SELECT_ON_TRUE_EXCLUDED:
        raise DtypeError(op, f"on_true dtype {_dt.name(on_true.dtype)} is not supported; any dtype but "
                             f"{', '.join(_SELECT_ON_TRUE_EXCLUDED)}")
    p = on_true.shape[0]
    rules.column(op, "on_false", on_false, p, t)
    if on_false is None:
        raise ShapeError(op, f"on_false must be a scalar or a ({p}, 1) tensor, got None")
    _reduce_res(op, reduce_res, p, t)
    return Passed(_engine.vector, cmd)


def _sr_compute(ins, dst, predicate, on_true, on_false, reduce_res, reduce_cmd, reduce_op, reverse_pred,
                name):
    cmd = ins.info
    ins.note(reduce_cmd=cmd.name)
    core, p = ins.core, on_true.shape[0]
    mask = pf(read_raw(predicate)) != 0
    if reverse_pred:
        mask = ~mask
    values = np.where(mask, pf(read_f32(on_true)), column_f32(on_false, 2))
    _write_and_reduce(core, cmd, dst, values, reduce_res, p)


@instruction(reads=("predicate", "on_true", "on_false"), writes=("dst", "reduce_res"), rules=_sr_rules,
             compute=_sr_compute)
def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=_cmd.idle,
                  reduce_op="maximum", reverse_pred=False, name=None):
    """dst = where(predicate != 0 (xor reverse_pred), on_true, on_false); acc = max(acc, max_f dst).

    Shapes: dst, predicate, on_true same partitions (<= pmax) and elements per partition;
    ``on_false`` an fp32 scalar or a (P, 1) tensor; ``reduce_res`` (P, 1) float.
    Dtypes: predicate int8/uint8/int16/uint16 (Decision: bool too); on_true any but tfloat32,
    int32, uint32; math in fp32, rounded once into dst.dtype. ``reduce_op`` only maximum.
    ``reduce_cmd``: idle (default) leaves the VectorE accumulator; reset/reset_reduce set it to
    -inf; reduce/reset_reduce take the max with the fp32 result. ``reduce_res`` receives the
    accumulator (Decision: also after idle, so pass reset_reduce to get this row's max).
    load_reduce is not supported. Buffers: SBUF or PSUM; on_true and predicate not both in PSUM.
    Engine: Vector.
    Raises: ShapeError, DtypeError, MemorySpaceError, UnsupportedError, ArgumentError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (select_reduce).
    """


def _scalar(op, name, v) -> F32:
    if isinstance(v, NkiTensor) or np.ndim(v) != 0:
        raise ShapeError(op, f"{name} must be a scalar, got {type(v).__name__}")
    return F32(v)


def _max_only(op, reduce_op):
    if alu.op_name(reduce_op, op, "reduce_op") != "maximum":
        raise ArgumentError(op, f"reduce_op must be nl.maximum, got {alu.op_name(reduce_op)}")


def _reduce_res(op, reduce_res, p, t):
    if reduce_res is None:
        return
    rules.tensor(op, "reduce_res", reduce_res)
    rules.column(op, "reduce_res", reduce_res, p, t)
    if not _dt.is_float(reduce_res.dtype):
        raise DtypeError(op, f"reduce_res dtype {_dt.name(reduce_res.dtype)} is not a float dtype")


def _write_and_reduce(core, cmd, dst, values, reduce_res, p):
    """Apply ``cmd`` to the accumulator with ``values``, write them to ``dst`` and, when given,
    the accumulator's per-partition result to ``reduce_res`` (P, 1)."""
    _accumulate(core, cmd, values, p)
    write(dst, values)
    if reduce_res is not None:
        write(reduce_res, accumulator(core, "vec", p)[:p].reshape(p, 1))


def _accumulate(core, cmd, values, p):
    """Apply ``cmd`` to the VectorE accumulator with this instruction's (P, F) fp32 values (runtime
    state of the core: only compute functions call this)."""
    acc = accumulator(core, "vec", p)
    if cmd in (_cmd.reset, _cmd.reset_reduce):
        acc[:p] = -np.inf
    if cmd in (_cmd.reduce, _cmd.reset_reduce):
        if values.shape[1]:
            acc[:p] = np.maximum(acc[:p], values.max(axis=1))


__all__ = ["affine_select", "range_select", "select_reduce"]
