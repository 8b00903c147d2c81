"""Scalar Engine activations: ``activation`` and ``activation_reduce`` (op(data * scale + bias)
with an optional free-dim reduction into the per-partition ScalarE accumulator), and ``activate2``
(two tensor-scalar operations, then the function, then the optional reduction).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (activation, activation_reduce, activate2,
reduce_cmd) and nki/api/nki.api.shared.rst (activation functions). Imports memory, checks, alu,
dispatch.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import ArgumentError, DtypeError, UnsupportedError
from ..memory.access import read_f32, write
from ..memory.tensor import NkiTensor
from . import alu
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine, reduce_cmd as _cmd
from .operands import column_f32, pf

F32 = np.float32


def accumulator(core, which: str, p: int) -> np.ndarray:
    """The per-partition fp32 accumulator of an engine (``act`` ScalarE, ``vec`` VectorE)."""
    attr = f"{which}_acc"
    acc = getattr(core, attr)
    if acc is None:
        acc = np.zeros(core.target.pmax, F32)
        setattr(core, attr, acc)
    return acc


def _act_rules(ins, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd, name, engine):
    """activation's rules (see its docstring): (function, reduce row, reduce_cmd)."""
    opn, t = ins.op, ins.target
    rules.engine_in(opn, as_enum(_engine, engine, opn), (_engine.scalar, _engine.unknown), t)
    if reduce_op is not None and alu.op_name(reduce_op, opn, "reduce_op") != "add":
        raise UnsupportedError(opn, f"reduce_op must be nl.add, got {alu.op_name(reduce_op)}")
    cmd = as_enum(_cmd, reduce_cmd, opn)
    return _activate_rules(opn, t, dst, op, data, bias, scale, alu.ALU["add"], reduce_res, cmd)


def _act_compute(ins, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd, name, engine):
    _activate(ins, dst, data, bias, scale, reduce_res)


@instruction(reads=("data", "bias", "scale"), writes=("dst", "reduce_res"), rules=_act_rules,
             compute=_act_compute)
def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=_cmd.idle, name=None, *, engine=_engine.unknown):
    """dst = op(data * scale + bias); optionally acc = sum over free dims of the fp32 result.

    Shapes: data, dst (P, F...) with equal P (<= pmax) and elements per partition; ``scale`` a
    scalar or (P, 1) tensor; ``bias`` a (P, 1) tensor or (trn2+) a scalar; ``reduce_res`` (P, 1).
    Dtypes: data, dst any; math in fp32, rounded once into dst.dtype. A tensor ``scale`` must be
    float32 and a tensor ``bias`` any dtype but tfloat32 ("The scale parameter must have a float32
    data type, while the bias parameter can be any supported dtype except tfloat32"); scalars are
    fp32 immediates. Buffers: SBUF or PSUM.
    ``reduce_cmd``: reset/reset_reduce zero the ScalarE accumulator; reduce/reset_reduce add the
    free-dim sum of this result (Decision: the fp32 values before rounding); ``reduce_res`` then
    receives the accumulator. ``reduce_op`` must be ``nl.add``. Decision: ``reduce_res`` may alias
    (part of) ``dst``; it is written after ``dst``, so the reduction wins where they overlap.
    Engine: Scalar only ("using Scalar Engine"). Decision: the docs list no ``engine`` parameter;
    nkisim takes a keyword-only ``engine=`` (kernels pass ``engine=nisa.scalar_engine``), which
    must be scalar or unknown, anything else raises EngineError; the event's engine is scalar.
    Functions: ``isa.alu.ACT`` (fp32 of the exact function, e.g. erf and the gelu family accurate
    in relative terms in their tails). ``op=nl.sin`` has no range reduction ("the Scalar Engine
    performs no argument range reduction or clamping ... sin(9.0) returns ~27.65"): outside
    [-pi, pi] it extrapolates a cubic (see ``isa.alu._sin``; nl.sin reduces the range first).
    ``op=nl.reciprocal`` takes no bias on trn1 ("doesn't support setting bias on NeuronCore-v2",
    ``arch.act_reciprocal_bias``): UnsupportedError.
    Raises: ShapeError, MemorySpaceError, DtypeError, EngineError, NkiError (unknown function),
    UnsupportedError (reduce_op not nl.add, scalar bias on trn1, reciprocal with a bias on trn1).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (activation), nki/api/nki.api.shared.rst
    (activation functions and the note on sin; engine selection: reciprocal).
    """


