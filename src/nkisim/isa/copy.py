"""On-chip copies and fills: ``tensor_copy``, ``tensor_copy_predicated``, ``memset``, ``iota``
(and ``affine_values``, the iota/affine_select pattern generator).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_copy, tensor_copy_predicated, memset,
iota). Imports memory, checks, dispatch.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import DtypeError, MemorySpaceError, ShapeError
from ..memory.access import copy_deferred, dynamic_index, read_f32, read_raw, write
from ..memory.buffers import psum
from ..memory.tensor import NkiTensor
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine


_COPY_ENGINES = (_engine.vector, _engine.scalar, _engine.gpsimd, _engine.unknown)
_COPY_ENGINES_NO_ACT = (_engine.vector, _engine.gpsimd, _engine.unknown)
_MEMSET_ENGINES = (_engine.vector, _engine.gpsimd, _engine.unknown)


def gpsimd_no_psum(op, engine, **operands):
    """GpSimd cannot reach PSUM."""
    if engine is _engine.gpsimd:
        for name, t in operands.items():
            if t is not None and getattr(t, "buffer", None) is psum:
                raise MemorySpaceError(op, f"{name} is in psum, which the gpsimd engine cannot access")


def _copy_rules(ins, dst, src, engine, name, dtype):
    """tensor_copy's rules (see its docstring): the engine that runs it."""
    eng = _check_copy(ins.op, ins.target, dst, src, engine)
    return Passed(_engine.vector if eng is _engine.unknown else eng)


def _copy_compute(ins, dst, src, engine, name, dtype):
    if not copy_deferred(dst, src):
        write(dst, read_raw(src) if src.dtype == dst.dtype else read_f32(src))


@instruction(reads=("src",), writes=("dst",), rules=_copy_rules, compute=_copy_compute)
def tensor_copy(dst, src, engine=_engine.unknown, name=None, dtype=None):
    """dst = src on the Vector, Scalar or GpSimd engine.

    Shapes: same partition count (<= pmax) and elements per partition; free shapes may differ.
    Buffers: SBUF or PSUM (GpSimd: SBUF only). Dtypes: same dtype copies bits exactly, otherwise
    via fp32, rounded once into dst.dtype. ``dtype=`` (seen in old tutorials) is ignored.
    Engine: vector, scalar, gpsimd or unknown (tensor, dma, sync raise EngineError). Decision: the
    docs both describe the NeuronCore-v2 Scalar engine copy ("performs copy by first casting the
    input tile to FP32") and say "On NeuronCore v2, tensor_copy is not supported on the Scalar
    Engine. Instead, use nisa.activation with op=nl.copy"; the explicit rule wins, so
    engine=scalar raises EngineError on trn1 (``arch.act_tensor_copy``). Decision: engine=unknown
    runs on vector (the docs: "compiler selects best engine based on engine workload"; vector
    reaches SBUF and PSUM and copies every dtype); the event names the engine that ran it.
    Raises: ShapeError, MemorySpaceError, EngineError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_copy).
    """


def _check_copy(op, t, dst, src, engine):
    """tensor_copy's rules (see its docstring); returns the engine as an enum member."""
    eng = as_enum(_engine, engine, op)
    if t.act_tensor_copy:
        rules.engine_in(op, eng, _COPY_ENGINES, t)
    else:
        rules.engine_in(op, eng, _COPY_ENGINES_NO_ACT, t,
                        hint="(use nisa.activation with op=nl.copy)")
    rules.tensor(op, "dst", dst)
    rules.tensor(op, "src", src)
    rules.on_chip(op, "src", src)
    rules.on_chip(op, "dst", dst)
    rules.partitions(op, "src", src, t)
    rules.partitions(op, "dst", dst, t)
    rules.same_tile(op, "src", src, "dst", dst)
    gpsimd_no_psum(op, eng, src=src, dst=dst)
    return eng


