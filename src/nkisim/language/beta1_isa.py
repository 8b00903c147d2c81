"""Beta-1 ``nki.isa`` (``neuronxcc.nki.isa``): each op RETURNS a new tile (SBUF by default;
``nc_matmul`` and a Tensor Engine ``nc_transpose`` return PSUM), takes ``dtype=`` (default: the
input dtype, or the promoted type of two inputs) and ``mask=`` (run inside ``indexing.masked``).
Each is a thin wrapper: allocate the result (no instruction), call the Beta-2 dst-first op in
``nkisim.isa`` (one instruction through the same pipeline). Also the Beta-1 enum numbering.
Never imports torch.

Source: aws-neuron-sdk 2.26 general/nki/api/nki/isa/__init__.py (signatures, enums);
/work/shared/spec/nki-api.md §1.2, §1.4, §4.16.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from .. import dtypes as _d
from .. import isa as _isa
from .. import state
from ..errors import ArgumentError, ShapeError, UnsupportedError
from ..isa import enums as _e
from ..memory.buffers import psum, sbuf
from ..memory.tensor import NkiTensor
from . import assign_target as _targets, creation as _creation, tile as _tile
from .indexing import masked
from .misc import fp32


# ---- Beta-1 enums (numbering of the 2.2x docs) ------------------------------------------------
class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    vector = 5
    sync = 6


class dge_mode(enum.IntEnum):
    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4         # not in the 2.26 enum page; the SDK's Beta-1 tests use it


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3


tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown
dma_engine = _e.dma_engine


def _engine(value, op):
    """A Beta-1 engine (member or raw int) as the Beta-2 member (the numbering agrees)."""
    return _e.as_enum(_e.engine, int(value) if isinstance(value, enum.Enum) else value, op)


def _dge(value, op):
    """Beta-1 dge_mode (none=0, swdge=1, hwdge=2, unknown=3) as the Beta-2 member, by name.
    Decision: a raw int is read with Beta-1 numbering (this is the Beta-1 face)."""
    if isinstance(value, _e.dge_mode):
        return value
    if isinstance(value, (int, np.integer)):
        try:
            value = dge_mode(int(value))
        except ValueError:
            raise ArgumentError(op, f"dge_mode {value!r} is not a Beta 1 dge_mode; expected one of "
                                    f"{[m.name for m in dge_mode]}") from None
    return _e.dge_mode[getattr(value, "name", value)]


def _cmd(value, op):
    return _e.as_enum(_e.reduce_cmd, int(value) if isinstance(value, enum.Enum) else value, op)


def _oob(value, op):
    return _e.as_enum(_e.oob_mode, int(value) if isinstance(value, enum.Enum) else value, op)


def _tok(op):
    """An ``op=`` argument: a NumPy ufunc or function (``np.add``, ``np.max``) becomes the Beta-2
    operator token of the same meaning (``nl.add``, ``nl.maximum``), so its instruction and event
    are those of the Beta-2 spelling; anything else passes unchanged."""
    if isinstance(op, np.ufunc) or (callable(op) and str(getattr(op, "__module__", "")).startswith("numpy")):
        from . import ops as _ops
        from ..isa.alu import op_name
        return _ops.TOKENS.get(op_name(op), op)
    return op


def _new(shape, dtype, buffer=sbuf, api=None):
    """The result tile (an allocation, no instruction); with ``api``, the result of that Beta-1
    call, which may be the statement's assignment target (``assign_target``)."""
    if api is not None:
        view = _targets.take(shape, _d.as_dtype(dtype) or dtype, buffer, api)
        if view is not None:
            return view
    return _creation.ndarray(tuple(int(s) for s in shape), dtype, buffer=buffer)


def _dt(dtype, *inputs):
    """``dtype`` or the default: the input's dtype, the promoted type of two tile inputs."""
    if dtype is not None:
        return dtype
    tiles = [x for x in inputs if isinstance(x, NkiTensor)]
    if len(tiles) >= 2:
        return _tile.promote(tiles[0], tiles[1])
    if not tiles:                       # a gather view (t[idx_tile, ...]) has its base's dtype
        return inputs[0].dtype
    return tiles[0].dtype


