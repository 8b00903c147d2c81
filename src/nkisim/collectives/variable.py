"""``all_gather_v``, ``all_to_all_v``: variable-length collectives over flat element buffers, sized
by a uint32 metadata tensor read at execution time. Source: aws-neuron-sdk
nki/api/nki/collectives/__init__.py."""
from __future__ import annotations

import numpy as np

from ..errors import BoundsError, DtypeError, MemorySpaceError, ShapeError, UnsupportedError
from ..isa.dispatch import Passed, instruction
from ..isa.enums import engine as _engine
from ..memory.access import read_raw, write
from ..memory.buffers import HBM, psum, sbuf
from ..memory.tensor import NkiTensor
from .common import (_U32, _tensor_list, _space, _same_dtype, _priority, _group_arg, _group, _describe,
                     _exchange)


def _v_rules(ins, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority):
    opn = ins.op
    srcs, dsts = _tensor_list(opn, "srcs", srcs), _tensor_list(opn, "dsts", dsts)
    for nm, lst in (("srcs", srcs), ("dsts", dsts)):
        if len(lst) != 1:
            raise ShapeError(opn, f"{nm} has {len(lst)} tensors; currently exactly one is supported")
    _space(opn, [("srcs[0]", srcs[0]), ("dsts[0]", dsts[0])], hbm_only=True)
    _same_dtype(opn, "srcs[0]", srcs[0], "dsts[0]", dsts[0])
    for nm in ("srcs[0]", "dsts[0]"):
        t = srcs[0] if nm == "srcs[0]" else dsts[0]
        if not t.is_contiguous():
            raise ShapeError(opn, f"{nm} must be laid out contiguously (a flat element buffer), got strides "
                                  f"{t.strides}")
    m = metadata_tensor
    if not isinstance(m, NkiTensor):
        raise ShapeError(opn, f"metadata_tensor must be a tensor, got {type(m).__name__}")
    if np.dtype(m.dtype) != _U32:
        raise DtypeError(opn, f"metadata_tensor dtype {np.dtype(m.dtype).name} must be uint32")
    if m.buffer is psum:
        raise MemorySpaceError(opn, "metadata_tensor is in psum; it must be on HBM or SBUF")
    rows = 4 if has_rdispls else 3
    if (m.buffer in HBM and len(m.shape) != 2) or (m.buffer is sbuf and (len(m.shape) != 3 or m.shape[0] != 1)) \
            or m.shape[-2] != rows:
        layout = "(rows, rank_list_size)" if m.buffer in HBM else "(1, rows, rank_list_size)"
        raise ShapeError(opn, f"metadata_tensor shape {list(m.shape)} must be {layout} with rows = {rows} "
                              f"(has_rdispls={bool(has_rdispls)}) on {m.buffer}")
    _group_arg(opn, replica_group)
    _priority(opn, priority, ins.target)


def _meta_row(m, row: int) -> np.ndarray:
    """Row ``row`` of the metadata (HBM ``(rows, n)`` or SBUF ``(1, rows, n)``) as int64 values."""
    view = m[row:row + 1, :] if len(m.shape) == 2 else m[0:1, row:row + 1, :]
    return read_raw(view).astype(np.int64).reshape(-1)


def _write_recv_counts(m, counts) -> None:
    """Row 2 of the metadata <- the counts received from each rank of the rank-list."""
    view = m[2:3, :] if len(m.shape) == 2 else m[0:1, 2:3, :]
    write(view, np.asarray(counts, np.uint32).reshape(view.shape))


def _flat(t):
    return t.reshape((t.size,))


def _chunk(op, what, src, displ, count):
    if displ + count > src.size:
        raise BoundsError(op, f"{what}: elements [{displ}, {displ + count}) exceed srcs[0]'s {src.size} elements")
    return read_raw(_flat(src)[displ:displ + count]).copy() if count else np.zeros(0, read_raw(src).dtype)


