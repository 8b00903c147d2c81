"""Scans: ``tensor_tensor_scan`` (a per-partition recurrence along the free dim, VectorE) and
``tensor_scalar_cumulative`` (a tensor-scalar op, then a running reduction through the VectorE
accumulator).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_tensor_scan, tensor_scalar_cumulative).
Imports memory, checks, alu, dispatch (the ops are ``@instruction`` specs: static rules, compute).
"""
from __future__ import annotations

import numpy as np

from ..checks import rules
from ..errors import ArgumentError, DtypeError
from ..memory.access import read_f32, write
from . import alu
from .activation import accumulator
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine, reduce_cmd as _cmd
from .operands import column_f32, pf

F32 = np.float32


def _tts_rules(ins, dst, data0, data1, initial, op0, op1, reverse0, reverse1, name):
    """tensor_tensor_scan's rules (see its docstring): the (op0, op1) ALU rows."""
    opn, t = ins.op, ins.target
    row0 = alu.lookup_alu(op0, opn, "op0", t)
    row1 = alu.lookup_alu(op1, opn, "op1", t)
    for what, row in (("op0", row0), ("op1", row1)):
        if row.kind == "bitvec":
            raise DtypeError(opn, f"{what} {row.name} is a bitvec operator; only arithmetic operators "
                                  f"are supported")
        if row.unary and row.name != "bypass":
            raise ArgumentError(opn, f"{what} {row.name} is a unary operator; a binary operator is required")
    rules.tiles(opn, t, dst=dst, data0=data0, data1=data1)
    rules.same_tile(opn, "data0", data0, "data1", data1)
    rules.same_tile(opn, "data0", data0, "dst", dst)
    rules.not_both_psum(opn, "data0", data0, "data1", data1)
    rules.column(opn, "initial", initial, data0.shape[0], t)
    rules.float32_operand(opn, "initial", initial)
    return Passed(_engine.vector, (row0, row1))


def _tts_compute(ins, dst, data0, data1, initial, op0, op1, reverse0, reverse1, name):
    row0, row1 = ins.info
    p = data0.shape[0]
    d0 = pf(read_f32(data0))
    d1 = pf(read_f32(data1))
    init = np.broadcast_to(column_f32(initial, 2), (p, 1)).astype(F32)
    core = ins.core
    fast = core.fast and _accumulates(row0, row1)
    if fast:
        core.launch.count("scan_accumulate")
    write(dst, _scan(row0, row1, d0, d1, init, reverse0, reverse1, fast))


@instruction(reads=("data0", "data1", "initial"), writes=("dst",), rules=_tts_rules, compute=_tts_compute)
def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       name=None):
    """r[0] = op1(op0(data0[0], initial), data1[0]); r[i] = op1(op0(data0[i], r[i-1]), data1[i]).

    Per partition along the flattened free dims, in fp32; dst = r rounded once into dst.dtype.
    ``reverse0`` makes data0 the rhs of op0 (``op0(r[i-1], data0[i])``); ``reverse1`` makes data1
    the lhs of op1 (``op1(data1[i], t)``). Typical: op0=multiply, op1=add (linear recurrence).
    Ops: binary arithmetic operators (comparisons included); Decision: ``nl.bypass`` is allowed and
    passes its lhs through (op0=bypass with reverse0 carries r[i-1]; without, it takes data0[i]).
    Shapes: data0, data1, dst (P, F...), P <= pmax, same elements per partition; ``initial`` a
    scalar or (P, 1) tensor. Dtypes: data0, data1, dst any; Decision: a tensor ``initial`` must be
    float32 (the docs say "a float32 compile-time scalar constant ... or a tile with the same
    partition axis size" and name no tile dtype; float32 like every other per-partition operand).
    Buffers: SBUF or PSUM; data0 and data1 not both in PSUM. Engine: Vector.
    Speed: (add, add) and (bypass, add) run as one NumPy ``add.accumulate`` over the interleaved
    operands (initial, d0[0], d1[0], d0[1], ...): the same fp32 additions in the same sequence, and
    IEEE addition is commutative, so results equal the step-by-step loop bit for bit (only the
    payload of a NaN produced from two NaN inputs may differ). Every other pair, and every pair with
    fast paths off (``NKISIM_FAST_PATHS=0``), loops over the free dim with one vector op per step
    across partitions; the one-call form is counted as fast path ``scan_accumulate``.
    Raises: ShapeError, MemorySpaceError, DtypeError (bitvec op), ArgumentError (unary op).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_tensor_scan).
    """