def _no_kwargs(op, kwargs):
    if kwargs:
        raise TypeError(f"{op}() got an unexpected keyword argument {next(iter(kwargs))!r}")


# ---- element-wise and activations ---------------------------------------------------------------
@_targets.assignable("nisa.activation")
def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               mask=None, dtype=None, **kwargs):
    """``r = nisa.activation(op, data, *, bias, scale, reduce_op, reduce_res, reduce_cmd, mask, dtype)``:
    r = op(data * scale + bias), a new SBUF tile (Beta-2 ``nisa.activation(dst, ...)``)."""
    _no_kwargs("nisa.activation", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data), api="nisa.activation")
        _isa.activation(dst, _tok(op), data, bias=bias, scale=scale, reduce_op=_tok(reduce_op), reduce_res=reduce_res,
                        reduce_cmd=_cmd(reduce_cmd, "nisa.activation"))
    return dst


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **kwargs):
    """``r = nisa.activation_reduce(op, data, *, reduce_op, reduce_res, bias, scale, mask, dtype)``."""
    _no_kwargs("nisa.activation_reduce", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data))
        _isa.activation_reduce(dst, _tok(op), data, _tok(reduce_op), reduce_res, bias=bias, scale=scale)
    return dst


@_targets.assignable("nisa.tensor_tensor")
def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=engine.unknown, **kwargs):
    """``r = nisa.tensor_tensor(data1, data2, op, *, dtype, mask, engine)``: r = data1 op data2."""
    _no_kwargs("nisa.tensor_tensor", kwargs)
    with masked(mask):
        dst = _new(data1.shape, _dt(dtype, data1, data2), api="nisa.tensor_tensor")
        _isa.tensor_tensor(dst, data1, data2, _tok(op), engine=_engine(engine, "nisa.tensor_tensor"))
    return dst


@_targets.assignable("nisa.tensor_scalar")
def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=engine.unknown, **kwargs):
    """``r = nisa.tensor_scalar(data, op0, operand0, ..., *, dtype, mask, engine)``."""
    _no_kwargs("nisa.tensor_scalar", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data), api="nisa.tensor_scalar")
        _isa.tensor_scalar(dst, data, _tok(op0), operand0, reverse0=reverse0, op1=_tok(op1), operand1=operand1,
                           reverse1=reverse1, engine=_engine(engine, "nisa.tensor_scalar"))
    return dst


@_targets.assignable("nisa.scalar_tensor_tensor")
def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None, **kwargs):
    """``r = nisa.scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, ...)``."""
    _no_kwargs("nisa.scalar_tensor_tensor", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data, operand1), api="nisa.scalar_tensor_tensor")
        _isa.scalar_tensor_tensor(dst, data, _tok(op0), operand0, _tok(op1), operand1, reverse0=reverse0, reverse1=reverse1)
    return dst


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                         **kwargs):
    """``r = nisa.tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, ...)``."""
    _no_kwargs("nisa.tensor_scalar_reduce", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data))
        _isa.tensor_scalar_reduce(dst, data, _tok(op0), operand0, _tok(reduce_op), reduce_res, reverse0=reverse0)
    return dst


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None,
                       **kwargs):
    """``r = nisa.tensor_tensor_scan(data0, data1, initial, op0, op1, ...)``."""
    _no_kwargs("nisa.tensor_tensor_scan", kwargs)
    with masked(mask):
        dst = _new(data0.shape, _dt(dtype, data0, data1))
        _isa.tensor_tensor_scan(dst, data0, data1, initial, _tok(op0), _tok(op1), reverse0=reverse0, reverse1=reverse1)
    return dst


@_targets.assignable("nisa.reciprocal")
def reciprocal(data, *, dtype=None, mask=None, **kwargs):
    """``r = nisa.reciprocal(data, *, dtype, mask)``: r = 1 / data."""
    _no_kwargs("nisa.reciprocal", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data), api="nisa.reciprocal")
        _isa.reciprocal(dst, data)
    return dst


