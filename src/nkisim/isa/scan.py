"""Scans: ``tensor_tensor_scan`` (a per-partition recurrence along the free dim, VectorE).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_tensor_scan). Imports memory, checks,
alu, dispatch (the op is an ``@instruction`` spec: static rules, compute).
"""
from __future__ import annotations

import numpy as np

from ..checks import rules
from ..errors import ArgumentError, DtypeError
from ..memory.access import read_f32, write
from . import alu
from .dispatch import Passed, instruction
from .enums import engine as _engine
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


__all__ = ["tensor_tensor_scan"]