def _accumulates(row0, row1) -> bool:
    """(add, add) and (bypass, add) have a one-call NumPy form (see tensor_tensor_scan)."""
    return row1.name == "add" and row0.name in ("add", "bypass")


def _scan(row0, row1, d0, d1, init, reverse0, reverse1, fast=True):
    """The (P, F) fp32 scan result; ``init`` is (P, 1). ``fast``: use the one-call NumPy form of
    (add, add) and (bypass, add) (a fast path: off with fast paths off)."""
    p, f = d0.shape
    if fast and _accumulates(row0, row1):
        if row0.name == "add":
            s = np.empty((p, 2 * f + 1), F32)
            s[:, :1] = init
            s[:, 1::2] = d0
            s[:, 2::2] = d1
            return np.add.accumulate(s, axis=1, dtype=F32)[:, 2::2]
        if row0.name == "bypass" and reverse0:
            return np.add.accumulate(np.concatenate((init, d1), axis=1), axis=1, dtype=F32)[:, 1:]
        if row0.name == "bypass":
            return np.add(d1, d0) if reverse1 else np.add(d0, d1)
    d0t = np.ascontiguousarray(d0.T)
    d1t = np.ascontiguousarray(d1.T)
    out = np.empty((f, p), F32)
    r = init.reshape(p)
    fn0, fn1 = row0.fn, row1.fn
    with np.errstate(all="ignore"):
        for i in range(f):
            a = fn0(r, d0t[i]) if reverse0 else fn0(d0t[i], r)
            r = fn1(d1t[i], a) if reverse1 else fn1(a, d1t[i])
            out[i] = r
            r = out[i]
    return out.T


# ---- tensor_scalar_cumulative ------------------------------------------------------------------

_TSC_OP1 = ("add", "subtract", "multiply", "maximum", "minimum")
_TSC_CMDS = (_cmd.reset_reduce, _cmd.reduce, _cmd.load_reduce)
# "Input / output dtypes are restricted to BF16, FP16, FP32, FP8, UINT8, UINT16, INT8, INT16"
_TSC_DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "uint8",
               "uint16", "int8", "int16")


def _tsc_rules(ins, dst, src, op0, op1, imm0, imm1, reduce_cmd, name):
    """tensor_scalar_cumulative's rules (see its docstring): (op0 row, op1 row, reduce_cmd)."""
    opn, t = ins.op, ins.target
    row0 = alu.lookup_alu(op0, opn, "op0", t)
    if row0.kind == "bitvec":
        raise DtypeError(opn, f"op0 {row0.name} is a bitvec operator; only arithmetic operators are supported")
    if row0.unary:
        raise ArgumentError(opn, f"op0 {row0.name} is a unary operator; a binary operator is required")
    row1 = alu.lookup_alu(op1, opn, "op1", t)
    if row1.name not in _TSC_OP1:
        raise ArgumentError(opn, f"op1 {row1.name} is not a cumulative operator; expected one of "
                                 f"{', '.join(_TSC_OP1)}")
    cmd = as_enum(_cmd, reduce_cmd, opn)
    if cmd not in _TSC_CMDS:
        raise ArgumentError(opn, f"reduce_cmd {cmd.name} is not supported; expected one of "
                                 f"{', '.join(c.name for c in _TSC_CMDS)}")
    rules.tiles(opn, t, dst=dst, src=src)
    rules.same_tile(opn, "src", src, "dst", dst)
    allowed = tuple(d for d in _TSC_DTYPES if d in t.dtypes)
    rules.dtype_in(opn, "src", src, allowed, t)
    rules.dtype_in(opn, "dst", dst, allowed, t)
    p = src.shape[0]
    for what, v in (("imm0", imm0), ("imm1", imm1)):
        rules.column(opn, what, v, p, t)
        rules.float32_operand(opn, what, v)
    if cmd is _cmd.load_reduce and imm1 is None:
        raise ArgumentError(opn, "imm1 is required when reduce_cmd is load_reduce")
    return Passed(_engine.vector, (row0, row1, cmd))


