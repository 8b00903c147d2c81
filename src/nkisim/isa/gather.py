"""Cross-partition movement and gathers: ``nc_stream_shuffle`` (VectorE quadrant shuffle),
``nc_n_gather`` and ``local_gather`` (GpSimd gathers), ``nonzero_with_count``, ``sequence_bounds``
and ``topk`` (GpSimd).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (each op's docstring), the example tests
nki/test/test_nki_isa_{nc_stream_shuffle,local_gather,sequence_bounds}.py, and
nki/guides/architecture/trainium_inferentia2_arch.rst ("Cross-partition Data Movement").
Imports memory, checks, dispatch (each op is an ``@instruction`` spec: static rules, compute).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import ArgumentError, BoundsError, DtypeError, ShapeError, UnsupportedError
from ..memory.access import read_raw, write
from ..memory.tensor import NkiTensor
from .dispatch import Passed, instruction
from .enums import engine as _engine
from .operands import pf

SHUFFLE_KEEP = 255          # nc_stream_shuffle mask value: "the output tensor in partition [i] will be unmodified"
_INT32 = np.iinfo(np.int32)


def start_partition(t: NkiTensor) -> int:
    """The first partition an on-chip view accesses: its offset within the allocation in whole
    partitions, plus the allocation's ``address`` partition offset when the kernel gave one."""
    alloc = t.alloc
    per_part = math.prod(alloc.shape[1:]) * alloc.dtype.itemsize // t.dtype.itemsize
    base = alloc.address[0] if alloc.address is not None else 0
    return int(base) + (t.offset // per_part if per_part else 0)


# ---- nc_stream_shuffle ------------------------------------------------------------------------

def _shuffle_rules(ins, dst, src, shuffle_mask, name):
    """nc_stream_shuffle's rules (see its docstring): the mask as a tuple of ints."""
    op, t = ins.op, ins.target
    rules.tiles(op, t, dst=dst, src=src)
    if dst.dtype != src.dtype:
        raise DtypeError(op, f"dst dtype {_dt.name(dst.dtype)} must equal src dtype {_dt.name(src.dtype)}")
    if dst.free_size != src.free_size:
        raise ShapeError(op, f"dst has {dst.free_size} elements per partition, src has {src.free_size}; "
                             f"they must match")
    q = t.shuffle_quadrant
    try:
        mask = tuple(operator.index(m) for m in shuffle_mask)
    except TypeError:
        raise ArgumentError(op, f"shuffle_mask must be a list of {q} ints, got {shuffle_mask!r}") from None
    if len(mask) != q:
        raise ArgumentError(op, f"shuffle_mask has {len(mask)} elements; it must have {q}")
    for i, m in enumerate(mask):
        if not (0 <= m < q or m == SHUFFLE_KEEP):
            raise ArgumentError(op, f"shuffle_mask[{i}] is {m}; it must be a source partition 0..{q - 1} "
                                    f"or {SHUFFLE_KEEP} (leave the output partition unmodified)")
    active = -(-max(src.shape[0], dst.shape[0]) // q) * q
    for i, m in enumerate(mask):
        if m == SHUFFLE_KEEP:
            continue
        quads = [k for k in range(active // q) if k * q + i < dst.shape[0]]
        for k in quads:
            if k * q + m >= src.shape[0]:
                raise BoundsError(op, f"shuffle_mask[{i}] = {m} reads src partition {k * q + m} of quadrant "
                                      f"{k}, but src has {src.shape[0]} partitions")
    return Passed(_engine.vector, (mask, active))


def _shuffle_compute(ins, dst, src, shuffle_mask, name):
    mask, active = ins.info
    op, t = ins.op, ins.target
    q = t.shuffle_quadrant
    allowed = {q: range(0, t.pmax, q), 2 * q: (0, 2 * q)}.get(active, (0,))
    for nm, x in (("src", src), ("dst", dst)):
        s = start_partition(x)
        if s not in allowed:
            raise ShapeError(op, f"{nm} starts at partition {s}; with {active} active partitions the start "
                                 f"partition must be {' or '.join(map(str, allowed))}")
    values = pf(read_raw(src))
    p = dst.shape[0]
    srcs = [k * q + m for k in range(active // q) for i, m in enumerate(mask) if k * q + i < p]
    outs = [k * q + i for k in range(active // q) for i, m in enumerate(mask) if k * q + i < p]
    moved = [(o, s) for o, s in zip(outs, srcs) if mask[o % q] != SHUFFLE_KEEP]
    if len(moved) == p:
        write(dst, values[[s for _, s in moved]])
        return
    new = values[[s for _, s in moved]] if moved else values[:0]
    # runs of consecutive modified output partitions, each one write (kept partitions untouched)
    start = 0
    while start < len(moved):
        end = start + 1
        while end < len(moved) and moved[end][0] == moved[end - 1][0] + 1:
            end += 1
        o0 = moved[start][0]
        write(dst[o0:o0 + end - start], new[start:end])
        start = end
    ins.note(kept=p - len(moved))


@instruction(reads=("src",), writes=("dst",), rules=_shuffle_rules, compute=_shuffle_compute)
def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """dst[k*32 + i] = src[k*32 + shuffle_mask[i]] for each quadrant k of 32 partitions (VectorE).

    ``shuffle_mask``: 32 ints, each a source partition 0..31 within the quadrant, or 255 (output
    partition i is left unmodified); the same mask applies to every quadrant. In place (dst is
    src) is allowed: src is read before dst is written.
    Shapes: dst, src (P, F...), P <= pmax, same elements per partition (free shapes may differ).
    Quadrants: num_active = ceil(max(src partitions, dst partitions) / 32) * 32; the start
    partition of src and of dst must be 0 when num_active is 96 or 128, 0 or 64 when it is 64,
    and 0, 32, 64 or 96 when it is 32 (checked when the instruction runs: an ``address`` given to
    ``nl.ndarray`` counts).
    Decision: output partitions at or past dst's partition count are not written (a dst of 1..31
    partitions takes the first mask entries); a mask entry that would read past src's partition
    count (e.g. entry 5 with a 1-partition src) raises BoundsError (the docs' examples only read
    partitions the src tile covers).
    Dtypes: dst.dtype == src.dtype; copied bit-exactly. Buffers: SBUF or PSUM. Engine: Vector.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError (mask), BoundsError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_stream_shuffle);
    nki/guides/architecture/trainium_inferentia2_arch.rst (Cross-partition Data Movement).
    """


# ---- nc_n_gather ------------------------------------------------------------------------------

def _n_gather_rules(ins, dst, data, indices, name):
    """nc_n_gather's rules (see its docstring)."""
    op, t = ins.op, ins.target
    for nm, x in (("dst", dst), ("data", data), ("indices", indices)):
        rules.tensor(op, nm, x)
        rules.sbuf_only(op, nm, x)
        rules.partitions(op, nm, x, t)
    for nm, x in (("data", data), ("indices", indices)):
        if x.shape[0] != dst.shape[0]:
            raise ShapeError(op, f"{nm} partition dim {x.shape[0]} does not match dst partition dim "
                                 f"{dst.shape[0]}")
    if dst.dtype != data.dtype:
        raise DtypeError(op, f"dst dtype {_dt.name(dst.dtype)} must equal data dtype {_dt.name(data.dtype)}")
    if _dt.name(indices.dtype) != "uint32":
        raise DtypeError(op, f"indices dtype {_dt.name(indices.dtype)} must be uint32")
    if dst.free_size != indices.free_size:
        raise ShapeError(op, f"dst has {dst.free_size} elements per partition, indices has "
                             f"{indices.free_size}; they must match")
    return Passed(_engine.gpsimd)


def _n_gather_compute(ins, dst, data, indices, name):
    x = pf(read_raw(data))
    idx = pf(read_raw(indices)).astype(np.int64)
    n = x.shape[1]
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        p, j = (int(v[0]) for v in np.nonzero(bad))
        raise BoundsError(ins.op, f"indices[{p}, {j}] = {int(idx[p, j])} is outside 0:{n} (data has {n} "
                                  f"elements per partition)")
    write(dst, np.take_along_axis(x, idx, axis=1))


@instruction(reads=("data", "indices"), writes=("dst",), rules=_n_gather_rules, compute=_n_gather_compute)
def nc_n_gather(dst, data, indices, name=None):
    """dst[p, j] = data_flat[p, indices_flat[p, j]]: a gather within each partition (GpSimd).

    ``data``'s free dims are flattened for indexing; ``indices``' free shape is dst's order.
    Shapes: dst, data, indices the same partition count (<= pmax); dst and indices the same
    elements per partition. Index values must lie in [0, data elements per partition): they are
    runtime data, checked when the instruction runs (BoundsError).
    Dtypes: dst.dtype == data.dtype (copied bit-exactly); indices uint32.
    Buffers: all in SBUF ("GpSimd Engine cannot access PSUM"). Engine: GpSimd.
    Raises: ShapeError, DtypeError, MemorySpaceError, BoundsError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_n_gather).
    """


# ---- local_gather -----------------------------------------------------------------------------

def _local_gather_rules(ins, dst, src_buffer, index, num_elem_per_idx, num_valid_indices, name):
    """local_gather's rules (see its docstring): (indices per core, elements per index)."""
    op, t = ins.op, ins.target
    g = t.gpsimd_group
    for nm, x in (("dst", dst), ("src_buffer", src_buffer), ("index", index)):
        rules.tensor(op, nm, x)
        rules.sbuf_only(op, nm, x)
        rules.partitions(op, nm, x, t)
    p = src_buffer.shape[0]
    if index.shape[0] != p:
        raise ShapeError(op, f"index partition dim {index.shape[0]} must equal src_buffer partition dim {p}")
    if p % g:
        raise ShapeError(op, f"src_buffer partition dim {p} must be a multiple of {g} (partitions per "
                             f"GpSimd core)")
    if dst.shape[0] != p:
        raise ShapeError(op, f"dst partition dim {dst.shape[0]} must equal src_buffer partition dim {p}")
    if dst.dtype != src_buffer.dtype:
        raise DtypeError(op, f"dst dtype {_dt.name(dst.dtype)} must equal src_buffer dtype "
                             f"{_dt.name(src_buffer.dtype)} (no casting)")
    if _dt.name(index.dtype) != "uint16":
        raise DtypeError(op, f"index dtype {_dt.name(index.dtype)} must be uint16")
    e = _int_param(op, "num_elem_per_idx", num_elem_per_idx)
    if e not in t.local_gather_elems:
        raise ArgumentError(op, f"num_elem_per_idx {e} must be one of {list(t.local_gather_elems)}")
    per_core = index.free_size * g
    nv = per_core if num_valid_indices is None else _int_param(op, "num_valid_indices", num_valid_indices)
    if not 0 <= nv <= per_core:
        raise ShapeError(op, f"num_valid_indices {nv} exceeds the {per_core} indices in each {g}-partition "
                             f"slice of index {index.shape}")
    rules.at_most(op, "indices per GpSimd core", nv, t.local_gather_indices_max, t)
    if dst.free_size != nv * e:
        raise ShapeError(op, f"dst has {dst.free_size} elements per partition; it must hold num_valid_indices "
                             f"* num_elem_per_idx = {nv} * {e} = {nv * e}")
    return Passed(_engine.gpsimd, (nv, e))


def _local_gather_compute(ins, dst, src_buffer, index, num_elem_per_idx, num_valid_indices, name):
    nv, e = ins.info
    g = ins.target.gpsimd_group
    x = pf(read_raw(src_buffer))
    idx = pf(read_raw(index)).astype(np.int64)
    p, n = x.shape
    out = np.empty((p, nv * e), x.dtype)
    cols = np.arange(e, dtype=np.int64)
    for c in range(p // g):
        flat = idx[c * g:(c + 1) * g].reshape(-1, order="F")[:nv]     # partition dim first
        bad = (flat < 0) | (flat + e > n)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise BoundsError(ins.op, f"index {int(flat[j])} (GpSimd core {c}, index {j}) with "
                                      f"num_elem_per_idx {e} reads past the {n} elements per partition "
                                      f"of src_buffer")
        take = (flat[:, None] + cols[None, :]).reshape(-1)
        out[c * g:(c + 1) * g] = x[c * g:(c + 1) * g][:, take]
    write(dst, out)


@instruction(reads=("src_buffer", "index"), writes=("dst",), rules=_local_gather_rules,
             compute=_local_gather_compute)
def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """dst[p, j*E:(j+1)*E] = src_flat[p, i_j : i_j + E] for every p of GpSimd core c's 16
    partitions, with i = index[16c:16c+16] flattened partition dim first, first num_valid_indices.

    Each of the 8 GpSimd cores serves 16 consecutive partitions and gathers from them with the
    indices in those same 16 partitions, independently of the other cores. E =
    ``num_elem_per_idx`` (1, 2, 4, 8, 16 or 32) contiguous elements per index; indices are element
    offsets into src_buffer's flattened free dims (the docs' example passes ``index *
    num_elem_per_idx`` to gather E-element rows). ``num_valid_indices`` defaults to all indices of
    a 16-partition slice (16 * index elements per partition) and may not exceed it; at most 4096
    per core.
    Shapes: src_buffer and index the same partition count, a multiple of 16 (<= pmax); dst that
    partition count and num_valid_indices * E elements per partition (Decision: the docs' example
    shapes dst (128, 4, 16, 4) for 64 indices x 4 elements; any free shape of that size).
    Dtypes: dst.dtype == src_buffer.dtype (copied bit-exactly); index uint16.
    Decision: an index reaching past src_buffer's elements per partition raises BoundsError (the
    docs: "Behavior of out-of-bound index access is undefined").
    Buffers: all in SBUF. Engine: GpSimd.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError, BoundsError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (local_gather),
    nki/test/test_nki_isa_local_gather.py (its NumPy semantics).
    """


# ---- nonzero_with_count -----------------------------------------------------------------------

def _nonzero_rules(ins, dst, src, index_offset, padding_val, name):
    """nonzero_with_count's rules (see its docstring)."""
    op, t = ins.op, ins.target
    if not t.nonzero_with_count:
        raise UnsupportedError(op, f"nonzero_with_count needs NeuronCore-v3 (trn2) or newer, not {t.name}")
    for nm, x in (("dst", dst), ("src", src)):
        rules.tensor(op, nm, x)
        rules.sbuf_only(op, nm, x)
        rules.partitions(op, nm, x, t)
    if dst.shape[0] != src.shape[0]:
        raise ShapeError(op, f"dst partition dim {dst.shape[0]} does not match src partition dim {src.shape[0]}")
    rules.dtype_in(op, "src", src, ("float32", "int32"), t)
    rules.dtype_in(op, "dst", dst, ("int32",), t)
    if dst.free_size != src.free_size + 1:
        raise ShapeError(op, f"dst has {dst.free_size} elements per partition; it must have src's "
                             f"{src.free_size} + 1 (the count)")
    _int_param(op, "index_offset", index_offset, int32=True)
    _int_param(op, "padding_val", padding_val, int32=True)
    return Passed(_engine.gpsimd)


def _nonzero_compute(ins, dst, src, index_offset, padding_val, name):
    g = ins.target.gpsimd_group
    first = start_partition(src)
    rows = [p for p in range(src.shape[0]) if (first + p) % g == 0]
    if not rows:
        return
    n = src.free_size
    out = np.full((len(rows), n + 1), int(padding_val), np.int64)
    for r, p in enumerate(rows):                    # only the partitions the GpSimd cores read
        hit = np.flatnonzero(pf(read_raw(src[p:p + 1]))[0] != 0)
        out[r, :hit.size] = hit + int(index_offset)
        out[r, n] = hit.size
    out = out.astype(np.uint32).view(np.int32)      # int32 arithmetic wraps (Decision)
    for r, p in enumerate(rows):
        write(dst[p:p + 1], out[r:r + 1])
    ins.note(partitions=tuple(rows))


@instruction(reads=("src",), writes=("dst",), rules=_nonzero_rules, compute=_nonzero_compute)
def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """For each partition p read: dst[p] = [i + index_offset for nonzero src[p, i]] + padding_val
    * (T - N) + [N], over src's T flattened elements per partition (GpSimd).

    Only partitions whose physical index is a multiple of 16 (each GpSimd core's 0-th partition:
    0, 16, ..., 112) are read and written; every other src partition is not read (no
    uninitialised-read report) and every other dst partition is left untouched.
    Shapes: src and dst the same partition count (<= pmax); dst has src's elements per partition
    + 1. Dtypes: src float32 or int32 (nonzero: != 0; Decision: NaN counts as nonzero, -0.0 as
    zero); dst int32; index_offset and padding_val int32 (Decision: the sums wrap modulo 2**32).
    Buffers: SBUF. Engine: GpSimd. Targets: trn2 and newer ("Available only on NeuronCore-v3 and
    newer"); UnsupportedError on trn1.
    Raises: ShapeError, DtypeError, MemorySpaceError, UnsupportedError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nonzero_with_count).
    """


# ---- sequence_bounds --------------------------------------------------------------------------

def _seq_rules(ins, dst, segment_ids, name):
    """sequence_bounds's rules (see its docstring)."""
    op, t = ins.op, ins.target
    for nm, x in (("dst", dst), ("segment_ids", segment_ids)):
        rules.tensor(op, nm, x)
        rules.sbuf_only(op, nm, x)
        rules.dtype_in(op, nm, x, ("float32", "int32"), t)
        if x.shape[0] != 1:
            raise ShapeError(op, f"{nm} partition dim is {x.shape[0]}; it must be 1")
    n = segment_ids.free_size
    if dst.free_size != 2 * n:
        raise ShapeError(op, f"dst has {dst.free_size} elements per partition; it must be (1, 2, {n}): a "
                             f"start and an end index per segment id")
    return Passed(_engine.gpsimd)


def _seq_compute(ins, dst, segment_ids, name):
    ids = pf(read_raw(segment_ids))[0]
    if _dt.is_float(segment_ids.dtype):
        ids = ids.astype(np.float32)
    n = ids.size
    if (ids < 0).any():
        j = int(np.flatnonzero(ids < 0)[0])
        raise ArgumentError(ins.op, f"segment_ids[0, {j}] is {ids[j]}; segment ids must be non-negative")
    pad = ids == 0
    pos = np.arange(n, dtype=np.int64)
    new_run = np.ones(n, bool)
    new_run[1:] = ids[1:] != ids[:-1]
    starts = np.maximum.accumulate(np.where(new_run, pos, 0))
    run_end = np.ones(n, bool)
    run_end[:-1] = ids[:-1] != ids[1:]
    ends = np.minimum.accumulate(np.where(run_end, pos + 1, n)[::-1])[::-1]
    values = np.stack([np.where(pad, n, starts), np.where(pad, -1, ends)]).reshape(1, 2 * n)
    write(dst, values.astype(np.int32) if _dt.is_int(dst.dtype) else values.astype(np.float32))


@instruction(reads=("segment_ids",), writes=("dst",), rules=_seq_rules, compute=_seq_compute)
def sequence_bounds(dst, segment_ids, name=None):
    """dst[0, 0, i] = first index of the run of equal ids holding i, dst[0, 1, i] = one past its
    last index; padding (id 0) gets start n and end -1 (n = number of segment ids) (GpSimd).

    A segment is a run of consecutive equal ids (the docs' reference compares neighbours).
    Shapes: segment_ids (1, n); dst (1, 2, n) (Decision: any free shape of 2n elements, starts
    first). Dtypes: both float32 or int32 (values written exactly; large n as fp32 rounds).
    Ids are runtime data: a negative id raises ArgumentError when the instruction runs.
    Buffers: SBUF (Decision: the docs are silent; GpSimd cannot access PSUM). Engine: GpSimd.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (sequence_bounds),
    nki/test/test_nki_isa_sequence_bounds.py (its NumPy reference and example).
    """


# ---- topk -------------------------------------------------------------------------------------

def _topk_rules(ins, val_dst, idx_dst, src, n, name):
    """topk's rules (see its docstring): (n, K)."""
    op, t = ins.op, ins.target
    g = t.gpsimd_group
    for nm, x in (("val_dst", val_dst), ("idx_dst", idx_dst), ("src", src)):
        rules.tensor(op, nm, x)
        rules.sbuf_only(op, nm, x)
        rules.partitions(op, nm, x, t)
        if x.ndim != 2:
            raise ShapeError(op, f"{nm} shape {x.shape} must be 2-D [par_dim, free]")
    p = src.shape[0]
    if p % g:
        raise ShapeError(op, f"src partition dim {p} must be a multiple of {g}")
    rules.dtype_in(op, "src", src, ("bfloat16",), t)
    rules.dtype_in(op, "val_dst", val_dst, ("bfloat16",), t)
    rules.dtype_in(op, "idx_dst", idx_dst, ("uint32",), t)
    k = val_dst.shape[1]
    for nm, x in (("val_dst", val_dst), ("idx_dst", idx_dst)):
        if x.shape != (p, k):
            raise ShapeError(op, f"{nm} shape {x.shape} must be ({p}, {k}): src's partitions and val_dst's K")
    nv = _int_param(op, "n", n)
    lo, hi = t.topk_n_range
    if not lo <= nv < hi:
        raise ShapeError(op, f"n {nv} must satisfy {lo} <= n < {hi}")
    if not 1 <= k < t.topk_k_max or k > nv:
        raise ShapeError(op, f"K {k} (val_dst free dim) must satisfy 1 <= K < {t.topk_k_max} and K <= n ({nv})")
    cols = -(-nv // g)
    if src.shape[1] < cols:
        raise ShapeError(op, f"src free dim {src.shape[1]} must be at least ceil(n / {g}) = {cols}")
    return Passed(_engine.gpsimd, (nv, k))


def _topk_compute(ins, val_dst, idx_dst, src, n, name):
    nv, k = ins.info
    g = ins.target.gpsimd_group
    p = src.shape[0]
    cols = -(-nv // g)
    rem = nv - (cols - 1) * g             # active partitions of the snake's last column
    x = np.zeros((p, cols), np.float32)   # only the n active elements are read
    if cols > 1:
        x[:, :cols - 1] = read_raw(src[:, 0:cols - 1])
    for b in range(0, p, g):
        x[b:b + rem, cols - 1] = read_raw(src[b:b + rem, cols - 1:cols]).reshape(-1)
    kc = -(-k // g)                       # columns the K outputs occupy in the output snake
    vals = np.empty((p, kc), np.float32)
    idxs = np.empty((p, kc), np.uint32)
    for b in range(0, p, g):
        snake = x[b:b + g].T.reshape(-1)[:nv]          # position s = partition s % 16, column s // 16
        key = np.where(np.isnan(snake), -np.inf, snake)
        order = np.lexsort((np.arange(nv), np.isnan(snake), -key))[:k][::-1]   # top K, ascending
        pad = np.zeros(kc * g, np.int64)
        pad[:k] = order
        full_v = snake[pad]
        vals[b:b + g] = full_v.reshape(kc, g).T
        idxs[b:b + g] = pad.astype(np.uint32).reshape(kc, g).T
    # rank j lands at partition b + j % 16, column j // 16; slots past K in the last column and
    # columns past ceil(K / 16) are not written
    full = k == kc * g
    if full:
        write(val_dst[:, 0:kc], vals)
        write(idx_dst[:, 0:kc], idxs)
    else:
        last = k - (kc - 1) * g           # ranks in the last output column
        if kc > 1:
            write(val_dst[:, 0:kc - 1], vals[:, :kc - 1])
            write(idx_dst[:, 0:kc - 1], idxs[:, :kc - 1])
        for b in range(0, p, g):
            write(val_dst[b:b + last, kc - 1:kc], vals[b:b + last, kc - 1:kc])
            write(idx_dst[b:b + last, kc - 1:kc], idxs[b:b + last, kc - 1:kc])


@instruction(reads=("src",), writes=("val_dst", "idx_dst"), rules=_topk_rules, compute=_topk_compute)
def topk(val_dst, idx_dst, src, n, name=None):
    """The K = val_dst.shape[1] largest of the n values in each 16-partition snake of ``src``,
    ascending, with their snake positions (GpSimd).

    Snake layout (the docs): in each group of 16 partitions, position s is partition s % 16,
    column s // 16; the first ``n`` positions are the active elements. Decision (the docs say
    both "Each partition operates independently" and that the source is one 16-partition snake,
    and do not place the outputs; nki-library's gpsimd top-k "de-snakes" them): the outputs of a
    group form a snake too -- rank j (j = 0 the smallest of the K, ascending) lands at partition
    16g + j % 16, column j // 16, in val_dst (value) and idx_dst (its 0-based snake position);
    the other elements of val_dst and idx_dst are left untouched. Decision: ties rank the lower
    snake position higher; NaN ranks below every number.
    Shapes: src [par_dim, src_x] with par_dim a multiple of 16 (<= pmax) and src_x >=
    ceil(n / 16) (only the n active elements of each snake are read); val_dst and idx_dst
    [par_dim, K]. 8 <= n < 65536; 1 <= K < 32768, K <= n.
    Dtypes: src and val_dst bfloat16 (values copied exactly); idx_dst uint32.
    Buffers: all in SBUF. Engine: GpSimd.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError (n not an int).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (topk); nki/library/api/gpsimd-topk.rst.
    """


# ---- helpers ----------------------------------------------------------------------------------

def _int_param(op: str, name: str, value, int32: bool = False) -> int:
    """A compile-time integer parameter (not a bool), optionally in the int32 range."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, NkiTensor):
        raise ArgumentError(op, f"{name} must be an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise ArgumentError(op, f"{name} must be an int, got {value!r}") from None
    if int32 and not _INT32.min <= v <= _INT32.max:
        raise DtypeError(op, f"{name} {v} is outside the int32 range")
    return v


__all__ = ["nc_stream_shuffle", "nc_n_gather", "local_gather", "nonzero_with_count", "sequence_bounds", "topk"]
