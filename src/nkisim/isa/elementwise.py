"""Element-wise compute: ``tensor_tensor``, ``tensor_scalar``, ``scalar_tensor_tensor``,
``reciprocal``, ``exponential`` (VectorE, with the VectorE accumulator).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_tensor, tensor_scalar,
scalar_tensor_tensor, reciprocal, exponential) and nki/api/nki.api.shared.rst (ALU operators).
Imports memory, checks, alu, dispatch.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import ArgumentError, DtypeError, ShapeError, UnsupportedError
from ..memory.access import out_f32, read_f32, read_raw, write
from ..memory.buffers import psum
from ..memory.tensor import NkiTensor
from . import alu
from .activation import accumulator
from .copy import gpsimd_no_psum
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine, reduce_cmd as _cmd
from .operands import column_f32, pf

_EXACT_INT = (_dt.int32, _dt.uint32)
_EXACT_INT_OPS = frozenset(("add", "subtract", "multiply", "maximum", "minimum"))
_TT_ENGINES = (_engine.vector, _engine.gpsimd, _engine.unknown)


def _tt_rules(ins, dst, data1, data2, op, engine, name):
    """tensor_tensor's rules (see its docstring): the ALU row, and the engine that runs it."""
    opn, t = ins.op, ins.target
    row = alu.lookup_alu(op, opn, "op", t)
    _binary_op(opn, "op", row)
    eng = as_enum(_engine, engine, opn)
    if row.name == "power":
        rules.engine_in(opn, eng, (_engine.gpsimd, _engine.unknown), t, "for op power")
    elif row.kind == "bitvec":
        rules.engine_in(opn, eng, (_engine.vector, _engine.unknown), t, f"for bitvec op {row.name}")
    else:
        rules.engine_in(opn, eng, _TT_ENGINES, t)
    rules.tiles(opn, t, dst=dst, data1=data1, data2=data2)
    rules.same_tile(opn, "data1", data1, "data2", data2)
    rules.same_tile(opn, "data1", data1, "dst", dst)
    rules.not_both_psum(opn, "data1", data1, "data2", data2)
    if row.name == "power":
        eng = _engine.gpsimd
    gpsimd_no_psum(opn, eng, dst=dst, data1=data1, data2=data2)
    if row.kind == "bitvec":
        rules.int_dtype(opn, "data1", data1, f"bitvec op {row.name}")
        rules.int_dtype(opn, "data2", data2, f"bitvec op {row.name}")
        rules.int_dtype(opn, "dst", dst, f"bitvec op {row.name}")
    if eng is _engine.unknown:      # all-int32/uint32 tiles go to GpSimd unless one is in PSUM
        eng = _engine.gpsimd if (data1.dtype in _EXACT_INT and data2.dtype in _EXACT_INT and dst.dtype in
                                 _EXACT_INT and psum not in (dst.buffer, data1.buffer, data2.buffer)) \
            else _engine.vector
    return Passed(eng, row)


def _tt_compute(ins, dst, data1, data2, op, engine, name):
    row = ins.info
    shape = data1.shape
    if row.kind == "bitvec":
        a, b = read_raw(data1), read_raw(data2).reshape(shape)
        res = row.fn(a, b.astype(a.dtype))
    elif (ins.engine is _engine.gpsimd and data1.dtype in _EXACT_INT and data2.dtype in _EXACT_INT
          and row.name in _EXACT_INT_OPS):
        res = row.fn(read_raw(data1).astype(np.int64), read_raw(data2).astype(np.int64).reshape(shape))
        res = res.astype(data1.dtype)          # native 32-bit integer arithmetic wraps
    else:
        a, b = read_f32(data1), read_f32(data2)
        out = out_f32(dst) if isinstance(row.fn, np.ufunc) else None
        if out is not None:             # fp32 dst: compute straight into it (no rounding due)
            row.fn(a.reshape(out.shape), b.reshape(out.shape), out=out)
            return
        res = row.fn(a, b.reshape(shape))
    write(dst, res)