def _act_reduce_rules(ins, dst, op, data, reduce_op, reduce_res, bias, scale, name):
    """activation_reduce's rules (see its docstring): (function, reduce row, reset_reduce)."""
    opn, t = ins.op, ins.target
    row = alu.lookup_alu(reduce_op, opn, "reduce_op", t)
    if row.name not in t.act_reduce_ops:
        raise UnsupportedError(opn, f"reduce_op {row.name} is not supported on {t.name}; expected one of "
                                    f"{', '.join(t.act_reduce_ops)}")
    rules.tensor(opn, "reduce_res", reduce_res)
    return _activate_rules(opn, t, dst, op, data, bias, scale, row, reduce_res, _cmd.reset_reduce)


def _act_reduce_compute(ins, dst, op, data, reduce_op, reduce_res, bias, scale, name):
    _activate(ins, dst, data, bias, scale, reduce_res)


@instruction(reads=("data", "bias", "scale"), writes=("dst", "reduce_res"), rules=_act_reduce_rules,
             compute=_act_reduce_compute)
def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """dst = op(data * scale + bias); reduce_res = reduce_op over all free dims of the fp32 result.

    Same as ``activation(..., reduce_cmd=reset_reduce, reduce_res=reduce_res)``: the ScalarE
    accumulator is reset to the identity of ``reduce_op``, takes this reduction, and is read out
    into ``reduce_res`` (P, 1). ``reduce_op``: ``nl.add`` only on trn1; Decision: ``nl.add``,
    ``nl.maximum``/``nl.max``, ``nl.minimum``/``nl.min`` on trn2 and newer (``arch.act_reduce_ops``;
    the docs only say trn1 is add-only). Shapes, dtypes and buffers as ``activation``.
    Raises: ShapeError, MemorySpaceError, NkiError (unknown function), UnsupportedError (reduce_op
    not on this target).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (activation_reduce).
    """


def _activate_rules(opn, t, dst, op, data, bias, scale, reduce_row, reduce_res, cmd):
    """The rules activation and activation_reduce share; Passed(scalar, (function, reduce row,
    reduce_cmd))."""
    fn = alu.lookup_act(op, opn, "op")
    if bias is not None and fn is alu.ACT["reciprocal"] and not t.act_reciprocal_bias:
        raise UnsupportedError(opn, f"op reciprocal does not support a bias on {t.name} (NeuronCore-v2)")
    rules.tiles(opn, t, dst=dst, data=data)
    rules.same_tile(opn, "data", data, "dst", dst)
    p = data.shape[0]
    rules.column(opn, "scale", scale, p, t)
    rules.float32_operand(opn, "scale", scale)
    if bias is not None:
        if not isinstance(bias, NkiTensor) and t.nc_version < 3:
            raise UnsupportedError(opn, f"a scalar bias needs trn2 or newer; on {t.name} pass a ({p}, 1) tensor")
        rules.column(opn, "bias", bias, p, t)
        if isinstance(bias, NkiTensor) and bias.dtype == _dt.tfloat32:
            raise DtypeError(opn, "bias dtype tfloat32 is not supported; any dtype but tfloat32")
    if reduce_res is not None:
        rules.tensor(opn, "reduce_res", reduce_res)
        rules.column(opn, "reduce_res", reduce_res, p, t)
    return Passed(_engine.scalar, (fn, reduce_row, cmd))


def _activate(ins, dst, data, bias, scale, reduce_res):
    """op(data * scale + bias) into dst, and the ScalarE accumulator (core state) per reduce_cmd."""
    fn, reduce_row, cmd = ins.info
    p = data.shape[0]
    x = read_f32(data)
    s = column_f32(scale, x.ndim)
    y = x * s if not (isinstance(s, F32) and s == 1) else x
    if bias is not None:
        y = y + column_f32(bias, x.ndim)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        y = np.asarray(fn(y.astype(F32, copy=False)), F32)
    acc = accumulator(ins.core, "act", p)
    if cmd in (_cmd.reset, _cmd.reset_reduce):
        acc[:p] = reduce_row.identity
    if cmd in (_cmd.reduce, _cmd.reset_reduce, _cmd.load_reduce):
        part = reduce_row.fn.reduce(pf(y), axis=1, dtype=F32) if y.size else F32(reduce_row.identity)
        acc[:p] = reduce_row.fn(acc[:p], part)
    reduced = acc[:p].copy()
    write(dst, y)
    if reduce_res is not None:
        write(reduce_res, reduced.reshape(p, 1))