def dropout(data, prob, *, mask=None, dtype=None, **kwargs):
    """``r = nisa.dropout(data, prob, *, mask, dtype)``."""
    _no_kwargs("nisa.dropout", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data))
        _isa.dropout(dst, data, prob)
    return dst


@_targets.assignable("nisa.tensor_copy")
def tensor_copy(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """``r = nisa.tensor_copy(src, *, mask, dtype, engine)``: a new SBUF tile holding src."""
    _no_kwargs("nisa.tensor_copy", kwargs)
    with masked(mask):
        dst = _new(src.shape, _dt(dtype, src), api="nisa.tensor_copy")
        _isa.tensor_copy(dst, src, engine=_engine(engine, "nisa.tensor_copy"))
    return dst


def tensor_copy_dynamic_src(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """``r = nisa.tensor_copy_dynamic_src(src, *, mask, dtype, engine)``: a new SBUF tile holding
    src, a tile indexed at a dynamic offset within each partition (``t[i_p, offs[0, k] + i_f]``,
    the offset a one-element integer SBUF tile: ``memory.affine.dynamic_scalar``). One Beta-2
    ``nisa.tensor_copy`` of that view (Beta 2 spells the offset ``.ap(scalar_offset=...)``)."""
    _no_kwargs("nisa.tensor_copy_dynamic_src", kwargs)
    with masked(mask):
        dst = _new(src.shape, _dt(dtype, src))
        _isa.tensor_copy(dst, src, engine=_engine(engine, "nisa.tensor_copy_dynamic_src"))
    return dst


def tensor_copy_dynamic_dst(*, dst, src, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """``nisa.tensor_copy_dynamic_dst(*, dst, src, mask, dtype, engine)``: dst (a tile indexed at a
    dynamic offset within each partition, as for ``tensor_copy_dynamic_src``) = src, one Beta-2
    ``nisa.tensor_copy``. Decision: the output dtype is dst's; a different ``dtype=`` raises
    ArgumentError (the instruction writes dst, it cannot cast into another type)."""
    _no_kwargs("nisa.tensor_copy_dynamic_dst", kwargs)
    op = "nisa.tensor_copy_dynamic_dst"
    if dtype is not None and np.dtype(dtype) != np.dtype(dst.dtype):
        raise ArgumentError(op, f"dtype {_d.name(dtype)} differs from dst dtype {_d.name(dst.dtype)}")
    with masked(mask):
        _isa.tensor_copy(dst, src, engine=_engine(engine, op))


def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None, **kwargs):
    """``nisa.tensor_copy_predicated(*, src, dst, predicate, reverse_pred, mask)``: writes dst."""
    _no_kwargs("nisa.tensor_copy_predicated", kwargs)
    if isinstance(predicate, NkiTensor) and predicate.dtype == _d.bool_:
        predicate = predicate.view(_d.uint8)      # Decision: a bool predicate is read as its uint8 bits
    with masked(mask):
        _isa.tensor_copy_predicated(dst, src, predicate, reverse_pred=reverse_pred)
    return dst


@_targets.assignable("nisa.memset")
def memset(shape, value, dtype, *, mask=None, engine=engine.unknown, **kwargs):
    """``r = nisa.memset(shape, value, dtype, *, mask, engine)``: a new SBUF tile filled with value."""
    _no_kwargs("nisa.memset", kwargs)
    with masked(mask):
        dst = _new(shape, dtype, api="nisa.memset")
        _isa.memset(dst, value, engine=_engine(engine, "nisa.memset"))
    return dst


# ---- reductions and statistics ------------------------------------------------------------------
@_targets.assignable("nisa.tensor_reduce")
def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False, **kwargs):
    """``r = nisa.tensor_reduce(op, data, axis, *, mask, dtype, negate, keepdims)``: the reduced
    free ``axis`` removed (kept as 1 with keepdims)."""
    _no_kwargs("nisa.tensor_reduce", kwargs)
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(a % data.ndim if isinstance(a, (int, np.integer)) else a for a in axes)
    shape = tuple(1 if i in axes else n for i, n in enumerate(data.shape)) if keepdims else \
        tuple(n for i, n in enumerate(data.shape) if i not in axes)
    with masked(mask):
        dst = _new(shape or (1,), _dt(dtype, data), api="nisa.tensor_reduce")
        _isa.tensor_reduce(dst, _tok(op), data, axis, negate=negate, keepdims=keepdims)
    return dst


@_targets.assignable("nisa.tensor_partition_reduce")
def tensor_partition_reduce(op, data, *, mask=None, dtype=None, **kwargs):
    """``r = nisa.tensor_partition_reduce(op, data, *, mask, dtype)``: r (1, F...)."""
    _no_kwargs("nisa.tensor_partition_reduce", kwargs)
    with masked(mask):
        dst = _new((1,) + tuple(data.shape[1:]), _dt(dtype, data), api="nisa.tensor_partition_reduce")
        _isa.tensor_partition_reduce(dst, _tok(op), data)
    return dst


def bn_stats(data, *, mask=None, dtype=None, **kwargs):
    """``r = nisa.bn_stats(data, *, mask, dtype)``: r (P, 6) per bn_stats_fmax chunk of data's free size."""
    _no_kwargs("nisa.bn_stats", kwargs)
    fmax = state.core("nisa.bn_stats").target.bn_stats_fmax
    with masked(mask):
        dst = _new((data.shape[0], 6 * max(1, math.ceil(data.free_size / fmax))), _dt(dtype, data))
        _isa.bn_stats(dst, data)
    return dst


def bn_aggr(data, *, mask=None, dtype=None, **kwargs):
    """``r = nisa.bn_aggr(data, *, mask, dtype)``: r (P, 2) = mean, variance."""
    _no_kwargs("nisa.bn_aggr", kwargs)
    with masked(mask):
        dst = _new((data.shape[0], 2), _dt(dtype, data))
        _isa.bn_aggr(dst, data)
    return dst


def max8(*, src, mask=None, dtype=None, **kwargs):
    """``r = nisa.max8(*, src, mask, dtype)``: r (P, 8), the 8 largest values per partition."""
    _no_kwargs("nisa.max8", kwargs)
    with masked(mask):
        dst = _new((src.shape[0], 8), _dt(dtype, src))
        _isa.max8(dst, src)
    return dst


def nc_find_index8(*, data, vals, mask=None, dtype=None, **kwargs):
    """``r = nisa.nc_find_index8(*, data, vals, mask, dtype)``: r (P, 8) uint32 by default."""
    _no_kwargs("nisa.nc_find_index8", kwargs)
    with masked(mask):
        dst = _new((data.shape[0], 8), dtype if dtype is not None else _d.uint32)
        _isa.nc_find_index8(dst, data, vals)
    return dst


def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None, **kwargs):
    """``r = nisa.nc_match_replace8(*, data, vals, imm, dst_idx=None, mask, dtype)``: r like data."""
    _no_kwargs("nisa.nc_match_replace8", kwargs)
    with masked(mask):
        dst = _new(data.shape, _dt(dtype, data))
        _isa.nc_match_replace8(dst, data, vals, imm, dst_idx=dst_idx)
    return dst