@instruction(reads=("data1", "data2"), writes=("dst",), rules=_tt_rules, compute=_tt_compute)
def tensor_tensor(dst, data1, data2, op, engine=_engine.unknown, name=None):
    """dst = op(data1, data2), element-wise.

    Shapes: data1, data2, dst have the same partition count (<= pmax) and elements per partition
    (no broadcasting; use tensor_scalar for a (P, 1) operand).
    Buffers: SBUF or PSUM; data1 and data2 not both in PSUM; GpSimd (``nl.power``) SBUF only.
    Engine: vector, gpsimd or unknown ("engine: ... vector, gpsimd or unknown"; scalar and the
    others raise EngineError); ``nl.power`` runs only on gpsimd; bitvec ops only on vector ("Vector
    Engine treats all input elements as bit patterns"). ``engine=unknown`` picks gpsimd for
    ``nl.power`` and when data1, data2 and dst are all int32/uint32 ("When all input/output tiles
    are int32 or uint32, the operation defaults to GpSimd Engine"; vector when any is in PSUM),
    else vector; the event names the engine picked.
    Operators: "any supported binary operator" (a unary one raises ArgumentError; Decision:
    ``nl.bypass`` passes data1); abs_max/abs_min need trn3 or newer ("Available only on
    NeuronCore-v4 (trn3) and newer", nl.abs_max; ``arch.alu_ops_excluded``), else UnsupportedError.
    Dtypes: arithmetic ops compute in fp32 and round once into dst.dtype. Bitvec ops (bitwise_*,
    shifts, invert) need integer data1, data2 and dst ("the input/output data types must be
    integer types", DtypeError) and work on bit patterns. Exact integer path: when both
    inputs are int32/uint32 and the op is add/subtract/multiply/maximum/minimum, the GpSimd engine
    computes exactly (engine gpsimd, or unknown with an int32/uint32 dst and no operand in PSUM:
    "the automatic GpSimd dispatch for int32/uint32 falls back to Vector Engine when any operand
    resides in PSUM"; vector goes through fp32) in native 32-bit arithmetic, which wraps modulo 2**32
    (Decision: the docs say "native integer arithmetic"); the result then converts to dst.dtype
    like any value (saturating into a narrower integer dtype).
    Raises: ShapeError, MemorySpaceError, DtypeError, EngineError, ArgumentError (unknown or unary
    op), UnsupportedError (op not on this target).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_tensor), nki/api/nki.api.shared.rst
    (ALU operators), nki/api/nki/language/__init__.py (abs_max, abs_min).
    """


def _apply(row, x, operand, reverse):
    if row.unary:
        return row.fn(x)
    return row.fn(operand, x) if reverse else row.fn(x, operand)


def _ts_rules(ins, dst, data, op0, operand0, reverse0, op1, operand1, reverse1, engine, name):
    """tensor_scalar's rules (see its docstring): the ALU rows (op0, op1 or None) and the engine."""
    opn, t = ins.op, ins.target
    row0 = alu.lookup_alu(op0, opn, "op0", t)
    row1 = alu.lookup_alu(op1, opn, "op1", t) if op1 is not None else None
    _unary_operand(opn, "op0", row0, "operand0", operand0)
    if row1 is None:
        if operand1 is not None:
            raise ArgumentError(opn, f"operand1 must be None when op1 is None (unused), got "
                                     f"{_shown(operand1)}")
    else:
        _unary_operand(opn, "op1", row1, "operand1", operand1)
    eng = as_enum(_engine, engine, opn)
    rules.tiles(opn, t, dst=dst, data=data)
    rules.same_tile(opn, "data", data, "dst", dst)
    p = data.shape[0]
    rules.column(opn, "operand0", operand0, p, t)
    if row1 is not None:
        rules.column(opn, "operand1", operand1, p, t)
    gpsimd_no_psum(opn, eng, dst=dst, data=data)
    bitvec = row0.kind == "bitvec"
    if row1 is not None and (row1.kind == "bitvec") != bitvec:
        raise DtypeError(opn, f"op0 {row0.name} and op1 {row1.name} must both be bitvec or both arithmetic")
    _tensor_scalar_engine(opn, eng, row0, row1, t)
    if not bitvec:
        if isinstance(operand0, NkiTensor):
            rules.float32_operand(opn, "operand0", operand0, f"for arithmetic op0 {row0.name}")
        if row1 is not None and isinstance(operand1, NkiTensor):
            rules.float32_operand(opn, "operand1", operand1, f"for arithmetic op1 {row1.name}")
    else:
        what = f"bitvec op {row0.name}"
        rules.int_dtype(opn, "data", data, what)
        rules.int_dtype(opn, "dst", dst, what)
        for nm, v in (("operand0", operand0), ("operand1", operand1)):
            if isinstance(v, NkiTensor):
                rules.int_dtype(opn, nm, v, what)
            elif isinstance(v, (float, np.floating)):
                raise DtypeError(opn, f"{nm} {v!r} is a float; bitvec op {row0.name} needs an integer "
                                      f"scalar or tile")
    return Passed(_engine.vector if eng is _engine.unknown else eng, (row0, row1))