def _memset_rules(ins, dst, value, engine, name):
    """memset's rules (see its docstring): the engine that runs it."""
    op, t = ins.op, ins.target
    eng = as_enum(_engine, engine, op)
    rules.engine_in(op, eng, _MEMSET_ENGINES, t)
    rules.tensor(op, "dst", dst)
    rules.on_chip(op, "dst", dst)
    rules.partitions(op, "dst", dst, t)
    gpsimd_no_psum(op, eng, dst=dst)
    v = np.asarray(value)
    if v.ndim != 0 or v.dtype.kind not in "biuf":
        raise DtypeError(op, f"value must be a numeric scalar constant, got {type(value).__name__} "
                             f"{value!r:.40}")
    if _dt.is_int(dst.dtype):
        if v.dtype.kind == "f" and float(v) != int(float(v)):
            raise DtypeError(op, f"value {value} is not an integer but dst dtype is {_dt.name(dst.dtype)}")
        info = np.iinfo(dst.dtype)
        iv = int(float(v)) if v.dtype.kind == "f" else int(v)
        if not info.min <= iv <= info.max:
            raise DtypeError(op, f"value {value} is outside the range of {_dt.name(dst.dtype)}")
    return Passed(_engine.vector if eng is _engine.unknown else eng)


def _memset_compute(ins, dst, value, engine, name):
    if _dt.is_packed(dst.dtype):      # every narrow element of each x4 element holds the value
        word = _dt.pack_x4(np.full(_dt.X4, value, np.float32), dst.dtype)[0]
        write(dst, np.broadcast_to(word, dst.shape))
    elif _dt.is_int(dst.dtype):
        v = np.asarray(value)
        write(dst, np.full(dst.shape, int(float(v)) if v.dtype.kind == "f" else int(v), dst.dtype))
    else:
        write(dst, np.broadcast_to(np.float32(value), dst.shape))


@instruction(writes=("dst",), rules=_memset_rules, compute=_memset_compute)
def memset(dst, value, engine=_engine.unknown, name=None):
    """dst[...] = value (a compile-time constant), on the Vector or GpSimd engine.

    Buffers: SBUF or PSUM (GpSimd: SBUF only). Dtypes: an integer dst takes an integral value
    (Decision: integral floats such as 0.0 are accepted, fractional ones raise DtypeError); the
    value is rounded once into dst.dtype (Decision: an MX x4 dst gets it in each of its packed
    elements, rounded to the element type, e.g. 0.0 zeroes the words). Engine: vector, gpsimd or unknown ("specify which
    engine to use for memset: nki.isa.engine.vector or nki.isa.engine.gpsimd"); others raise
    EngineError. Decision: engine=unknown runs on vector (as tensor_copy); the event names it.
    Raises: DtypeError, MemorySpaceError, EngineError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (memset).
    """


_PREDICATE_DTYPES = ("uint8", "uint16", "uint32")
_INT32 = np.iinfo(np.int32)


def stored_scalar(dst, value) -> np.ndarray:
    """The fp32 immediate ``value`` rounded once into ``dst``'s storage dtype, so that it can be
    merged (np.where) with elements of ``dst``'s dtype that must keep their exact bits."""
    precise = dst.alloc.storage.dtype != np.float32 or dst.dtype == _dt.float32
    v = np.float64(value) if _dt.is_int(dst.dtype) else np.float32(value)
    return _dt.round_into(np.asarray(v), dst.dtype, precise)


def int32_param(op: str, name: str, value) -> int:
    """A compile-time int32 (``offset``, ``channel_multiplier``); ``offset`` may also be a runtime
    register (``.value``) or a 1-element integer tensor."""
    if isinstance(value, NkiTensor) or hasattr(value, "value"):
        v = dynamic_index(value, op)
    else:
        try:
            v = operator.index(value)
        except TypeError:
            f = float(value) if isinstance(value, (float, np.floating)) else None
            if f is None or not math.isfinite(f) or f != int(f):
                raise DtypeError(op, f"{name} must be an int32 value, got {value!r}") from None
            v = int(f)
    if not _INT32.min <= v <= _INT32.max:
        raise DtypeError(op, f"{name} {v} is outside the int32 range")
    return v