def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.idle, reduce_res=None,
                 reduce_op=np.amax, range_start=0, on_false_value=fp32.min, mask=None, dtype=None, **kwargs):
    """``r = nisa.range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, ...)``."""
    _no_kwargs("nisa.range_select", kwargs)
    with masked(mask):
        dst = _new(on_true_tile.shape, _dt(dtype, on_true_tile))
        _isa.range_select(dst, on_true_tile, _tok(comp_op0), _tok(comp_op1), bound0, bound1,
                          reduce_cmd=_cmd(reduce_cmd, "nisa.range_select"), reduce_res=reduce_res,
                          reduce_op=_tok(reduce_op), range_start=range_start, on_false_value=on_false_value)
    return dst


def select_reduce(*, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=np.amax, reverse_pred=False, mask=None, dtype=None, **kwargs):
    """``nisa.select_reduce(*, dst, predicate, on_true, on_false, ...)``: writes dst (returns it)."""
    _no_kwargs("nisa.select_reduce", kwargs)
    with masked(mask):
        _isa.select_reduce(dst, predicate, on_true, on_false, reduce_res=reduce_res,
                           reduce_cmd=_cmd(reduce_cmd, "nisa.select_reduce"), reduce_op=_tok(reduce_op),
                           reverse_pred=reverse_pred)
    return dst