# ---- activate2 -------------------------------------------------------------------------------------

_A2_REDUCE_OPS = ("add", "maximum", "minimum", "abs_max", "abs_min")   # "Supported: nl.add, ..."


def _a2_function(op, opn):
    """The activation function of activate2: ``alu.ACT``, or "prelu" (it reads relu_param)."""
    return "prelu" if alu.op_name(op, opn, "op") == "prelu" else alu.lookup_act(op, opn, "op")


def _a2_rules(ins, dst, op, data, imm0, imm1, op0, op1, relu_param, reverse0, reverse1, reduce_op,
              reduce_res, reduce_cmd, name):
    """activate2's rules (see its docstring): Passed(scalar, (function, op0 row, op1 row, reduce
    row, reduce_cmd)); a bypass row is None."""
    opn, t = ins.op, ins.target
    if t.nc_version < 4:
        raise UnsupportedError(opn, f"needs trn3 or newer, not supported on {t.name}")
    fn = _a2_function(op, opn)
    rows = [None if o is None else alu.lookup_alu(o, opn, what, t) for what, o in (("op0", op0), ("op1", op1))]
    n0, n1 = ("bypass" if r is None else r.name for r in rows)
    if n0 == "bypass" and n1 != "bypass":
        raise ArgumentError(opn, f"op1 {n1} requires op0 to be set; op0 is bypass")
    for what, rev, n in (("reverse0", reverse0, n0), ("reverse1", reverse1, n1)):
        if rev and n == "bypass":
            raise ArgumentError(opn, f"{what} requires op{what[-1]} to be set; op{what[-1]} is bypass")
    if (n0, None if n1 == "bypass" else n1) not in t.act_tensor_scalar_ops:
        pairs = ", ".join(f"({a}, {b or 'bypass'})" for a, b in t.act_tensor_scalar_ops)
        raise ArgumentError(opn, f"(op0, op1) ({n0}, {n1}) is not supported; expected one of {pairs}")
    rules.tiles(opn, t, dst=dst, data=data)
    rules.same_tile(opn, "data", data, "dst", dst)
    p = data.shape[0]
    for what, v in (("imm0", imm0), ("imm1", imm1), ("relu_param", relu_param)):
        rules.column(opn, what, v, p, t)
    if isinstance(imm0, NkiTensor) and isinstance(imm1, NkiTensor) and imm0.dtype != imm1.dtype:
        raise DtypeError(opn, f"imm1 dtype {_dt.name(imm1.dtype)} does not match imm0 dtype "
                              f"{_dt.name(imm0.dtype)}; tensor immediates must have the same dtype")
    cmd = as_enum(_cmd, reduce_cmd, opn)
    if cmd is _cmd.load_reduce:
        raise UnsupportedError(opn, "reduce_cmd=load_reduce is not supported (no initial value)")
    reduce_row = None
    if reduce_op is not None:
        reduce_row = alu.lookup_alu(reduce_op, opn, "reduce_op", t)
        if reduce_row.name not in _A2_REDUCE_OPS:
            raise ArgumentError(opn, f"reduce_op {reduce_row.name} is not supported; expected one of "
                                     f"{', '.join(_A2_REDUCE_OPS)}")
    elif cmd is not _cmd.idle:
        raise ArgumentError(opn, f"reduce_cmd {cmd.name} needs a reduce_op")
    if reduce_res is not None:
        rules.tensor(opn, "reduce_res", reduce_res)
        rules.column(opn, "reduce_res", reduce_res, p, t)
    bypass = (lambda r: None if r is None or r.name == "bypass" else r)
    return Passed(_engine.scalar, (fn, bypass(rows[0]), bypass(rows[1]), reduce_row, cmd))