def _tsc_compute(ins, dst, src, op0, op1, imm0, imm1, reduce_cmd, name):
    row0, row1, cmd = ins.info
    p = src.shape[0]
    with np.errstate(all="ignore"):
        t = np.asarray(row0.fn(pf(read_f32(src)), column_f32(imm0, 2)), F32)
    t = np.broadcast_to(t, (p, src.free_size))
    acc = accumulator(ins.core, "vec", p)        # VectorE state: read and written here, never in rules
    if cmd is _cmd.reset_reduce:
        init = np.full((p, 1), row1.identity, F32)
    elif cmd is _cmd.load_reduce:
        init = np.broadcast_to(column_f32(imm1, 2), (p, 1)).astype(F32)
    else:
        init = acc[:p].reshape(p, 1).copy()
    fast = ins.core.fast and row1.name != "subtract"
    if fast:
        ins.core.launch.count("cumulative_accumulate")
    out = _cumulative(row1, t, init, fast)
    acc[:p] = out[:, -1]
    write(dst, out)


def _cumulative(row1, t, init, fast):
    """reg = op1(t[:, i], reg) along the free dim from ``init`` (P, 1): the (P, F) fp32 results.
    ``fast``: add, multiply, maximum, minimum as one NumPy ``accumulate`` over (init, t...) (the
    same fp32 operations in the same order, the operands swapped: they commute)."""
    p, f = t.shape
    if fast:
        with np.errstate(all="ignore"):
            return row1.fn.accumulate(np.concatenate((init, t), axis=1), axis=1, dtype=F32)[:, 1:]
    tt = np.ascontiguousarray(t.T)
    out = np.empty((f, p), F32)
    r = init.reshape(p)
    fn = row1.fn
    with np.errstate(all="ignore"):
        for i in range(f):
            out[i] = fn(tt[i], r)
            r = out[i]
    return out.T


@instruction(reads=("src", "imm0", "imm1"), writes=("dst",), rules=_tsc_rules, compute=_tsc_compute)
def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=_cmd.reset_reduce, name=None):
    """t[i] = op0(src[i], imm0); reg = op1(t[i], reg); dst[i] = reg, per partition along the
    flattened free dims, in fp32; dst rounded once into its dtype.

    The running value ``reg`` is the VectorE accumulator (one fp32 value per partition, shared with
    ``tensor_scalar_reduce``, ``exponential``, ``select_reduce``, ``range_select``); after the call
    it holds the last result. ``reduce_cmd``: ``reset_reduce`` (default) starts it at the
    identity of op1 (0 add/subtract, 1 multiply, -inf maximum, +inf minimum), ``load_reduce`` at
    ``imm1``, ``reduce`` where the previous accumulating instruction left it; ``idle``/``reset``
    raise ArgumentError (Decision: the docs' pseudocode covers only those three). ``imm1`` is
    required with ``load_reduce`` and ignored otherwise (the docs' chained example passes it with
    ``reduce``). Decision: the order is the pseudocode's, ``op1(op0(src[i], imm0), reg)``, so
    ``subtract`` gives t[i] - reg; the signature has no ``reverse0`` (the pseudocode mentions one),
    so op0 takes src on the left.
    Ops: op0 a binary arithmetic operator (bitvec: DtypeError; unary: ArgumentError); op1 add,
    subtract, multiply, maximum or minimum (ArgumentError). Shapes: src, dst (P, F...) with the same
    P (<= pmax) and elements per partition; imm0, imm1 scalars or (P, 1) float32 tensors ("Must be
    FP32 datatype"). Dtypes: src, dst bfloat16, float16, float32, fp8, uint8, uint16, int8, int16
    ("INT32/UINT32 are not supported as input/output dtypes (ISA limitation)"). Buffers: SBUF or
    PSUM. Engine: Vector. Not simulated: ``.indirect()`` views (trn3).
    Speed: add, multiply, maximum, minimum run as one NumPy ``accumulate`` (bit-identical to the
    step-by-step loop but for a NaN's payload; fast path ``cumulative_accumulate``, off with
    ``NKISIM_FAST_PATHS=0``); subtract loops over the free dim.
    Raises: ArgumentError, DtypeError, ShapeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_scalar_cumulative).
    """


__all__ = ["tensor_tensor_scan", "tensor_scalar_cumulative"]