def sequence_bounds(*, segment_ids, dtype=None):
    """``r = nisa.sequence_bounds(*, segment_ids, dtype)``: r (1, 2, n)."""
    dst = _new((segment_ids.shape[0], 2) + tuple(segment_ids.shape[1:]), _dt(dtype, segment_ids))
    _isa.sequence_bounds(dst, segment_ids)
    return dst


# ---- index values --------------------------------------------------------------------------------
def _index_values(expr, op):
    """The integer values of a Beta-1 index expression (``indexing``), as an ndarray."""
    if isinstance(expr, (int, np.integer)):
        return np.asarray(expr).reshape(1, 1)
    try:
        v = np.asarray(expr)
    except Exception as exc:            # an index expression that has no values (part of indexing)
        raise UnsupportedError(op, f"expr {type(expr).__name__} has no integer values here ({exc})",
                               where=None) from None
    if v.dtype.kind not in "iub" or v.ndim == 0:
        raise UnsupportedError(op, f"expr must be an affine index expression of nl.arange/nl.mgrid "
                                   f"(integer values), got {type(expr).__name__}")
    return v.astype(np.int64)


def iota(expr, dtype, *, mask=None, **kwargs):
    """``r = nisa.iota(expr, dtype, *, mask)``: r holds the values of the affine index expression
    ``expr``. One Beta-2 ``nisa.iota(dst, pattern, offset, channel_multiplier)``: the affine form
    (offset, per-partition step, per-free-dim steps) is read off the expression's values and
    checked against all of them (UnsupportedError if the expression is not affine)."""
    _no_kwargs("nisa.iota", kwargs)
    op = "nisa.iota"
    v = _index_values(expr, op)
    if v.ndim == 1:
        v = v.reshape(1, -1)
    offset = int(v.flat[0])
    cm = int(v[1].flat[0] - v[0].flat[0]) if v.shape[0] > 1 else 0
    pattern = []
    for d in range(1, v.ndim):
        ix = [0] * v.ndim
        if v.shape[d] > 1:
            ix[d] = 1
            step = int(v[tuple(ix)] - v.flat[0])
        else:
            step = 0
        pattern.append([step, v.shape[d]])
    grids = np.indices(v.shape)
    want = offset + cm * grids[0] + sum(s * grids[i + 1] for i, (s, _) in enumerate(pattern))
    if not np.array_equal(want, v):
        raise UnsupportedError(op, "expr is not affine in the partition and free indices")
    with masked(mask):
        dst = _new(v.shape, dtype)
        _isa.iota(dst, pattern, offset=offset, channel_multiplier=cm)
    return dst


_CMP = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal", "==": "equal",
        "!=": "not_equal"}


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kwargs):
    """``r = nisa.affine_select(pred, on_true_tile, on_false_value, *, mask, dtype)``: r =
    on_true_tile where the affine predicate ``pred`` holds, else on_false_value.

    A single comparison ``expr <op> value`` of an affine index expression (``indexing``) is one
    Beta-2 ``nisa.affine_select(dst, pattern, channel_multiplier, ..., cmp_op, offset)``: expr -
    value = offset + channel_multiplier * p + sum(step_k * i_k), read off the expression.
    Decision: a conjunction of comparisons (``&``) is two instructions, a memset of
    on_false_value and a tensor_copy of on_true_tile under the mask ``pred``.
    Decision: an on_true_tile in PSUM (nki-samples' flash attention selects straight from a
    matmul's PSUM tile) is first copied to SBUF (one nisa.tensor_copy under the same mask), as
    the GpSimd engine cannot access PSUM; Beta 1's compiler placed such tiles itself.
    Raises UnsupportedError for a predicate that is neither."""
    _no_kwargs("nisa.affine_select", kwargs)
    op = "nisa.affine_select"
    terms = getattr(pred, "terms", None)
    shape = tuple(on_true_tile.shape)
    with masked(mask):
        dst = _new(shape, _dt(dtype, on_true_tile))
        on_true_tile = _staged(on_true_tile)
        if terms is not None and len(terms) == 1:
            expr, cmp = terms[0]
            coefs = (0,) * (len(shape) - len(expr.coefs)) + tuple(expr.coefs)
            if len(coefs) != len(shape):
                raise ShapeError(op, f"pred has {len(expr.coefs)} index axes; on_true_tile has {len(shape)} dims")
            pattern = [[int(c), int(n)] for c, n in zip(coefs[1:], shape[1:])] or [[0, 1]]
            from . import ops as _ops
            _isa.affine_select(dst, pattern, int(coefs[0]), on_true_tile, on_false_value,
                               cmp_op=_ops.TOKENS[_CMP[cmp]], offset=int(expr.const))
            return dst
        if terms is None:
            raise UnsupportedError(op, f"pred must be an affine predicate over nl.arange/nl.mgrid indices, "
                                       f"got {type(pred).__name__}")
        _isa.memset(dst, on_false_value)
    with masked(pred if mask is None else (pred & mask)):
        _isa.tensor_copy(dst, on_true_tile)
    return dst