def _shown(v):
    """An operand as an error message shows it."""
    return f"a tensor of shape {v.shape}" if isinstance(v, NkiTensor) else repr(v)


def _unary_operand(opn, what, row, param, v):
    """A unary operator takes no operand: ``param`` must be None or 0 (docs: operand0 "Must be None
    or 0 when op0 is a unary operator"; Decision: the same for operand1 with a unary op1)."""
    if row.unary and not (v is None or (not isinstance(v, NkiTensor) and np.ndim(v) == 0 and v == 0)):
        raise ArgumentError(opn, f"{param} must be None or 0 when {what} {row.name} is a unary operator, "
                                 f"got {_shown(v)}")


def _binary_op(opn, what, row):
    """tensor_tensor takes "any supported binary operator" (Decision: nl.bypass, which passes its
    first input, too)."""
    if row.unary and row.name != "bypass":
        raise ArgumentError(opn, f"{what} {row.name} is a unary operator; a binary operator is required")


def _ts_compute(ins, dst, data, op0, operand0, reverse0, op1, operand1, reverse1, engine, name):
    row0, row1 = ins.info
    if row0.kind == "bitvec":
        x = read_raw(data)
        o0 = _int_operand(operand0, x)
        x = _apply(row0, x, o0, reverse0)
        if row1 is not None:
            x = _apply(row1, x, _int_operand(operand1, x), reverse1)
    else:
        x = read_f32(data)
        o0 = column_f32(operand0, x.ndim)
        o1 = column_f32(operand1, x.ndim) if row1 is not None else None
        out = out_f32(dst) if _ufuncs(row0, row1) else None
        if out is not None:             # fp32 dst: compute straight into it (no rounding due)
            x = x.reshape(out.shape)
            o0 = o0.reshape((o0.shape[0],) + (1,) * (out.ndim - 1)) if np.ndim(o0) else o0
            _apply_out(row0, x, o0, reverse0, out)
            if row1 is not None:
                o1 = o1.reshape((o1.shape[0],) + (1,) * (out.ndim - 1)) if np.ndim(o1) else o1
                _apply_out(row1, out, o1, reverse1, out)
            return
        x = _apply(row0, x, o0, reverse0)
        if row1 is not None:
            x = _apply(row1, x, o1, reverse1)
    write(dst, x)


@instruction(reads=("data", "operand0", "operand1"), writes=("dst",), rules=_ts_rules,
             compute=_ts_compute)