def _land(op, dst, rd, chunk, limit, sender):
    if rd + chunk.size > limit:
        raise BoundsError(op, f"{chunk.size} element(s) from rank {sender} at element {rd} exceed "
                              f"{'dsts[0] slot' if limit != dst.size else 'dsts[0]'} end {limit}")
    if chunk.size:
        write(_flat(dst)[rd:rd + chunk.size], chunk)


def _agv_rules(ins, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority, name):
    """all_gather_v's rules (see its docstring)."""
    _v_rules(ins, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority)
    if has_rdispls:
        raise UnsupportedError(ins.op, "has_rdispls=True is not supported")
    return Passed(_engine.dma)


def _agv_compute(ins, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority,
                 name):
    op = ins.op
    if ins.core.launch.lnc != 2:
        raise UnsupportedError(op, "only LNC=2 is supported; launch the ranks as kernel[2]")
    seat, members, pos = _group(ins, replica_group)
    n = len(members)
    if n != 4:
        raise UnsupportedError(op, f"each rank-list must have exactly 4 ranks (intra-chip), got {n}")
    m = metadata_tensor
    if m.shape[-1] != n:
        raise ShapeError(op, f"metadata_tensor has {m.shape[-1]} columns; it needs one per rank of the "
                             f"rank-list ({n})")
    src, dst = srcs[0], dsts[0]
    if dst.size % n:
        raise ShapeError(op, f"dsts[0] has {dst.size} elements, not divisible into {n} equal slots")
    sig = f"dsts {_describe(dsts)} metadata {list(m.shape)} {replica_group} recv_counts_known " \
          f"{bool(recv_counts_known)}"

    def gather():
        count, displ = _meta_row(m, 0)[0], _meta_row(m, 1)[0]
        return _chunk(op, "send_displ + send_count (metadata rows 1/0)", src, int(displ), int(count))

    def deliver(data, skip):
        if skip:
            return
        c = ins.core.core_id
        slot = dst.size // n
        counts = []
        for k, mk in enumerate(members):
            chunk = data[(mk, c)]
            _land(op, dst, k * slot, chunk, (k + 1) * slot, mk)
            counts.append(chunk.size)
        if not recv_counts_known:
            _write_recv_counts(m, counts)

    _exchange(ins, seat, members, sig, [dst, m], gather, deliver)


@instruction(reads=("srcs", "metadata_tensor"), writes=("dsts",), rules=_agv_rules, compute=_agv_compute,
             memo=False, api="ncc.all_gather_v")
def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False,
                 priority=None, name=None):
    """Each rank broadcasts ``src[send_displ : send_displ + send_count]`` (flat elements; metadata
    rows 0/1, first column) to the rank-list; the chunk from the k-th rank lands at
    ``dst[k * slot : k * slot + count]``, slot = dst elements / rank-list size.

    Shapes: exactly one src and one dst, on HBM, contiguous, same dtype; element counts free
    ("validated against the metadata at execution time": a chunk past src's end or past its dst
    slot raises BoundsError). metadata_tensor: uint32, HBM ``(rows, n)`` or SBUF ``(1, rows, n)``,
    rows 3 (4 with has_rdispls); row 2 (recv counts) is written unless ``recv_counts_known``.
    "Current limitations": ``has_rdispls=True`` is not supported, "only LNC=2 is supported",
    "each rank-list must have exactly 4 ranks" (all UnsupportedError). priority as ``all_reduce``.
    Engine: dma. Raises: ShapeError, DtypeError, MemorySpaceError, BoundsError, UnsupportedError,
    DeadlockError. Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (all_gather_v).
    """


def _a2av_rules(ins, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority, name):
    """all_to_all_v's rules (see its docstring)."""
    _v_rules(ins, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority)
    if has_rdispls and ins.target.nc_version < 4:
        raise UnsupportedError(ins.op, f"has_rdispls=True is only supported on NeuronSwitch-based instances "
                                       f"(trn3), not {ins.target.name}")
    return Passed(_engine.dma)