# ---- tensor engine ----------------------------------------------------------------------------
def _staged(t):
    """``t``, or for a PSUM tile an SBUF copy of it (one nisa.tensor_copy, under the current mask):
    the operand of an engine that reads SBUF only, as Beta 1's compiler placed it."""
    if isinstance(t, NkiTensor) and t.buffer is psum:
        staged = _creation.ndarray(t.shape, t.dtype, buffer=sbuf)
        _isa.tensor_copy(staged, t)
        return staged
    return t


@_targets.assignable("nisa.nc_matmul", sums=True)
def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, perf_mode=None, **kwargs):
    """``r = nisa.nc_matmul(stationary, moving, ...)``: r = stationary.T @ moving, a new fp32 PSUM
    tile (M, N) (with ``is_transpose``: stationary's dtype). ``psum += nisa.nc_matmul(...)``
    accumulates into psum (one matmul with accumulate=True, as the Beta-1 compiler and the Beta-2
    port run it: ``assign_target``; never-written elements of psum count as zero, elements another
    instruction wrote are added to: ``tile.start_sum``), ``psum[...] = ...`` overwrites. ``perf_mode`` (used by the
    SDK's Beta-1 tests, e.g. "double_row_gen3"): Decision: any "double_row..." spelling is Beta-2
    ``matmul_perf_mode.double_row`` (its rules apply), None/"none" is none.
    Decision: an operand in PSUM (nki-samples' flash attention backward multiplies an
    ``nisa.nc_transpose`` result, a PSUM tile) is first copied to SBUF (``_staged``), as the
    Tensor engine reads SBUF only."""
    _no_kwargs("nisa.nc_matmul", kwargs)
    with masked(mask):
        stationary, moving = _staged(stationary), _staged(moving)
        perf = _perf(perf_mode)
        rows = 2 if perf is _e.matmul_perf_mode.double_row else 1     # (K, 2, M) x (K, 2, N) -> (M, N)
        dt = stationary.dtype if is_transpose else _d.float32
        shape = (stationary.free_size // rows, moving.free_size // rows)
        # ``psum += nisa.nc_matmul(...)`` (not a transpose, which overwrites): accumulated in place
        summed = None if is_transpose else _tile.sum_target(shape, dt, "nisa.nc_matmul")
        if summed is not None:
            dst, accumulate = summed
        else:                               # ``psum[...] = nisa.nc_matmul(...)``: written in place
            dst = _targets.take(shape, dt, psum, "nisa.nc_matmul")
            accumulate = None if dst is None else False
            if dst is None:
                dst = _new(shape, dt, psum)
        _isa.nc_matmul(dst, stationary, moving, is_stationary_onezero=is_stationary_onezero,
                       is_moving_onezero=is_moving_onezero, is_transpose=is_transpose,
                       accumulate=accumulate,
                       tile_position=tile_position, tile_size=tile_size, perf_mode=perf)
    return dst


def _perf(mode):
    if mode is None or isinstance(mode, _e.matmul_perf_mode):
        return _e.matmul_perf_mode.none if mode is None else mode
    name = getattr(mode, "value", mode)
    return _e.matmul_perf_mode.double_row if str(name).startswith("double_row") else _e.matmul_perf_mode(name)


def nc_transpose(data, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """``r = nisa.nc_transpose(data, *, mask, dtype, engine)``: r (F, P) = data.T.
    Decision ("the compiler selects an engine based on the input shape"): unknown is the Vector
    engine for a tile of at most 32 x 32 or one in PSUM, else the Tensor engine; a Tensor engine
    result is a PSUM tile, a Vector engine one an SBUF tile. A ``dtype`` other than data's adds a
    tensor_copy (the transpose itself is bit exact)."""
    _no_kwargs("nisa.nc_transpose", kwargs)
    op = "nisa.nc_transpose"
    eng = _engine(engine, op)
    p, f = data.shape[0], data.free_size
    if eng is _e.engine.unknown:
        small = p <= 32 and f <= 32
        eng = _e.engine.vector if small or data.buffer is psum else _e.engine.tensor
    with masked(mask):
        dst = _new((f, p), data.dtype, psum if eng is _e.engine.tensor else sbuf)
        _isa.nc_transpose(dst, data, engine=eng)
        if dtype is not None and np.dtype(dtype) != np.dtype(data.dtype):
            cast = _new(dst.shape, dtype, dst.buffer)
            _isa.tensor_copy(cast, dst)
            dst = cast
    return dst


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, **kwargs):
    """``nisa.nc_stream_shuffle(src, dst, shuffle_mask, *, dtype, mask)`` (Beta 1's order; Beta 2
    takes dst first): writes dst."""
    _no_kwargs("nisa.nc_stream_shuffle", kwargs)
    with masked(mask):
        _isa.nc_stream_shuffle(dst, src, shuffle_mask)


# ---- data movement -----------------------------------------------------------------------------
def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown):
    """``nisa.dma_copy(*, dst, src, mask, dst_rmw_op=None, oob_mode, dge_mode)``: dst = src, or
    ``dst = dst_rmw_op(dst, src)`` (only np.add / nl.add), which is Beta-2
    ``nisa.dma_compute(dst, (src, dst), nl.add)`` (see ``rmw_add`` for duplicate indices)."""
    op = "nisa.dma_copy"
    if dst_rmw_op is not None:
        return rmw_add(op, dst, src, dst_rmw_op, _oob(oob_mode, op), mask)
    with masked(mask):
        _isa.dma_copy(dst, src, oob_mode=_oob(oob_mode, op), dge_mode=_dge(dge_mode, op))