def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=_engine.unknown, name=None):
    """dst = (data op0 operand0) op1 operand1; operands broadcast along the free dims.

    ``reverse0`` computes ``operand0 op0 data``; ``reverse1`` likewise for op1. A unary op0/op1
    (abs, square, relu, rsqrt, reciprocal, ...) takes no operand: operand0 "Must be None or 0 when
    op0 is a unary operator" (Decision: operand1 likewise for a unary op1), else ArgumentError.
    "op1 and operand1 are optional, but must be None (default values) when unused": operand1
    with op1=None raises ArgumentError. abs_max/abs_min need trn3 or newer (UnsupportedError).
    Shapes: data, dst (P, F...), P <= pmax, same elements per partition; operand0/1 a scalar or a
    (P, 1) tensor. Dtypes: arithmetic in fp32, rounded once into dst.dtype; with arithmetic ops a
    tensor operand0 (and operand1 when op1 is given) must be float32 ("the operand0 and operand1
    (if used) must be float32"); bitvec ops (both ops bitvec) on integer bit patterns: data and
    dst integer ("the input/output data types must be integer types"), and Decision: a tensor
    operand integer too, a scalar operand not a Python/NumPy float (DtypeError).
    Engine ("vector, scalar, gpsimd (only allowed for rsqrt) or unknown"): bitvec ops only on
    vector ("must run on Vector Engine"); gpsimd only when every operator given is rsqrt
    (Decision: op1 None or rsqrt); scalar only for the (op0, op1) pairs of
    ``arch.act_tensor_scalar_ops`` (op1 None = one operator; ``nl.bypass`` as op1 counts as None):
    on trn2 (multiply, add), (multiply, None), (add, None) ("The Scalar Engine on trn2 only
    supports some operator combinations"). Decision: the docs name trn2 only; trn1 takes the trn2
    list, trn3 the six tensor-scalar pairs its Scalar engine runs in ``activate2`` (adding
    (multiply, subtract), (subtract, None), (bypass, None)). Decision: engine=unknown runs on
    vector (the docs: "let compiler select best engine based on the input tile shape"; vector
    takes every operator pair); the event names the engine that ran it.
    Buffers: SBUF or PSUM (GpSimd: SBUF only).
    Raises: ShapeError, MemorySpaceError, DtypeError, EngineError, ArgumentError (unknown op,
    operand of a unary or unused op), UnsupportedError (op not on this target).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_scalar, activate2).
    """


def _tensor_scalar_engine(opn, eng, row0, row1, t):
    """The engine rules of tensor_scalar (see its docstring)."""
    if eng is _engine.unknown or eng is _engine.vector:       # always legal: the common case
        return
    if row0.kind == "bitvec":
        rules.engine_in(opn, eng, (_engine.vector, _engine.unknown), t, f"for bitvec op0 {row0.name}")
        return
    names = (row0.name, None if row1 is None or row1.name == "bypass" else row1.name)
    allowed = [_engine.vector]
    if names in t.act_tensor_scalar_ops:
        allowed.append(_engine.scalar)
    if all(n in (None, "rsqrt") for n in names):
        allowed.append(_engine.gpsimd)
    rules.engine_in(opn, eng, tuple(allowed) + (_engine.unknown,), t, f"for op0 {names[0]}, op1 {names[1]}")


def _ufuncs(*rows) -> bool:
    return all(r is None or (isinstance(r.fn, np.ufunc) and not r.unary) for r in rows)


def _apply_out(row, x, operand, reverse, out):
    if reverse:
        row.fn(operand, x, out=out)
    else:
        row.fn(x, operand, out=out)


def _int_operand(v, x):
    if isinstance(v, NkiTensor):
        a = read_raw(v)
        return a.reshape((a.shape[0],) + (1,) * (x.ndim - 1)).astype(x.dtype)
    return np.asarray(0 if v is None else v).astype(x.dtype)


def _arith(opn, what, row, binary=False):
    if row.kind == "bitvec":
        raise DtypeError(opn, f"{what} {row.name} is a bitvec operator; only arithmetic operators are supported")
    if binary and row.unary:
        raise ShapeError(opn, f"{what} {row.name} is a unary operator; a binary operator is required")