def _a2av_compute(ins, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, priority,
                  name):
    op = ins.op
    seat, members, pos = _group(ins, replica_group)
    n = len(members)
    if ins.target.nc_version >= 4:
        if ins.core.launch.lnc != 2:
            raise UnsupportedError(op, f"on {ins.target.name} (NeuronSwitch) all_to_all_v requires LNC=2; "
                                       f"launch the ranks as kernel[2]")
        lo = members[0]
        if list(members) != list(range(lo, lo + n)) or lo % 4 or n % 4 or n < 8:
            raise ShapeError(op, f"rank-list {list(members)}: on {ins.target.name} each rank-list must be "
                                 f"sequential ranks holding whole devices (4 LNC2 ranks each, starting at a "
                                 f"multiple of 4) of more than one device")
    m = metadata_tensor
    if m.shape[-1] != n:
        raise ShapeError(op, f"metadata_tensor has {m.shape[-1]} columns; it needs one per rank of the "
                             f"rank-list ({n})")
    src, dst = srcs[0], dsts[0]
    sig = f"dsts {_describe(dsts)} metadata {list(m.shape)} {replica_group} recv_counts_known " \
          f"{bool(recv_counts_known)} has_rdispls {bool(has_rdispls)}"

    def gather():
        counts, displs = _meta_row(m, 0), _meta_row(m, 1)
        return [_chunk(op, f"send_displs[{j}] + send_counts[{j}] (metadata rows 1/0)", src, int(displs[j]),
                       int(counts[j])) for j in range(n)]

    def deliver(data, skip):
        if skip:
            return
        c = ins.core.core_id
        rdispls = _meta_row(m, 3) if has_rdispls else None
        slot = dst.size // n
        counts = []
        for k, mk in enumerate(members):
            chunk = data[(mk, c)][pos]
            if has_rdispls:
                _land(op, dst, int(rdispls[k]), chunk, dst.size, mk)
            else:
                _land(op, dst, k * slot, chunk, (k + 1) * slot, mk)
            counts.append(chunk.size)
        if not recv_counts_known:
            _write_recv_counts(m, counts)

    _exchange(ins, seat, members, sig, [dst, m], gather, deliver)


@instruction(reads=("srcs", "metadata_tensor"), writes=("dsts",), rules=_a2av_rules, compute=_a2av_compute,
             memo=False, api="ncc.all_to_all_v")
def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False,
                 priority=None, name=None):
    """Each rank sends ``src[send_displs[j] : send_displs[j] + send_counts[j]]`` (flat elements) to
    the j-th rank of the rank-list, which writes it at ``recv_displs[k]`` (row 3, has_rdispls) or
    at ``k * dst elements / n`` (k = the sender's place in the rank-list).

    Shapes: exactly one src and one dst, on HBM, contiguous, same dtype; sizes checked against
    the metadata at execution time (BoundsError). metadata_tensor: uint32, HBM ``(rows, n)`` or
    SBUF ``(1, rows, n)``, rows 3 (4 with has_rdispls); row 2 is written unless
    ``recv_counts_known``. has_rdispls: "only supported on NeuronSwitch-based instances (trn3
    today)" (UnsupportedError elsewhere). On trn3 (NeuronSwitch): "requires LNC=2"
    (UnsupportedError) and rank-lists of sequential ranks holding whole devices, more than one
    (Decision: a device is 4 consecutive LNC2 ranks starting at a multiple of 4, so a rank-list
    is ``range(4a, 4a + 4b)`` with b >= 2; else ShapeError). Decision: on trn1/trn2 the
    "inter-node replica groups" rule is not checked: nkisim does not model nodes.
    Engine: dma. Raises: ShapeError, DtypeError, MemorySpaceError, BoundsError, UnsupportedError,
    DeadlockError. Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (all_to_all_v).
    """


__all__ = ["all_gather_v", "all_to_all_v"]