def rmw_add(op, dst, src, rmw_op, oob, mask):
    """``dst = dst + src`` by DMA (Beta-1 ``dma_copy(dst_rmw_op=np.add)``, ``nl.atomic_rmw``): Beta-2
    ``nisa.dma_compute(dst, (src, dst), nl.add)``; ``rmw_op`` must be np.add / nl.add.

    Decision (duplicate rows of an index-tile scatter): the Beta-1 docs say "If duplicated
    offsets are present, the compiler automatically adds synchronization to avoid hazards", and
    ``atomic_rmw`` is atomic, so every duplicate adds: the rows are cut, in order, into
    consecutive runs whose indices are unique, one dma_compute per run (a run ends where an index
    repeats one already in it). Beta 2's dma_compute takes unique indices only. Duplicates under a
    ``mask=`` raise UnsupportedError (the mask's grid is the whole view's, not a run's)."""
    from ..isa.alu import op_name
    name = op_name(_tok(rmw_op), op, "dst_rmw_op" if op == "nisa.dma_copy" else "op")
    if name != "add":
        raise ArgumentError(op, f"{'dst_rmw_op' if op == 'nisa.dma_copy' else 'op'} must be np.add (the only "
                                f"one supported), got {name}")
    from ..memory.indirect import IndirectTensor
    runs = None
    if type(dst) is IndirectTensor and isinstance(src, NkiTensor) and src.shape[:1] == dst.shape[:1]:
        idx = dst.row_indices()
        runs, start, seen = [], 0, set()
        for w, row in enumerate(idx.tolist()):
            if row in seen:
                runs.append((start, w))
                start, seen = w, set()
            seen.add(row)
        runs.append((start, len(idx)))
        if len(runs) == 1:
            runs = None
        elif mask is not None and mask is not True:
            raise UnsupportedError(op, f"a read-modify-write scatter whose index tile repeats a row "
                                       f"(row {int(idx[runs[1][0]])}) under a mask; drop the mask or make "
                                       f"the indices unique")
    if runs is None:
        with masked(mask):
            _isa.dma_compute(dst, (src, dst), _tok(np.add), oob_mode=oob)
        return
    for a, b in runs:
        part = dst.restrict(((a, b),), op)
        _isa.dma_compute(part, (src[a:b], part), _tok(np.add), oob_mode=oob)