def _stt_rules(ins, dst, data, op0, operand0, op1, operand1, reverse0, reverse1, name):
    """scalar_tensor_tensor's rules (see its docstring): the ALU rows (op0, op1)."""
    opn, t = ins.op, ins.target
    row0 = alu.lookup_alu(op0, opn, "op0", t)
    row1 = alu.lookup_alu(op1, opn, "op1", t)
    _arith(opn, "op0", row0)
    _arith(opn, "op1", row1, binary=True)
    rules.tiles(opn, t, dst=dst, data=data, operand1=operand1)
    rules.same_tile(opn, "data", data, "operand1", operand1)
    rules.same_tile(opn, "data", data, "dst", dst)
    rules.not_both_psum(opn, "data", data, "operand1", operand1)
    rules.column(opn, "operand0", operand0, data.shape[0], t)
    return Passed(_engine.vector, (row0, row1))


def _stt_compute(ins, dst, data, op0, operand0, op1, operand1, reverse0, reverse1, name):
    row0, row1 = ins.info
    x = read_f32(data)
    x = _apply(row0, x, column_f32(operand0, x.ndim), reverse0)
    y = read_f32(operand1).reshape(x.shape)
    res = row1.fn(y, x) if reverse1 else row1.fn(x, y)
    write(dst, res)


@instruction(reads=("data", "operand0", "operand1"), writes=("dst",), rules=_stt_rules,
             compute=_stt_compute)
def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         name=None):
    """dst = (data op0 operand0) op1 operand1; operand0 broadcasts along the free dims, operand1 is
    element-wise.

    ``reverse0`` computes ``operand0 op0 data``; ``reverse1`` computes ``operand1 op1 tmp``.
    A unary op0 (abs, square, ...) ignores operand0; op1 must be binary.
    Shapes: data, operand1, dst (P, F...), P <= pmax, same elements per partition; operand0 a
    scalar or a (P, 1) tensor. Dtypes: any, operand0 included ("All input tiles can be any
    supported NKI data type"; unlike tensor_scalar, no float32 rule); arithmetic operators only,
    math in fp32, rounded once into dst.dtype. Buffers: SBUF or PSUM; data and operand1 not both
    in PSUM. Engine: Vector. abs_max/abs_min need trn3 or newer (UnsupportedError).
    Raises: ShapeError (also a unary op1), MemorySpaceError, DtypeError (bitvec op), NkiError
    (unknown op), UnsupportedError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (scalar_tensor_tensor).
    """


def _recip_rules(ins, dst, data, name):
    """reciprocal's rules (see its docstring)."""
    opn, t = ins.op, ins.target
    rules.tiles(opn, t, dst=dst, data=data)
    rules.same_tile(opn, "data", data, "dst", dst)
    return Passed(_engine.vector)


def _recip_compute(ins, dst, data, name):
    write(dst, alu.ALU["reciprocal"].fn(read_f32(data)))


@instruction(reads=("data",), writes=("dst",), rules=_recip_rules, compute=_recip_compute)
def reciprocal(dst, data, name=None):
    """dst = 1.0 / data, element-wise, in fp32 on the Vector engine.

    Shapes: data, dst (P, F...), P <= pmax, same elements per partition. Dtypes: any; rounded once
    into dst.dtype (1/0 gives inf). Buffers: SBUF or PSUM.
    Raises: ShapeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (reciprocal).
    """


_EXP_DST = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "tfloat32", "int8",
            "int16", "int32", "uint8", "uint16")
_EXP_SRC = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "int8", "int16",
            "int32", "uint8", "uint16", "uint32")
_EXP_RES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "tfloat32")
_EXP_CMDS = (_cmd.idle, _cmd.reset_reduce, _cmd.reduce, _cmd.load_reduce)