def affine_values(op: str, pattern, offset, channel_multiplier, p: int, free_size: int) -> np.ndarray:
    """The (p, free_size) int32 array ``offset + part*channel_multiplier + sum(step_k * i_k)`` over
    ``pattern`` = [[step, count], ...] (outermost first, at most 4 entries; missing dims have size 1).

    The arithmetic is 32-bit two's complement (Decision: sums wrap modulo 2**32).
    Decision (speed; no visible effect): for compile-time parameters (Python ints only, no
    runtime offset) the read-only array is kept per parameters and handed out again (callers
    only read it: ``write`` copies it into dst); a loop issuing the same iota builds it once.
    Raises: ShapeError (pattern form, element count), DtypeError (non-int32 parameters).
    """
    key = _affine_key(pattern, offset, channel_multiplier, p, free_size)
    if key is not None:
        hit = _AFFINE.get(key)
        if hit is not None:
            return hit
    v = _affine_values(op, pattern, offset, channel_multiplier, p, free_size)
    if key is not None:
        if len(_AFFINE) >= 1024:
            _AFFINE.clear()
        v.flags.writeable = False
        _AFFINE[key] = v
    return v


_AFFINE: dict = {}      # _affine_key(...) -> affine_values' (read-only) array for those parameters


def _affine_key(pattern, offset, channel_multiplier, p, free_size):
    """A memo key for ``affine_values`` when every parameter is a plain Python int (a list of
    [int, int] pairs for ``pattern``), else None (``1.0 == 1`` and ``True == 1`` must not find
    an entry whose checks they never passed)."""
    if type(offset) is not int or type(channel_multiplier) is not int or type(pattern) not in (list, tuple):
        return None
    out = []
    for e in pattern:
        if type(e) not in (list, tuple) or len(e) != 2 or type(e[0]) is not int or type(e[1]) is not int:
            return None
        out.append((e[0], e[1]))
    return (tuple(out), offset, channel_multiplier, p, free_size)


def _affine_values(op, pattern, offset, channel_multiplier, p, free_size) -> np.ndarray:
    try:
        pairs = [(int32_param(op, "pattern step", e[0]), operator.index(e[1])) for e in pattern]
        bad = any(len(e) != 2 for e in pattern)
    except (TypeError, IndexError):
        raise ShapeError(op, f"pattern must be a list of [step, count] pairs, got {pattern!r}") from None
    if bad or not pairs:
        raise ShapeError(op, f"pattern must be a list of [step, count] pairs, got {pattern!r}")
    if len(pairs) > 4:
        raise ShapeError(op, f"pattern has {len(pairs)} dims, at most 4")
    if any(n < 1 for _, n in pairs):
        raise ShapeError(op, f"pattern counts must be >= 1, got {[n for _, n in pairs]}")
    n = math.prod(c for _, c in pairs)
    if n != free_size:
        raise ShapeError(op, f"pattern covers {n} elements per partition, dst has {free_size}")
    base = int32_param(op, "offset", offset)
    mult = int32_param(op, "channel_multiplier", channel_multiplier)
    # every partial sum lies in [lo, hi]: inside int32 nothing wraps, so int32 arithmetic gives
    # the same values as the wrapped int64 sum (and is faster)
    lo = base + min(0, mult * (p - 1)) + sum(min(0, st * (c - 1)) for st, c in pairs)
    hi = base + max(0, mult * (p - 1)) + sum(max(0, st * (c - 1)) for st, c in pairs)
    terms = [mult * (p - 1)] + [st * (c - 1) for st, c in pairs]
    it = np.int32 if (_INT32.min <= lo and hi <= _INT32.max
                      and all(_INT32.min <= x <= _INT32.max for x in terms)) else np.int64
    v = np.full((1,) * len(pairs), base, it)
    for k, (step, count) in enumerate(pairs):
        shape = [1] * len(pairs)
        shape[k] = count
        v = v + np.arange(count, dtype=it).reshape(shape) * it(step)
    v = v.reshape(1, -1) + np.arange(p, dtype=it).reshape(p, 1) * it(mult)
    if it is np.int32:
        return v
    return v.astype(np.uint32).view(np.int32) if v.size else v.astype(np.int32)