def _a2_compute(ins, dst, op, data, imm0, imm1, op0, op1, relu_param, reverse0, reverse1, reduce_op,
                reduce_res, reduce_cmd, name):
    fn, row0, row1, reduce_row, cmd = ins.info
    p = data.shape[0]
    y = read_f32(data)
    nd = y.ndim
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for row, imm, rev in ((row0, imm0, reverse0), (row1, imm1, reverse1)):
            if row is not None:
                a = column_f32(imm, nd)
                y = np.asarray(row.fn(a, y) if rev else row.fn(y, a), F32)
        if fn == "prelu":
            y = np.where(y < 0, column_f32(relu_param, nd) * y, y).astype(F32, copy=False)
        else:
            y = np.asarray(fn(y.astype(F32, copy=False)), F32)
    acc = accumulator(ins.core, "act", p)
    if cmd in (_cmd.reset, _cmd.reset_reduce):
        acc[:p] = reduce_row.identity
    if cmd in (_cmd.reduce, _cmd.reset_reduce) and y.size:
        acc[:p] = _reduce_sequential(reduce_row, acc[:p], pf(y))
    reduced = acc[:p].copy()
    write(dst, y)
    if reduce_res is not None:
        write(reduce_res, reduced.reshape(p, 1))


def _reduce_sequential(row, acc, y):
    """acc = row(acc, y[:, i]) for each i in order (the docs' loop), per partition, in fp32."""
    if row.name == "add":       # np.add.accumulate adds left to right (np.add.reduce is pairwise)
        return np.add.accumulate(np.concatenate((acc.reshape(-1, 1), y), axis=1), axis=1, dtype=F32)[:, -1]
    if row.name in ("maximum", "minimum"):      # exact and order-free
        return row.fn(acc, row.fn.reduce(y, axis=1))
    r = acc
    for i in range(y.shape[1]):
        r = row.fn(r, y[:, i])
    return r


@instruction(reads=("data", "imm0", "imm1", "relu_param"), writes=("dst", "reduce_res"), rules=_a2_rules,
             compute=_a2_compute)
def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False, reverse1=False,
              reduce_op=None, reduce_res=None, reduce_cmd=_cmd.idle, name=None):
    """dst = op((data op0 imm0) op1 imm1); optionally acc = reduce_op(acc, each fp32 result).

    Stage 1: ``op0``/``op1`` one of the six documented pairs (multiply, add), (multiply,
    subtract), (multiply, bypass), (add, bypass), (subtract, bypass), (bypass, bypass)
    (``arch.act_tensor_scalar_ops``; ``None`` counts as bypass); ``reverse0`` computes
    ``imm0 op0 data``, ``reverse1`` ``imm1 op1 t``; "op1 requires op0 to be set", "reverse0
    requires op0 to be set; reverse1 requires op1 to be set" (ArgumentError). Stage 2: ``op`` any
    function of ``isa.alu.ACT`` (as ``activation``, sin without range reduction included) or
    ``nl.prelu``: x for x >= 0, relu_param * x below (Decision: the docs name relu_param "for
    parameterized activation functions (e.g., PReLU)"; only prelu reads it). Stage 3: the
    ScalarE accumulator (one fp32 value per partition, shared with ``activation``): ``reset`` and
    ``reset_reduce`` set it to the identity of ``reduce_op``; ``reduce`` and ``reset_reduce`` fold
    in each result of this call in element order (``accumulator = reduce_op(accumulator,
    dst[i])``; Decision: the fp32 results, before rounding into dst, as ``activation``); ``idle``
    leaves it. ``reduce_op``: add, maximum, minimum, abs_max, abs_min; a reducing ``reduce_cmd``
    without one, or ``load_reduce`` (not documented here), raises. ``reduce_res`` (P, 1), when
    given, receives the accumulator (Decision: one instruction; the docs say "an additional
    instruction is emitted").
    Shapes: data, dst (P, F...) same P (<= pmax) and elements per partition; imm0, imm1,
    relu_param scalars or (P, 1) tensors. Dtypes: any; math in fp32, rounded once into dst.dtype;
    tensor imm0 and imm1 of the same dtype. Buffers: SBUF or PSUM. Engine: Scalar, trn3 and newer
    ("Available only on NeuronCore-v4 and newer"; UnsupportedError elsewhere).
    Not simulated: ``.indirect()`` views for dst/data (raise as for any other op).
    Raises: UnsupportedError, ArgumentError, ShapeError, MemorySpaceError, DtypeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (activate2), nki/api/nki.api.shared.rst
    (activation functions).
    """


__all__ = ["activation", "activation_reduce", "activate2", "accumulator"]