def _exp_rules(ins, dst, src, max_value, reduce_res, reduce_cmd, reduce_init, name):
    """exponential's rules (see its docstring): the reduce_cmd."""
    opn, t = ins.op, ins.target
    if t.nc_version < 4:
        raise UnsupportedError(opn, f"needs trn3 or newer, not supported on {t.name}")
    cmd = as_enum(_cmd, reduce_cmd, opn)
    if cmd not in _EXP_CMDS:
        raise UnsupportedError(opn, f"reduce_cmd {cmd.name} is not supported; expected one of "
                                    f"{', '.join(c.name for c in _EXP_CMDS)}")
    rules.tiles(opn, t, dst=dst, src=src)
    rules.same_tile(opn, "src", src, "dst", dst)
    for nm, x in (("src", src), ("dst", dst)):
        if x.ndim > 4:
            raise ShapeError(opn, f"{nm} has {x.ndim} dims {x.shape}, exceeds 4")
    rules.dtype_in(opn, "dst", dst, _EXP_DST, t)
    rules.dtype_in(opn, "src", src, _EXP_SRC, t)
    p = src.shape[0]
    rules.column(opn, "max_value", max_value, p, t)
    rules.column(opn, "reduce_init", reduce_init, p, t)
    rules.float32_operand(opn, "max_value", max_value)
    rules.float32_operand(opn, "reduce_init", reduce_init)
    if cmd is not _cmd.load_reduce and (isinstance(reduce_init, NkiTensor) or reduce_init not in (None, 0)):
        raise ShapeError(opn, f"reduce_init {reduce_init!r} must be unset or 0.0 unless reduce_cmd is "
                              f"load_reduce, got reduce_cmd {cmd.name}")
    if reduce_res is not None:
        rules.tiles(opn, t, reduce_res=reduce_res)
        rules.column(opn, "reduce_res", reduce_res, p, t)
        rules.dtype_in(opn, "reduce_res", reduce_res, _EXP_RES, t)
    return Passed(_engine.vector, cmd)


def _exp_compute(ins, dst, src, max_value, reduce_res, reduce_cmd, reduce_init, name):
    """exp into dst; the VectorE accumulator (core state) per reduce_cmd."""
    cmd = ins.info
    p = src.shape[0]
    x = read_f32(src)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.exp(x - column_f32(max_value, x.ndim))
    acc = accumulator(ins.core, "vec", p)
    if cmd is _cmd.reset_reduce:
        acc[:p] = 0
    elif cmd is _cmd.load_reduce:
        acc[:p] = column_f32(reduce_init, 2).reshape(-1) if isinstance(reduce_init, NkiTensor) \
            else np.float32(0 if reduce_init is None else reduce_init)
    if cmd is not _cmd.idle:
        acc[:p] += pf(y).sum(axis=1, dtype=np.float32)
    reduced = acc[:p].copy()
    write(dst, y)
    if reduce_res is not None:
        write(reduce_res, reduced.reshape(p, 1))


@instruction(reads=("src", "max_value", "reduce_init"), writes=("dst", "reduce_res"), rules=_exp_rules,
             compute=_exp_compute)
def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=_cmd.idle, reduce_init=0.0,
                name=None):
    """dst = exp(src - max_value); optionally acc = (0 | acc | reduce_init) + sum over free dims.

    ``reduce_cmd``: ``reset_reduce`` starts the VectorE accumulator at 0, ``reduce`` keeps it,
    ``load_reduce`` starts it at ``reduce_init``; each then adds the free-dim sum of this result
    (Decision: the fp32 values before rounding into dst.dtype, as for ``activation``). ``idle``
    leaves the accumulator alone. ``reduce_res`` (P, 1) then receives the accumulator (Decision:
    also with ``idle``, when the docs call its state undefined).
    Shapes: src, dst up to 4-D, same P (<= pmax) and elements per partition; ``max_value`` and
    ``reduce_init`` a scalar or a (P, 1) tensor. Dtypes: dst fp8/fp16/bf16/fp32/tf32/int8/16/32/
    uint8/16; src the same without tf32, plus uint32; reduce_res fp8/fp16/bf16/fp32/tf32; a tensor
    ``max_value`` or ``reduce_init`` float32 ("Supported dtypes: float32").
    Buffers: SBUF or PSUM. Engine: Vector, trn3 (NeuronCore-v4) and newer only.
    Raises: UnsupportedError (target, reduce_cmd.reset), ShapeError (also reduce_init without
    load_reduce), DtypeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (exponential).
    """


__all__ = ["tensor_tensor", "tensor_scalar", "scalar_tensor_tensor", "reciprocal", "exponential"]
