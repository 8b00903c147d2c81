"""Per-partition search on the Vector engine: ``max8``, ``nc_find_index8``, ``nc_match_replace8``
(the building blocks of top-k).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (max8, nc_find_index8, nc_match_replace8);
duplicate-value order of nc_match_replace8 from the v2.32 API page. Imports memory, checks,
dispatch (each op is an ``@instruction`` spec: static rules, compute).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import DtypeError, ShapeError
from ..memory.access import read_f32, read_raw, write
from ..memory.tensor import NkiTensor
from .copy import stored_scalar
from .dispatch import Passed, instruction
from .enums import engine as _engine
from .operands import pf

F32 = np.float32
_K = 8                                   # values per partition of every *8 op
_INDEX_DTYPES = ("uint16", "uint32")


def _max8_rules(ins, dst, src, name):
    """max8's rules (see its docstring)."""
    op, t = ins.op, ins.target
    _operand(op, "src", src, t, max_dims=3, min_free=t.search_fmin)
    _dst8(op, "dst", dst, src.shape[0])
    return Passed(_engine.vector)


def _max8_compute(ins, dst, src, name):
    x = pf(read_f32(src))
    write(dst, np.take_along_axis(x, _top8(x), axis=1))


def _top8(x: np.ndarray) -> np.ndarray:
    """(P, 8) indices of the 8 largest values per row of ``x`` (P, F) float32, in descending order,
    NaN below every number, equal values (-0.0 == 0.0) in index order: exactly
    ``np.argsort(-x, kind="stable")[:, :8]``, in O(F): an argpartition of -x where the 8th
    largest value has no tie (nkisim's profile of nki-library's top-k: 4x faster), else a
    partition of unique int64 keys (``_top8_keys``)."""
    p, f = x.shape
    if f <= 64:
        return np.argsort(-x, axis=1, kind="stable")[:, :_K]
    # Fast path (speed; the same indices): a row whose 8 smallest of -x (np.argpartition, NaN
    # last: below every number, and -0.0 == 0.0) are the only values at most the largest of them
    # (no tie across the 8th, no NaN among them) takes them in index order, stably sorted by
    # value; the other rows take the exact keys of _top8_keys.
    neg = -x
    idx = np.argpartition(neg, _K - 1, axis=1)[:, :_K]
    kth = np.take_along_axis(neg, idx, axis=1).max(axis=1, keepdims=True)     # NaN: fewer numbers
    ok = np.count_nonzero(neg <= kth, axis=1) == _K
    if ok.all():
        cols = np.sort(idx, axis=1)
        return np.take_along_axis(cols, np.argsort(np.take_along_axis(neg, cols, axis=1), axis=1,
                                                    kind="stable"), axis=1)
    out = np.empty((p, _K), np.int64)
    rows = np.flatnonzero(ok)
    if rows.size:
        cols = np.sort(idx[rows], axis=1)
        out[rows] = np.take_along_axis(cols, np.argsort(np.take_along_axis(neg[rows], cols, axis=1),
                                                        axis=1, kind="stable"), axis=1)
    rest = np.flatnonzero(~ok)
    out[rest] = _top8_keys(x[rest])
    return out


def _top8_keys(x: np.ndarray) -> np.ndarray:
    """``_top8`` of any rows (P, F > 64): a partition of unique int64 keys."""
    p, f = x.shape
    neg = -x + F32(0.0)                                  # -0.0 -> 0.0: equal values, one key
    neg[np.isnan(neg)] = F32(np.nan)                     # one NaN pattern, ordered last
    bits = neg.view(np.uint32).astype(np.int64)
    ordered = np.where(bits >= 1 << 31, (1 << 32) - 1 - bits, bits + (1 << 31))   # float order
    key = ordered * f + np.arange(f, dtype=np.int64)
    top = np.sort(np.partition(key, _K - 1, axis=1)[:, :_K], axis=1)
    return top % f