def dma_transpose(src, *, axes=None, mask=None, dtype=None, dge_mode=dge_mode.unknown, **kwargs):
    """``r = nisa.dma_transpose(src, *, axes, mask, dtype)``: a new SBUF tile, src's dims permuted
    by ``axes`` (default: reversed)."""
    _no_kwargs("nisa.dma_transpose", kwargs)
    op = "nisa.dma_transpose"
    perm = tuple(axes) if axes is not None else tuple(range(src.ndim))[::-1]
    if sorted(perm) != list(range(src.ndim)):
        raise ShapeError(op, f"axes {perm} is not a permutation of src's {src.ndim} dims")
    with masked(mask):
        dst = _new(tuple(src.shape[a] for a in perm), _dt(dtype, src))
        _isa.dma_transpose(dst, src, axes=axes, dge_mode=_dge(dge_mode, op))
    return dst


def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None):
    """``r = nisa.local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask)``:
    r (P, n * num_elem_per_idx) in src_buffer's dtype, n = num_valid_indices (Decision: by default
    every index of the 16-partition group, 16 x index's free size)."""
    n = num_valid_indices if num_valid_indices is not None else 16 * index.free_size
    shape = (index.shape[0], int(n) * int(num_elem_per_idx))
    with masked(mask):
        dst = _new(shape, src_buffer.dtype)
        _isa.local_gather(dst, src_buffer, index, num_elem_per_idx=num_elem_per_idx,
                          num_valid_indices=num_valid_indices)
    return dst


def get_nc_version():
    """``nisa.get_nc_version()``: the Beta-1 nc_version of the target (an int for a generation
    Beta 1 does not name)."""
    v = int(_isa.get_nc_version())
    return nc_version(v) if v in nc_version._value2member_map_ else v


# ---- documented Beta-1 ops that do not run -----------------------------------------------------
_MISSING = {
    "builtin_custom_op": None,
}


def _missing(name):
    alt = _MISSING[name]

    def fn(*args, **kwargs):
        raise UnsupportedError(f"nisa.{name}", "is a Beta 1 (neuronxcc.nki.isa) op nkisim does not simulate"
                                               + (f"; in Beta 2: {alt}" if alt else ""))
    fn.__name__ = fn.__qualname__ = name
    return fn


globals().update({n: _missing(n) for n in _MISSING})

__all__ = sorted({
    "engine", "dge_mode", "oob_mode", "reduce_cmd", "nc_version", "dma_engine", "fp32", "tensor_engine",
    "vector_engine", "scalar_engine", "gpsimd_engine", "unknown_engine", "activation", "activation_reduce",
    "tensor_tensor", "tensor_scalar", "scalar_tensor_tensor", "tensor_scalar_reduce", "tensor_tensor_scan",
    "reciprocal", "dropout", "tensor_copy", "tensor_copy_predicated", "tensor_copy_dynamic_src",
    "tensor_copy_dynamic_dst", "memset", "tensor_reduce",
    "tensor_partition_reduce", "bn_stats", "bn_aggr", "max8", "nc_find_index8", "nc_match_replace8",
    "range_select", "select_reduce", "sequence_bounds", "iota", "affine_select", "nc_matmul", "nc_transpose",
    "nc_stream_shuffle", "dma_copy", "dma_transpose", "local_gather", "get_nc_version"} | set(_MISSING))
