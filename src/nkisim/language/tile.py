"""Tile-level ``nl`` functions that allocate and return new tiles: load/store, element-wise math,
matmul/transpose, free-axis reductions, softmax, rms_norm, where, broadcast_to, expand_dims.

Each lowers to ``nisa`` ops (so the hardware rules apply) on fp32 intermediates and rounds once into
the result dtype; functions no ``nisa`` op computes exactly (ceil, floor, trunc, where,
broadcast_to, gather_flattened, the range reduction of nl.sin, ``x op= y``) are instructions
declared here (``isa.dispatch.instruction`` specs named after the nl function, with the ISA
instruction the hardware would run as ``op``), computed directly with the same checks. Operator
tokens (``nl.add``, ``nl.max``, ...) reach their tile function through ``call(name, ...)``;
NkiTensor's Python operators through ``operator``/``inplace``.

Every tile function that issues instructions runs through ``isa.dispatch.api_function``: an
unknown keyword raises a TypeError naming the function; the events of its instructions say
``api="nl.<name>"``; under ``findings="all"`` a rule it checks itself is recorded and the kernel
goes on with a placeholder result (a rule broken inside one of its instructions skips only that
instruction, as for a bare nisa call). Decision (docs silent; findings are nkisim's): the placeholder is a fresh tile of the
shape, dtype and buffer the call would have produced when those can be computed from the
arguments, else of the first tile operand's shape and dtype in SBUF, filled with the
uninitialised sentinel (NaN / 4); None when no such tile can be allocated (e.g. more than pmax
partitions) and for ``store``. ``x op= y`` keeps ``x`` (unchanged) instead.
Imports memory, checks, isa, state; never torch.
Source: aws-neuron-sdk nki/api/nki/language/__init__.py (the tile-level functions).
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..checks import rules
from ..errors import BoundsError, NkiError, ShapeError, UnsupportedError
from ..isa import alu as _alu
from ..isa.activation import activation as _activation
from ..isa.copy import tensor_copy as _tensor_copy
from ..isa.dma import dma_copy as _dma_copy
from ..isa.elementwise import tensor_scalar as _tensor_scalar, tensor_tensor as _tensor_tensor
from ..isa.matmul import nc_matmul as _nc_matmul
from ..isa.reduce import tensor_reduce as _tensor_reduce
from ..isa.transpose import nc_transpose as _nc_transpose
from ..isa.dispatch import Passed, api_function, instruction
from ..isa.enums import engine as _engine
from ..memory import access
from ..memory.access import matmul_flags, read_f32, read_raw, set_matmul_flags, unwritten, write
from ..memory.indirect import IndirectTensor
from ..checks import uninit
from ..memory.buffers import HBM, psum, sbuf
from ..memory.tensor import NkiTensor
from . import assign_target as _targets, creation as _creation

F32 = np.float32
_f32 = _dt.float32


# ---- shared helpers ----------------------------------------------------------------------------

def _target(op):
    return state.core(op).target


def _tile(op, name, x, target=None):
    """``x`` must be an on-chip tensor with at most pmax partitions."""
    rules.tensor(op, name, x)
    rules.on_chip(op, name, x)
    rules.partitions(op, name, x, target or _target(op))
    return x


def _new(shape, dtype, op, buffer=sbuf):
    return access.allocate(tuple(shape), dtype, buffer, "", op=op)


def _result(shape, dtype, op, buffer=sbuf):
    """The result tile of ``op``: the Beta-1 assignment target offered for it (``assign_target``:
    ``t[key] = nl.exp(x)`` writes ``t[key]``) or a new allocation."""
    view = _targets.take(shape, dtype, buffer, op)
    return _new(shape, dtype, op, buffer) if view is None else view


def _is_tile(v) -> bool:
    return isinstance(v, NkiTensor)


def _check_scalar(op, name, v):
    if isinstance(v, (bool, int, float, np.number, np.bool_)) or (isinstance(v, np.ndarray) and v.ndim == 0):
        return v
    raise ShapeError(op, f"{name} must be a tile or a scalar, got {type(v).__name__}")


def promote(a, b) -> np.dtype:
    """Result dtype of an op on tiles of dtypes ``a`` and ``b``: the same dtype, the float of a
    (float, int) pair, the wider float (fp16+bf16 -> fp32, fp8 e4m3+e5m2 -> bf16), the wider int
    (int8+uint8 -> int16, int8/16+uint16 -> int32, int32+uint32 -> fp32); bool yields to the other.

    Source: NKI type promotion (shared/spec/nki-api.md section 4.16).
    """
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if a == _dt.bool_ or b == _dt.bool_:
        return b if a == _dt.bool_ else a
    fa, fb = _dt.is_float(a), _dt.is_float(b)
    if fa != fb:
        return a if fa else b
    if fa:
        if a.itemsize != b.itemsize:
            return a if a.itemsize > b.itemsize else b
        return _dt.bfloat16 if a.itemsize == 1 else _f32
    if a.kind == b.kind:
        return a if a.itemsize > b.itemsize else b
    s, u = (a, b) if a.kind == "i" else (b, a)
    if s.itemsize > u.itemsize:
        return s
    return _dt.float32 if u.itemsize == 4 else np.dtype(f"i{2 * u.itemsize}")


def _out_dtype(dtype, default):
    """``dtype`` as an NKI dtype (``default`` when None); an unknown one is left for allocate to reject."""
    if dtype is None:
        return np.dtype(default)
    return _dt.as_dtype(dtype) or dtype


def _broadcast_shape(op, xs, ys):
    """Same rank; partition dims equal; free dims equal or 1 (numpy rule without prepending)."""
    if xs == ys:
        return xs
    ok = len(xs) == len(ys) and xs[0] == ys[0] and builtins.all(
        a == b or a == 1 or b == 1 for a, b in zip(xs[1:], ys[1:]))
    if not ok:
        raise ShapeError(op, f"x shape {xs} and y shape {ys} are not broadcastable (same rank, equal "
                             f"partition dims, free dims equal or 1)")
    return (xs[0],) + tuple(builtins.max(a, b) for a, b in zip(xs[1:], ys[1:]))


def _engine_rules(engine):
    """The rules of an instruction whose nl function checked its operands already: only its
    engine (such specs take ``memo=False``: there is nothing to memoise)."""
    passed = Passed(engine)

    def rules_(ins, *args):
        return passed
    return rules_


def _result_of(api, result):
    """The ``fallback`` of nl function ``api`` (see the module docstring): ``result(*args,
    **kwargs) -> (shape, dtype, buffer)`` says what the call would have produced."""
    def fallback(*args, **kwargs):
        tries = []
        try:
            tries.append(result(*args, **kwargs))
        except Exception:       # noqa: BLE001 - the arguments broke a rule: they may be anything
            pass
        first = next((a for a in (*args, *kwargs.values()) if _is_tile(a)), None)
        if first is not None:
            tries.append((first.shape, first.dtype, sbuf))
        for shape, dtype, buffer in tries:
            try:
                return access.allocate(tuple(shape), dtype, buffer, "", op=api)
            except (NkiError, TypeError, ValueError):
                continue
        return None
    return fallback


def _nl(api, result=None):
    """Decorate the nl function ``api`` (``isa.dispatch.api_function``) with the placeholder
    ``result`` describes (see ``_result_of``; None: the function returns nothing)."""
    return api_function(api, _result_of(api, result) if result is not None else None)


def _unary_result(x, dtype=None):
    return x.shape, _out_dtype(dtype, x.dtype), sbuf


def _binary_result(x, y, dtype=None):
    if _is_tile(x) and _is_tile(y):
        return _broadcast_shape("", x.shape, y.shape), _out_dtype(dtype, promote(x.dtype, y.dtype)), sbuf
    tile = x if _is_tile(x) else y
    return tile.shape, _out_dtype(dtype, tile.dtype), sbuf


def _expand(t, shape):
    """A stride-0 view of ``t`` broadcast along its size-1 free dims to ``shape``."""
    for d, (n, m) in enumerate(zip(t.shape, shape)):
        if n != m:
            t = t.broadcast(d, m)
    return t


# ---- element-wise ------------------------------------------------------------------------------

def _binary(name, x, y, dtype=None):
    """``op(x, y)``: tile-tile -> nisa.tensor_tensor (a float32 (P, 1) operand -> tensor_scalar, whose
    tensor operands must be float32; other free-dim broadcasts, a non-fp32 (P, 1) operand included,
    use stride-0 views); tile-scalar -> nisa.tensor_scalar (``reverse0`` when x is the scalar).
    Decision: a scalar never promotes the result dtype (default: the tile's dtype).
    ``abs_max``/``abs_min`` need NeuronCore-v4 (trn3) or newer (as documented)."""
    op = f"nl.{name}"
    t = _target(op)
    if name in t.alu_ops_excluded:
        raise UnsupportedError(op, f"needs trn3 or newer, not {t.name}")
    if _is_tile(x) and _is_tile(y):
        _tile(op, "x", x, t)
        _tile(op, "y", y, t)
        shape = _broadcast_shape(op, x.shape, y.shape)
        dst = _result(shape, _out_dtype(dtype, promote(x.dtype, y.dtype)), op)
        if x.shape == y.shape:
            _tensor_tensor(dst=dst, data1=x, data2=y, op=name)
        elif y.free_size == 1 and x.shape == shape and y.dtype == _f32:
            _tensor_scalar(dst=dst, data=x, op0=name, operand0=y)
        elif x.free_size == 1 and y.shape == shape and x.dtype == _f32:
            _tensor_scalar(dst=dst, data=y, op0=name, operand0=x, reverse0=True)
        else:
            _tensor_tensor(dst=dst, data1=_expand(x, shape), data2=_expand(y, shape), op=name)
        return dst
    if not _is_tile(x) and not _is_tile(y):
        raise ShapeError(op, "x and y are both scalars; at least one must be a tile")
    tile, scalar, reverse = (x, y, False) if _is_tile(x) else (y, x, True)
    _tile(op, "y" if reverse else "x", tile, t)
    _check_scalar(op, "x" if reverse else "y", scalar)
    dst = _result(tile.shape, _out_dtype(dtype, tile.dtype), op)
    _tensor_scalar(dst=dst, data=tile, op0=name, operand0=scalar, reverse0=reverse)
    return dst


def _unary_alu(name, x, dtype=None, engine=_engine.unknown):
    """A unary ALU operator on the Vector engine (nisa.tensor_scalar)."""
    op = f"nl.{name}"
    _tile(op, "x", x)
    dst = _result(x.shape, _out_dtype(dtype, x.dtype), op)
    _tensor_scalar(dst=dst, data=x, op0=name, operand0=None, engine=engine)
    return dst


def _unary_act(name, x, dtype=None, buffer=sbuf):
    """An activation function on the Scalar engine (nisa.activation), fp32 inside."""
    op = f"nl.{name}"
    _tile(op, "x", x)
    dst = _result(x.shape, _out_dtype(dtype, x.dtype), op, buffer)
    _activation(dst=dst, op=name, data=x)
    return dst


def _unary_direct(name, x, dtype=None):
    """No nisa op computes ceil/floor/trunc exactly: one instruction computes it on the fp32
    values and rounds once into dtype."""
    op = f"nl.{name}"
    _tile(op, "x", x)
    dst = _new(x.shape, _out_dtype(dtype, x.dtype), op)
    _ROUNDING[name](dst, x)
    return dst


def _rounding_instruction(name, fn):
    """The instruction of ``nl.<name>`` (ceil, floor, trunc): dst = fn(x) on the fp32 values,
    rounded once into dst.dtype. Decision (docs silent on the engine): a Vector engine
    ``tensor_scalar`` (an ALU pass over the tile), as the other unary ALU functions. Decision: an
    integer tile is its own ceil/floor/trunc, so its values pass exactly (int32 beyond 2**24
    included) instead of through fp32."""
    def compute(ins, dst, x):
        # an integer is its own ceil/floor/trunc: its values pass exactly (no fp32 detour)
        write(dst, read_raw(x) if _dt.is_int(x.dtype) else fn(read_f32(x)))

    def stub(dst, x):
        pass
    stub.__name__ = stub.__qualname__ = f"_{name}_instruction"
    stub.__doc__ = (f"dst = {name}(x) on the fp32 values of x, rounded once into dst.dtype (the "
                    f"instruction nl.{name} issues; Vector engine).")
    return instruction(api=f"nl.{name}", op="tensor_scalar", reads=("x",), writes=("dst",),
                       rules=_engine_rules(_engine.vector), compute=compute, memo=False)(stub)


@_nl("nl.copy", lambda x, dtype=None: (x.shape, _out_dtype(dtype, x.dtype), sbuf))
def copy(x, dtype=None):
    """A new SBUF tile with x's layout holding ``x`` (SBUF or PSUM): one nisa.tensor_copy.

    Docs: "Create a copy of the input tile on SBUF ... a new tile with the same layout as x,
    allocated on SBUF" (a PSUM source comes back in SBUF). Dtypes: ``dtype`` (default x's); the
    same dtype copies every bit (integers beyond 2**24 included); another dtype converts via fp32,
    rounded once ("may result in precision loss"). Decision (docs silent on the engine): a Vector
    engine tensor_copy, whose same-dtype copy is "bit-accurate" (the Scalar engine's goes through
    fp32).
    Raises: ShapeError, MemorySpaceError (x in HBM).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (copy), nki/api/nki/isa/__init__.py
    (tensor_copy).
    """
    op = "nl.copy"
    _tile(op, "x", x)
    dst = _new(x.shape, _out_dtype(dtype, x.dtype), op)
    _tensor_copy(dst=dst, src=x, engine=_engine.vector)
    return dst


def _sin_reduce_compute(ins, dst, x):
    v = read_f32(x).astype(np.float64)
    write(dst, v - _TWO_PI * np.round(v / _TWO_PI))


@instruction(api="nl.sin", op="tensor_scalar", reads=("x",), writes=("dst",),
             rules=_engine_rules(_engine.vector), compute=_sin_reduce_compute, memo=False)
def _sin_reduce(dst, x):
    """dst = x - 2 pi round(x / 2 pi), in [-pi, pi] (the range reduction nl.sin issues before
    its activation; Vector engine), computed in float64 and rounded once into dst (fp32)."""


_TWO_PI = 2.0 * math.pi


@_nl("nl.sin", _unary_result)
def sin(x, dtype=None):
    """sin(x) element-wise: a range reduction into [-pi, pi] (one Vector engine instruction into
    an fp32 SBUF tile), then nisa.activation(op=nl.sin) into a new SBUF tile of ``dtype``
    (default x's).

    Docs: "nki.language.sin applies additional instructions to perform range reduction before
    the activation, so it stays accurate over the full input domain" (the bare activation
    extrapolates a cubic outside [-PI, PI]; see ``isa.alu._sin``).
    Source: aws-neuron-sdk nki/api/nki.api.shared.rst (note under Supported Activation Functions).
    """
    op = "nl.sin"
    _tile(op, "x", x)
    r = _new(x.shape, _f32, op)
    _sin_reduce(r, x)
    dst = _new(x.shape, _out_dtype(dtype, x.dtype), op)
    _activation(dst=dst, op="sin", data=r)
    return dst


_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "abs_max", "abs_min",
           "fmod", "mod", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
           "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
           "left_shift", "right_shift")
_UNARY_ALU = ("abs", "square", "relu", "reciprocal", "negative", "logical_not", "invert")
_UNARY_ACT = ("exp", "log", "sqrt", "cos", "tan", "arctan", "sign", "tanh", "sigmoid", "silu",
              "silu_dx", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid",
              "gelu_apprx_sigmoid_dx", "mish", "softplus", "erf", "erf_dx")
_UNARY_DIRECT = {"ceil": np.ceil, "floor": np.floor, "trunc": np.trunc}
_ROUNDING = {name: _rounding_instruction(name, fn) for name, fn in _UNARY_DIRECT.items()}


def _make_binary(name):
    def fn(x, y, dtype=None):
        return _binary(name, x, y, dtype)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``{name}(x, y)`` element-wise on tiles or scalars (at least one a tile); a new SBUF "
                  f"tile of ``dtype`` (default: the tiles' promoted dtype).")
    return _nl(f"nl.{name}", _binary_result)(fn)


def _make_unary(name, impl):
    def fn(x, dtype=None):
        return impl(name, x, dtype)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}(x)`` element-wise; a new SBUF tile of ``dtype`` (default: x's dtype)."
    return _nl(f"nl.{name}", _unary_result)(fn)


@_nl("nl.rsqrt", _unary_result)
def rsqrt(x, dtype=None):
    """1 / sqrt(x): GpSimd since NKI 0.5.0, so ``x`` must not be in PSUM."""
    return _unary_alu("rsqrt", x, dtype, _engine.gpsimd)


# ---- data movement -----------------------------------------------------------------------------

@_nl("nl.load", lambda src, dtype=None: (src.shape or (1,), _out_dtype(dtype, src.dtype), sbuf))
def load(src, dtype=None):
    """A new SBUF tile holding ``src`` (HBM), via nisa.dma_copy; cast via fp32 when ``dtype`` differs.

    Shapes: the tile has src's shape; dim 0 becomes the partition dim (<= pmax). Decision: a 0-d
    ``src`` (a 0-d kernel argument) loads as a (1,) tile: one partition, one element.
    Raises: MemorySpaceError (src not in HBM), ShapeError, DtypeError, CapacityError.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (load).
    """
    op = "nl.load"
    if type(src) is not IndirectTensor:     # a gather view (Beta 1: data[idx_tile, i_f]) is HBM
        rules.tensor(op, "src", src)
        rules.on_chip(op, "src", src, HBM)
    dst = _result(src.shape or (1,), _out_dtype(dtype, src.dtype), op)
    _dma_copy(dst=dst, src=src)
    return dst


@_nl("nl.store")
def store(dst, value):
    """dst (HBM) = value, via nisa.dma_copy; returns None.

    Shapes: equal element counts. ``value`` must be an SBUF tile: the docs store "from on-chip
    memory (SBUF)" ("value: an SBUF tile"), and data cannot move from PSUM to HBM directly (copy a
    PSUM tile to SBUF first, e.g. with nl.copy or nisa.tensor_copy); a PSUM or HBM ``value`` or a
    scalar raises MemorySpaceError.
    Raises: MemorySpaceError, ShapeError.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (store);
    nki/guides/tutorials/kernel-optimization.rst ("you cannot move data directly from PSUM to HBM").
    """
    op = "nl.store"
    if type(dst) is not IndirectTensor:     # a scatter view (Beta 1: data[idx_tile, i_f]) is HBM
        rules.tensor(op, "dst", dst)
        rules.on_chip(op, "dst", dst, HBM)
    _tile(op, "value", value)
    rules.sbuf_only(op, "value", value)
    _dma_copy(dst=dst, src=value)


@_nl("nl.load_transpose2d",
     lambda src, dtype=None: (src.shape[::-1], _out_dtype(dtype, src.dtype), sbuf))
def load_transpose2d(src, dtype=None):
    """A new SBUF tile ``src.T`` from a 2-D HBM tensor (A, B) -> (B, A), B <= pmax: one nisa.dma_copy
    reading src through a transposed (strided) access pattern.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (load_transpose2d).
    """
    op = "nl.load_transpose2d"
    rules.tensor(op, "src", src)
    rules.on_chip(op, "src", src, HBM)
    if src.ndim != 2:
        raise ShapeError(op, f"src must be 2-D, got shape {src.shape}")
    dst = _new(src.shape[::-1], _out_dtype(dtype, src.dtype), op)
    _dma_copy(dst=dst, src=src.permute((1, 0)))
    return dst


# ---- tensor engine -----------------------------------------------------------------------------

@_nl("nl.transpose", lambda x, dtype=None: (x.shape[::-1], _out_dtype(dtype, x.dtype), psum))
def transpose(x, dtype=None):
    """A new PSUM tile ``x.T`` of a 2-D tile (P, F) -> (F, P), via nisa.nc_transpose (bit exact, in
    x's dtype); a different ``dtype`` adds a nisa.tensor_copy into a PSUM tile of that dtype.
    Limits: those of nc_transpose (TensorE: SBUF input, <= 128 x 128).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (transpose).
    """
    op = "nl.transpose"
    _tile(op, "x", x)
    if x.ndim != 2:
        raise ShapeError(op, f"x must be a 2-D tile, got shape {x.shape}")
    out = _new(x.shape[::-1], x.dtype, op, psum)
    _nc_transpose(dst=out, data=x)
    if dtype is not None and _out_dtype(dtype, x.dtype) != x.dtype:
        cast = _new(out.shape, dtype, op, psum)
        _tensor_copy(dst=cast, src=out)
        out = cast
    return out


@_nl("nl.matmul", lambda x, y, transpose_x=False: (
    (x.free_size if transpose_x else x.shape[0], y.free_size), _f32, psum))
def matmul(x, y, transpose_x=False):
    """A new fp32 PSUM tile ``x @ y`` (``x.T @ y`` with ``transpose_x=True``) on the Tensor Engine.

    TensorE contracts over the partition dim: ``nc_matmul(stationary, moving) = stationary.T @ moving``.
    With ``transpose_x=True`` x (K, M) is the stationary operand directly. Otherwise x (M, K) is first
    transposed (nisa.nc_transpose into PSUM, then nisa.tensor_copy back to SBUF in x's dtype), as
    the docs describe ("an additional transpose will be inserted").
    Shapes: K <= 128 partitions; M <= 128; y (K, N), N <= 512 (trn3: more). x, y in SBUF.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (matmul).
    """
    op = "nl.matmul"
    t = _target(op)
    _tile(op, "x", x, t)
    _tile(op, "y", y, t)
    stationary = x
    if not transpose_x:
        xt = _new((x.free_size, x.shape[0]), x.dtype, op, psum)
        _nc_transpose(dst=xt, data=x.reshape((x.shape[0], x.free_size)))
        stationary = _new(xt.shape, x.dtype, op)
        _tensor_copy(dst=stationary, src=xt)
    shape = (stationary.free_size, y.free_size)
    if (summed := sum_target(shape, _f32, op)) is not None:
        dst, accumulate = summed            # Beta 1's ``psum += nl.matmul(...)``: one matmul
        _nc_matmul(dst=dst, stationary=stationary, moving=y, accumulate=accumulate)
    elif (dst := _targets.take(shape, _f32, psum, op)) is not None:
        _nc_matmul(dst=dst, stationary=stationary, moving=y, accumulate=False)   # ``psum[...] = ...``
    else:
        dst = _new(shape, _f32, op, psum)
        _nc_matmul(dst=dst, stationary=stationary, moving=y)
    return dst


def sum_target(shape, dtype, op):
    """``(dst, accumulate)`` for the Beta-1 statement ``t += <op call>`` being run, when its
    target ``t`` takes the matmul result (``assign_target.take_sum``): the matmul accumulates
    into ``t``, except the first after a folded ``nl.zeros``, which overwrites
    (``creation.fold_zeros``); else None (the result is a new tile)."""
    dst = _targets.take_sum(shape, dtype, psum, op)
    if dst is None:
        return None
    accumulate = not _creation.fold_zeros(dst)
    if accumulate:
        start_sum(dst)
    return dst, accumulate


def start_sum(x) -> None:
    """Beta 1's ``x += <matmul result>`` into the PSUM view ``x``: x joins the matmul's
    accumulation group, as the Beta-1 compiler lowers the statement (a state change, no
    instruction). Elements never written (``access.unwritten``) start the group: they are set to
    zero, so the add that follows (an accumulating matmul, or the in-place add ``beta1.inplace``
    falls back to) gives the product there; elements last written by a matmul accumulate; and
    elements last written by any other instruction (``psum[...] = nl.load(bias)``, nl.copy, a
    tensor_tensor / activation result, a memset) keep their values, so the add gives value +
    product. Then every element of x counts as last written by a matmul, so the accumulating
    matmul meets no ``isa.matmul.onto_values`` rule.

    Source: aws-neuron-sdk v2.26.0 general/nki/arch/trainium_inferentia2_arch.rst ("Near-memory
    accumulation in PSUM"): "the first ``nki.isa.nc_matmul`` instruction overwrites the
    destination PSUM bank with the instruction output" (the group's start: never-written
    elements), and of ``psum_buf[...] = psum_buf + nisa.nc_matmul(...)``: "even though this
    alternative syntax is functionally equivalent to the use of ``+=``, it may get lowered to
    nisa.tensor_tensor on VectorEngine for accumulation instead": ``+=`` is an addition onto
    what the tile holds. Decision: the sum is the tensor_tensor one, both read as fp32, added,
    rounded once into x's dtype (``x + product``; the fp32 accumulating matmul gives the same
    bits: "The PSUM accumulation is always done in FP32"); nl.zeros' fill then ``+=`` gives
    the same values as its fold (``beta1.zeros``); the instructions are the accumulating matmul
    whatever x holds (nkisim does not model the compiler's choice of a tensor_tensor lowering on
    NeuronCore-v2/v3, where a matmul cannot accumulate onto such values)."""
    if matmul_flags(x) is True:
        return
    blank = unwritten(x)
    if blank is True:
        write(x, np.zeros(x.shape, np.float32))
    elif blank is not False:
        write(x, np.where(blank, np.float32(0), read_f32(x, hooks=False)))
    set_matmul_flags(x, True)


# ---- reductions over free axes -----------------------------------------------------------------

def _axes(op, x, axis):
    """The reduced axes: the trailing free dims ``[k, ..., ndim-1]`` with k >= 1."""
    raw = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    n = x.ndim
    try:
        axes = tuple(sorted(int(a) + n if int(a) < 0 else int(a) for a in raw))
    except (TypeError, ValueError):
        raise ShapeError(op, f"axis must be an int or a list of ints, got {axis!r}") from None
    if axes and axes[0] == 0:
        raise ShapeError(op, f"axis {axis!r} includes the partition dim 0, which cannot be reduced")
    if not axes or axes != tuple(range(axes[0], n)):
        options = " or ".join(str(list(range(k, n))) for k in range(1, n))
        raise ShapeError(op, f"axis {axis!r} must be trailing free dims of a {n}-D tile ({options or 'none'})")
    return axes


def _reduce_to(op, alu_op, x, axes, dtype, keepdims):
    k = axes[0]
    shape = x.shape[:k] + ((1,) * len(axes) if keepdims else ())
    dst = _new(shape, dtype, op)
    _tensor_reduce(dst=dst, op=alu_op, data=x, axis=axes, keepdims=keepdims)
    return dst


def _reduce_result(x, axis, dtype=None, keepdims=False):
    axes = _axes("", x, axis)
    return x.shape[:axes[0]] + ((1,) * len(axes) if keepdims else ()), _out_dtype(dtype, x.dtype), sbuf


def _make_reduce(name, alu_op):
    def fn(x, axis, dtype=None, keepdims=False):
        op = f"nl.{name}"
        _tile(op, "x", x)
        return _reduce_to(op, alu_op, x, _axes(op, x, axis), _out_dtype(dtype, x.dtype), keepdims)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``{name}`` of x over the trailing free ``axis`` via nisa.tensor_reduce({alu_op}); a new "
                  f"SBUF tile of ``dtype`` (default x's); ``keepdims`` keeps size-1 dims.")
    return _nl(f"nl.{name}", _reduce_result)(fn)


@_nl("nl.mean", _reduce_result)
def mean(x, axis, dtype=None, keepdims=False):
    """sum(x, axis) / n in fp32 (nisa.tensor_reduce add, then nisa.tensor_scalar divide), rounded
    once into ``dtype`` (default x's). Source: aws-neuron-sdk nki/api/nki/language/__init__.py (mean)."""
    return _mean(x, axis, dtype, keepdims)


def _mean(x, axis, dtype=None, keepdims=False):
    op = "nl.mean"
    _tile(op, "x", x)
    axes = _axes(op, x, axis)
    s = _reduce_to(op, "add", x, axes, _f32, keepdims)
    dst = _new(s.shape, _out_dtype(dtype, x.dtype), op)
    _tensor_scalar(dst=dst, data=s, op0="divide", operand0=float(math.prod(x.shape[a] for a in axes)))
    return dst


@_nl("nl.var", lambda x, axis, dtype=None, keepdims=False: _reduce_result(x, axis, dtype, True))
def var(x, axis, dtype=None, keepdims=False):
    """Population variance mean((x - mean(x))**2) over the trailing free ``axis``, fp32 inside.
    ``keepdims`` is ignored: the result always keeps size-1 dims (as documented).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (var)."""
    op = "nl.var"
    _tile(op, "x", x)
    axes = _axes(op, x, axis)
    m = _mean(x, axes, _f32, keepdims=True)
    d = _binary("subtract", x, m, _f32)
    sq = _binary("multiply", d, d, _f32)
    return _mean(sq, axes, _out_dtype(dtype, x.dtype), keepdims=True)


@_nl("nl.all", lambda x, axis, dtype=None: _reduce_result(x, axis, dtype))
def all(x, axis, dtype=None):  # noqa: A001 - NKI's name
    """1 where every element over the trailing free ``axis`` is nonzero, else 0: (x != 0) via
    nisa.tensor_scalar, then a minimum nisa.tensor_reduce. Result dtype: ``dtype`` or x's."""
    op = "nl.all"
    _tile(op, "x", x)
    axes = _axes(op, x, axis)
    nz = _new(x.shape, _f32, op)
    _tensor_scalar(dst=nz, data=x, op0="not_equal", operand0=0.0)
    return _reduce_to(op, "minimum", nz, axes, _out_dtype(dtype, x.dtype), False)


@_nl("nl.softmax", lambda x, axis=-1, dtype=None: _unary_result(x, dtype))
def softmax(x, axis=-1, dtype=None):
    """exp(x - max) / sum(exp(x - max)) over the trailing free ``axis``; fp32 intermediates (max and
    sum via nisa.tensor_reduce, exp via nisa.activation), rounded once into ``dtype`` (default x's).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (softmax)."""
    op = "nl.softmax"
    _tile(op, "x", x)
    axes = _axes(op, x, axis)
    m = _reduce_to(op, "maximum", x, axes, _f32, True)
    e = _unary_act("exp", _binary("subtract", x, m, _f32), _f32)
    s = _reduce_to(op, "add", e, axes, _f32, True)
    return _binary("divide", e, s, _out_dtype(dtype, x.dtype))


@_nl("nl.rms_norm", lambda x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None:
     _unary_result(x, dtype))
def rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None):
    """x / sqrt(sum(x**2, axis) / n + epsilon) * w.

    ``w`` has x's shape or broadcasts to it along free dims. Intermediates in ``compute_dtype``
    (default float32); the result rounds once into ``dtype`` (default x's). Lowered to
    tensor_tensor (square), tensor_reduce (sum), tensor_scalar (/ n + epsilon), activation (sqrt),
    tensor_tensor (divide, multiply). Decision (docs silent): mean = sum / n exactly as given.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (rms_norm).
    """
    op = "nl.rms_norm"
    _tile(op, "x", x)
    _tile(op, "w", w)
    cdt = _out_dtype(compute_dtype, _f32)
    axes = _axes(op, x, axis)
    sq = _binary("multiply", x, x, cdt)
    s = _reduce_to(op, "add", sq, axes, cdt, True)
    ms = _new(s.shape, cdt, op)
    _tensor_scalar(dst=ms, data=s, op0="divide", operand0=float(n), op1="add", operand1=float(epsilon))
    rms = _unary_act("sqrt", ms, cdt)
    return _binary("multiply", _binary("divide", x, rms, cdt), w, _out_dtype(dtype, x.dtype))


# ---- selection and shape -----------------------------------------------------------------------

def _select_rules(ins, dst, condition, x, y):
    """Whether the selected values copy exactly: same-dtype tiles (and int scalars) do, anything
    else goes through fp32."""
    raw = builtins.all(v.dtype == dst.dtype if _is_tile(v) else not isinstance(v, float) for v in (x, y))
    return Passed(_engine.vector, raw)


def _select_compute(ins, dst, condition, x, y):
    raw = ins.info

    def values(v):
        if _is_tile(v):
            return read_raw(v) if raw else read_f32(v)
        return np.asarray(v) if raw else np.asarray(v, F32)
    write(dst, np.where(read_f32(condition) != 0, values(x), values(y)))


@instruction(api="nl.where", op="select", reads=("condition", "x", "y"), writes=("dst",),
             rules=_select_rules, compute=_select_compute, memo=False)
def _select(dst, condition, x, y):
    """dst = x where condition != 0, else y (the instruction nl.where issues; x, y tiles or
    scalars broadcast to dst). Decision (no nisa op takes two tensor values): the Vector engine's
    select, the instruction behind nisa.select_reduce."""


def _where_result(condition, x, y, dtype=None):
    shape = condition.shape
    for v in (x, y):
        if _is_tile(v):
            shape = _broadcast_shape("", shape, v.shape)
    dt = x.dtype if _is_tile(x) else y.dtype if _is_tile(y) else condition.dtype
    return shape, _out_dtype(dtype, dt), sbuf


@_nl("nl.where", _where_result)
def where(condition, x, y, dtype=None):
    """x where condition != 0, else y (condition holds 1.0/0.0): one Vector engine select.

    Shapes: condition a tile; x, y tiles or scalars; all broadcast (same rank, equal partitions,
    free dims equal or 1). Dtype: ``dtype``, else x's, else y's, else condition's; same-dtype values
    are copied bit-exactly. Raises: ShapeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (where).
    """
    op = "nl.where"
    t = _target(op)
    _tile(op, "condition", condition, t)
    shape = condition.shape
    for name, v in (("x", x), ("y", y)):
        if _is_tile(v):
            _tile(op, name, v, t)
            shape = _broadcast_shape(op, shape, v.shape)
        else:
            _check_scalar(op, name, v)
    out_dt = _out_dtype(dtype, x.dtype if _is_tile(x) else y.dtype if _is_tile(y) else condition.dtype)
    dst = _new(shape, out_dt, op)
    _select(dst, condition, x, y)
    return dst


def _broadcast_compute(ins, dst, x):
    src = read_raw(x) if dst.dtype == x.dtype else read_f32(x)
    write(dst, np.broadcast_to(src, dst.shape))


_BROADCAST_DOC = ("dst = x repeated along its size-1 dims (the instruction nl.broadcast_to issues); "
                  "same dtype copies bits, else via fp32.")


@instruction(api="nl.broadcast_to", op="tensor_copy", reads=("x",), writes=("dst",),
             rules=_engine_rules(_engine.vector), compute=_broadcast_compute, memo=False)
def _broadcast_copy(dst, x):
    pass


@instruction(api="nl.broadcast_to", op="dma_copy", reads=("x",), writes=("dst",),
             rules=_engine_rules(_engine.dma), compute=_broadcast_compute, memo=False)
def _broadcast_dma(dst, x):
    pass


@instruction(api="nl.broadcast_to", op="nc_matmul", reads=("x",), writes=("dst",),
             rules=_engine_rules(_engine.tensor), compute=_broadcast_compute, memo=False)
def _broadcast_matmul(dst, x):
    pass


_broadcast_copy.__doc__ = _BROADCAST_DOC + " Along free dims: a Vector engine tensor_copy."
_broadcast_dma.__doc__ = (_BROADCAST_DOC + " Along the partition dim, when no TensorE matmul can do it: a DMA "
                          "(no Vector/Scalar/GpSimd lane reads another partition).")
_broadcast_matmul.__doc__ = (_BROADCAST_DOC + " Along the partition dim: the TensorE matmul "
                             "nc_matmul(ones[1, M], x, is_stationary_onezero=True) into a PSUM tile "
                             "(trainium_inferentia2_arch.rst, TensorE \"Alternative Use Case\": \"NKI invokes "
                             "such matmul under the hood when broadcast_input.broadcast_to((M, ...)) is called\"). "
                             "Decision: the values are x's bits (a product with one 1.0 and no other term).")


def _matmul_broadcast(x, shape, out_dt, t) -> bool:
    """Whether the partition broadcast of ``x`` to ``shape`` is the documented TensorE matmul: x a
    1-partition SBUF fp32 tile (TensorE reads SBUF; its output is fp32), the result fp32 and one
    matmul's output (its free bytes fit one PSUM bank: "a single matmul ... writes to a single PSUM
    bank, which can only hold 512 FP32 elements per PSUM partition", trainium_inferentia2_arch.rst).
    Decision: anything else (another dtype, x in PSUM, a result of more than one bank) stays one
    DMA into SBUF."""
    return (x.shape[0] == 1 and x.buffer is sbuf and x.dtype == np.float32 and out_dt == np.float32
            and math.prod(shape[1:]) * 4 <= t.psum_bank_bytes)


@_nl("nl.broadcast_to", lambda x, shape, dtype=None: (tuple(int(s) for s in shape),
                                                      _out_dtype(dtype, x.dtype), sbuf))
def broadcast_to(x, shape, dtype=None):
    """A new tile of ``shape`` repeating ``x`` along its size-1 dims (numpy broadcasting, same
    rank). Decision: the partition dim may also broadcast from 1. Instruction: a Vector engine
    tensor_copy reading x through stride-0 dims into SBUF; a partition broadcast of a 1-partition
    fp32 SBUF tile whose result fits one PSUM bank (at most 512 fp32 per partition) is the TensorE
    matmul the architecture guide says NKI issues (ones[1, M] stationary, x moving) and the result
    is a PSUM tile; Decision: any other partition broadcast is one dma_copy into SBUF.
    Same shape and dtype returns ``x`` itself (as documented), issuing nothing.
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (broadcast_to).
    """
    op = "nl.broadcast_to"
    t = _target(op)
    _tile(op, "x", x, t)
    shape = tuple(int(s) for s in shape)
    out_dt = _out_dtype(dtype, x.dtype)
    if shape == x.shape and out_dt == x.dtype:
        return x
    if len(shape) != x.ndim or builtins.any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise ShapeError(op, f"cannot broadcast x shape {x.shape} to {shape} (same rank, dims equal or 1)")
    rules.at_most(op, "partition dim", shape[0], t.pmax, t)
    if shape[0] == x.shape[0]:
        dst = _new(shape, out_dt, op)
        _broadcast_copy(dst, x)
    elif _matmul_broadcast(x, shape, out_dt, t):
        dst = _new(shape, out_dt, op, buffer=psum)
        _broadcast_matmul(dst, x)
    else:
        dst = _new(shape, out_dt, op)
        _broadcast_dma(dst, x)
    return dst


def expand_dims(x, axis):
    """A view of ``x`` with a size-1 dim inserted at ``axis`` (no copy, no instruction; on-chip:
    not at dim 0)."""
    return x.expand_dim(axis)


def _gather_compute(ins, dst, data, indices):
    idx = read_raw(indices).reshape(indices.shape[0], -1).astype(np.int64)
    f = data.free_size
    bad = (idx < 0) | (idx >= f)
    if bad.any():
        raise BoundsError(ins.op, f"index {int(idx[bad][0])} is outside 0:{f} (data elements per partition)")
    src = read_raw(data) if dst.dtype == data.dtype else read_f32(data)
    write(dst, np.take_along_axis(src.reshape(data.shape[0], f), idx, axis=1))


@instruction(api="nl.gather_flattened", op="dma_copy", reads=("data", "indices"), writes=("dst",),
             rules=_engine_rules(_engine.dma), compute=_gather_compute, memo=False)
def _gather(dst, data, indices):
    """dst[p, j...] = data[p].flat[indices[p, j...]] (the instruction nl.gather_flattened issues):
    an indirect DMA (Decision: dma_copy on the DMA engines, as the indexed loads and stores); an
    index outside 0..data.free_size-1 raises BoundsError (read at run time)."""


@_nl("nl.gather_flattened", lambda data, indices, axis=0, dtype=None: (
    indices.shape, _out_dtype(dtype, data.dtype), sbuf))
def gather_flattened(data, indices, axis=0, dtype=None):
    """out[p, j...] = data[p].flat[indices[p, j...]]: per-partition gather on the flattened free dims.

    Shapes: data and indices on chip with equal partitions; indices an integer tile; the result has
    indices' shape. Decision: only ``axis=0`` (the documented default) is accepted; an index outside
    0..data.free_size-1 raises BoundsError. Instruction: one dma_copy (see ``_gather``).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (gather_flattened).
    """
    op = "nl.gather_flattened"
    t = _target(op)
    _tile(op, "data", data, t)
    _tile(op, "indices", indices, t)
    if axis != 0:
        raise UnsupportedError(op, f"axis {axis} is not supported; only axis=0")
    rules.int_dtype(op, "indices", indices, "gather_flattened")
    if indices.shape[0] != data.shape[0]:
        raise ShapeError(op, f"indices partition dim {indices.shape[0]} does not match data partition "
                             f"dim {data.shape[0]}")
    dst = _new(indices.shape, _out_dtype(dtype, data.dtype), op)
    _gather(dst, data, indices)
    return dst


# ---- dispatch: operator tokens and Python operators --------------------------------------------

_FUNCS: dict = {name: _make_binary(name) for name in _BINARY}
_FUNCS.update({name: _make_unary(name, _unary_alu) for name in _UNARY_ALU})
_FUNCS.update({name: _make_unary(name, _unary_act) for name in _UNARY_ACT})
_FUNCS.update({name: _make_unary(name, _unary_direct) for name in _UNARY_DIRECT})
_FUNCS.update({"rsqrt": rsqrt, "copy": copy, "sin": sin, "mean": mean, "var": var, "all": all,
               "sum": _make_reduce("sum", "add"), "max": _make_reduce("max", "maximum"),
               "min": _make_reduce("min", "minimum"), "prod": _make_reduce("prod", "multiply")})


def call(name, *args, **kwargs):
    """Run the tile function of operator token ``nl.<name>`` (``nl.max`` etc. are reductions)."""
    fn = _FUNCS.get(name)
    if fn is None:
        raise UnsupportedError(f"nl.{name}", "is an operator token only (pass it as op=...), not a "
                                             "tile function")
    return fn(*args, **kwargs)


def operator(name, *operands):
    """A Python operator on NkiTensor (``a + b``, ``-a``, ``a == 2``); NotImplemented outside a kernel
    or for operands that are neither tiles nor scalars (so ``t == None`` is plain identity). The
    tile function runs as ``nl.<name>`` (its events and findings say so)."""
    if state.maybe_core() is None:
        return NotImplemented
    for v in operands:
        if not _is_tile(v) and not isinstance(v, (bool, int, float, np.number, np.bool_)):
            return NotImplemented
    return _FUNCS[name](*operands)


def _inplace_instruction(name, tile):
    """The instruction of ``x op= y`` for ALU operator ``name`` (``tile``: y is a tile, else a
    scalar): a Vector engine tensor_tensor (tensor_scalar for a scalar y) writing into x."""
    op = f"nl.{name} (in place)"

    def rules_(ins, x, y):
        t = ins.target
        _tile(op, "x", x, t)
        if _is_tile(y):
            _tile(op, "y", y, t)
            if _broadcast_shape(op, x.shape, y.shape) != x.shape:
                raise ShapeError(op, f"y shape {y.shape} does not broadcast to x shape {x.shape}")
        return Passed(_engine.vector, _alu.lookup_alu(name, op))

    def compute(ins, x, y):
        other = read_f32(y) if _is_tile(y) else F32(y)
        reduction = name == "add" and x.buffer is psum
        # ``psum += nl.matmul(...)`` is how the hardware accumulates a matmul into PSUM: it marks
        # x's elements as last written by a matmul, so a later nc_matmul(accumulate=None) adds to them
        mm = (reduction and _is_tile(y) and y.buffer is psum and y.storage is y.alloc.storage
              and matmul_flags(y) is True)
        if reduction:
            # ``psum_tile += ...`` is the documented PSUM reduction: like nc_matmul accumulation it
            # is exempt from race detection across affine_range iterations (never-written PSUM is
            # still an uninitialised read in strict mode)
            if x.alloc.init is not None:
                uninit.check_read(x)
            xv = read_f32(x, hooks=False)
        else:
            xv = read_f32(x)                # (also the read hooks: races, uninitialised)
        if name == "add" and x.dtype == _f32 and x.storage.dtype == _f32:
            write(x, other, add=True, reduction=reduction, matmul=mm)   # fl32(x + y) in place
        else:
            write(x, ins.info(xv, other), reduction=reduction, matmul=mm)

    def stub(x, y):
        pass
    stub.__name__ = stub.__qualname__ = f"_i{name}_{'tile' if tile else 'scalar'}"
    stub.__doc__ = f"x = x {name} y in place (the instruction ``x {name}= y`` issues)."
    return instruction(api=op, op="tensor_tensor" if tile else "tensor_scalar", reads=("y",),
                       writes=("x",), rules=rules_, compute=compute)(stub)


_INPLACE = {(name, tile): _inplace_instruction(name, tile)
            for name in ("add", "subtract", "multiply", "divide") for tile in (True, False)}


def inplace(name, x, y):
    """``x op= y``: the result is written back into ``x`` itself (SBUF or PSUM), rounded once.

    Decision: computed directly (fp32) rather than through nisa.tensor_tensor, so ``psum_tile +=
    nl.matmul(...)`` (the documented accumulation idiom, both operands in PSUM) works; it is one
    Vector engine instruction (op tensor_tensor, or tensor_scalar for a scalar y; api
    ``nl.<name> (in place)``, the name its errors carry). ``y`` broadcasts to x's shape (same
    rank, free dims from 1) or is a scalar. Decision: ``+=`` into a PSUM tile is an associative
    reduction, which affine_range allows ("reductions into PSUM"), so race detection treats it
    like nc_matmul accumulation; when ``y`` is a matmul result in PSUM (``psum +=
    nl.matmul(...)``, which the hardware runs as an accumulating matmul) x's elements count as
    last written by a matmul (nc_matmul's accumulate=None then adds to them). Under
    ``findings="all"`` a broken rule skips the instruction and ``x`` is returned unchanged.
    """
    if state.maybe_core() is None:
        return NotImplemented
    tile = _is_tile(y)
    if not tile and not isinstance(y, (bool, int, float, np.number)):
        _tile(f"nl.{name} (in place)", "x", x)
        return NotImplemented
    _INPLACE[name, tile](x, y)
    return x


__all__ = ["load", "store", "load_transpose2d", "matmul", "transpose", "softmax", "rms_norm", "where",
           "broadcast_to", "expand_dims", "gather_flattened"]