@instruction(reads=("src",), writes=("dst",), rules=_max8_rules, compute=_max8_compute)
def max8(dst, src, name=None):
    """dst[p, :] = the 8 largest values of src[p, ...] (fp32 compare), in descending order.

    Shapes: src (P, F...) with at most 3 dims and search_fmin..search_fmax (8..16384) elements
    per partition; dst (P, 8). Dtypes: any; values rounded once into dst.dtype.
    Decision: NaN ranks below every number (-inf included); equal values keep their order.
    Buffers: SBUF or PSUM. Engine: Vector (Decision: the docs name no engine for max8 or
    nc_find_index8; nc_match_replace8, their sibling, runs "using the Vector engine").
    Raises: ShapeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (max8).
    """


def _fi8_rules(ins, dst, data, vals, name):
    """nc_find_index8's rules (see its docstring)."""
    op, t = ins.op, ins.target
    _operand(op, "data", data, t, max_dims=3, min_free=t.search_fmin)
    p = data.shape[0]
    _vals(op, vals, p)
    _dst8(op, "dst", dst, p)
    rules.dtype_in(op, "dst", dst, _INDEX_DTYPES, t)
    return Passed(_engine.vector)


def _fi8_compute(ins, dst, data, vals, name):
    pos = _match(pf(read_f32(data)), pf(read_f32(vals)), reverse=False)
    write(dst, np.where(pos < 0, np.iinfo(dst.dtype).max, pos))


@instruction(reads=("data", "vals"), writes=("dst",), rules=_fi8_rules, compute=_fi8_compute)
def nc_find_index8(dst, data, vals, name=None):
    """dst[p, i] = index (flattened free, from 0) of the first occurrence of vals[p, i] in data[p].

    Equal values compare in fp32 (-0.0 == 0.0; NaN matches nothing). Duplicate vals map to
    successive occurrences in ascending order (the k-th copy of a value gets its k-th match). A
    value with no (remaining) occurrence gets all ones (0xFFFF / 0xFFFFFFFF).
    Shapes: data (P, F...) with at most 3 dims and 8..16384 (search_fmin..search_fmax) elements per
    partition; vals (P, ...) at most 3 dims with 8 elements per partition; dst (P, 8).
    Dtypes: dst uint32 or uint16. Buffers: SBUF or PSUM. Engine: Vector (Decision: as for max8).
    Raises: ShapeError, DtypeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_find_index8).
    """


def _mr8_rules(ins, dst, data, vals, imm, dst_idx, name):
    """nc_match_replace8's rules (see its docstring)."""
    op, t = ins.op, ins.target
    _operand(op, "data", data, t, max_dims=5, min_free=0)
    p = data.shape[0]
    _vals(op, vals, p)
    rules.tensor(op, "dst", dst)
    rules.on_chip(op, "dst", dst)
    rules.same_tile(op, "data", data, "dst", dst)
    if isinstance(imm, NkiTensor) or np.ndim(imm) != 0:
        raise ShapeError(op, f"imm must be a scalar, got {type(imm).__name__}")
    if dst_idx is not None:
        rules.tensor(op, "dst_idx", dst_idx)
        rules.on_chip(op, "dst_idx", dst_idx)
        if dst_idx.shape[0] != p or dst_idx.free_size != _K:
            raise ShapeError(op, f"dst_idx shape {dst_idx.shape} must have {p} partitions and {_K} "
                                 f"elements per partition")
        if not _dt.is_int(dst_idx.dtype):
            raise DtypeError(op, f"dst_idx dtype {_dt.name(dst_idx.dtype)} is not an integer dtype")
    return Passed(_engine.vector)


def _mr8_compute(ins, dst, data, vals, imm, dst_idx, name):
    x = pf(read_f32(data))
    pos = _match(x, pf(read_f32(vals)), reverse=True)
    if data.dtype == dst.dtype:               # unreplaced elements keep their bits
        out, fill = pf(read_raw(data)).copy(), stored_scalar(dst, imm)
    else:
        out, fill = x.copy(), F32(imm)
    rows, cols = np.nonzero(pos >= 0)
    out[rows, pos[rows, cols]] = fill
    write(dst, out)
    if dst_idx is not None:
        ones = np.iinfo(dst_idx.dtype).max if dst_idx.dtype.kind == "u" else -1
        write(dst_idx, np.where(pos < 0, ones, pos))