def _iota_rules(ins, dst, pattern, offset, channel_multiplier, name):
    """iota's rules on dst (see its docstring); the pattern and the (possibly runtime) offset are
    checked by ``affine_values`` when it runs."""
    op, t = ins.op, ins.target
    rules.tensor(op, "dst", dst)
    rules.sbuf_only(op, "dst", dst)
    rules.partitions(op, "dst", dst, t)
    return Passed(_engine.gpsimd)


def _iota_compute(ins, dst, pattern, offset, channel_multiplier, name):
    write(dst, affine_values(ins.op, pattern, offset, channel_multiplier, dst.shape[0], dst.free_size))


@instruction(reads=("offset",), writes=("dst",), rules=_iota_rules, compute=_iota_compute)
def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    """dst[p, i...] = offset + p * channel_multiplier + sum_k step_k * i_k, on the GpSimd engine.

    ``pattern`` = [[step_w, num_w], ..., [step_x, num_x]] (up to 4 dims, padded with size 1; step 0
    is legal); prod(num) must equal dst's elements per partition (dst's free shape is free).
    ``offset`` may be a runtime register (``.value``) or a 1-element integer tensor.
    Dtypes: values computed in int32 (wrapping), then rounded once into dst.dtype (float dst via fp32;
    integer dst saturates). Buffers: dst in SBUF. Partitions <= pmax. Engine: gpsimd.
    The pattern, offset and channel_multiplier are checked when the values are generated (the
    offset may be runtime data).
    Raises: ShapeError, DtypeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (iota).
    """


def _tcp_rules(ins, dst, src, predicate, reverse_pred, name):
    """tensor_copy_predicated's rules (see its docstring)."""
    op, t = ins.op, ins.target
    rules.tiles(op, t, dst=dst, predicate=predicate)
    rules.same_tile(op, "dst", dst, "predicate", predicate)
    rules.dtype_in(op, "predicate", predicate, _PREDICATE_DTYPES, t)
    if isinstance(src, NkiTensor):
        rules.on_chip(op, "src", src)
        rules.partitions(op, "src", src, t)
        rules.same_tile(op, "dst", dst, "src", src)
        rules.not_both_psum(op, "src", src, "predicate", predicate)
        if src.dtype != dst.dtype:
            raise DtypeError(op, f"src dtype {_dt.name(src.dtype)} must equal dst dtype {_dt.name(dst.dtype)}")
    elif np.ndim(src) != 0:
        raise ShapeError(op, f"src must be a tensor or a scalar, got {type(src).__name__}")
    return Passed(_engine.vector)


def _tcp_compute(ins, dst, src, predicate, reverse_pred, name):
    mask = read_raw(predicate).reshape(dst.shape) != 0
    if reverse_pred:
        mask = ~mask
    old = read_raw(dst, hooks=False)          # kept elements are not an engine read
    new = read_raw(src).reshape(dst.shape) if isinstance(src, NkiTensor) else stored_scalar(dst, src)
    values = np.where(mask, new, old)
    write(dst, values)


@instruction(reads=("src", "predicate"), writes=("dst",), rules=_tcp_rules, compute=_tcp_compute)
def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """dst = where(predicate != 0 (xor reverse_pred), src, dst), on the Vector engine.

    Shapes: dst, predicate and a tensor ``src`` share the partition count (<= pmax) and elements per
    partition (free shapes may differ). ``src`` may be a scalar, copied where the predicate holds.
    Dtypes: predicate uint8/uint16/uint32 (nonzero is true); a tensor src has dst's dtype and is
    copied bit-exactly; a scalar src is rounded once into dst.dtype. Elements where the predicate
    is false keep their old bits.
    Buffers: SBUF or PSUM; src and predicate not both in PSUM.
    Raises: ShapeError, DtypeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (tensor_copy_predicated).
    """


__all__ = ["tensor_copy", "tensor_copy_predicated", "memset", "iota"]