@instruction(reads=("data", "vals"), writes=("dst", "dst_idx"), rules=_mr8_rules, compute=_mr8_compute)
def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    """dst = data with the first occurrence of each vals[p, i] replaced by ``imm``; dst_idx[p, i]
    (optional) = the index (flattened free) of that occurrence.

    vals are processed in reverse order (i = 7..0) and each data position matches at most once,
    so among duplicate vals the earliest matching position goes to the highest slot (data
    [1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8], vals [3, 8, 8, 8, 8, 8, 8, 8] -> dst_idx
    [2, 10, 9, 8, 7, 6, 5, 4]); the opposite of nc_find_index8. Values compare in fp32.
    Decision: a value with no (remaining) occurrence leaves data as is and gets the all-ones
    pattern of dst_idx's dtype (0xFFFFFFFF, or -1 for a signed dtype).
    Shapes: data (P, F...) at most 5 dims and at most 16384 elements per partition; dst like data
    (same partitions and elements per partition); vals (P, ...) at most 3 dims with 8 elements
    per partition; dst_idx (P, ...) with 8 elements per partition.
    Dtypes: ``imm`` an fp32 scalar rounded once into dst.dtype; unreplaced elements keep their
    bits when dst.dtype == data.dtype, else go via fp32; dst_idx an integer dtype. Buffers: SBUF or PSUM.
    Engine: Vector ("using the Vector engine").
    Raises: ShapeError, DtypeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_match_replace8), v2.32 API page.
    """


def _operand(op, name, x, t, max_dims, min_free):
    rules.tensor(op, name, x)
    rules.on_chip(op, name, x)
    rules.partitions(op, name, x, t)
    if x.ndim > max_dims:
        raise ShapeError(op, f"{name} has {x.ndim} dims, at most {max_dims}")
    if x.free_size < min_free:
        raise ShapeError(op, f"{name} has {x.free_size} elements per partition, needs at least "
                             f"{min_free} on {t.name}")
    rules.at_most(op, f"{name} elements per partition", x.free_size, t.search_fmax, t)


def _vals(op, vals, p):
    rules.tensor(op, "vals", vals)
    rules.on_chip(op, "vals", vals)
    if vals.ndim > 3:
        raise ShapeError(op, f"vals has {vals.ndim} dims, at most 3")
    if vals.shape[0] != p or vals.free_size != _K:
        raise ShapeError(op, f"vals shape {vals.shape} must have {p} partitions and {_K} elements "
                             f"per partition")


def _dst8(op, name, dst, p):
    rules.tensor(op, name, dst)
    rules.on_chip(op, name, dst)
    if dst.shape != (p, _K):
        raise ShapeError(op, f"{name} shape {dst.shape} must be ({p}, {_K})")


def _match(x: np.ndarray, v: np.ndarray, reverse: bool) -> np.ndarray:
    """(P, 8) positions in ``x`` (P, F) of each ``v`` (P, 8), -1 where absent. The k-th copy of a
    value (counted from slot 0 up, or from slot 7 down when ``reverse``) takes its k-th match."""
    same = v[:, :, None] == v[:, None, :]
    earlier = np.tril(same, -1) if not reverse else np.triu(same, 1)
    rank = earlier.sum(axis=2)                       # copies of v[p, i] that claim a match first
    pos = np.full(v.shape, -1, np.int64)
    rows = np.arange(x.shape[0])
    for i in range(v.shape[1]):
        eq = x == v[:, i:i + 1]
        if rank[:, i].any():                             # a repeated value: its k-th match
            eq &= np.cumsum(eq, axis=1, dtype=np.int32) == rank[:, i:i + 1] + 1
        first = eq.argmax(axis=1)                        # the first match (0 when none)
        pos[:, i] = np.where(eq[rows, first], first, -1)
    return pos

__all__ = ["max8", "nc_find_index8", "nc_match_replace8"]
