"""What every collective shares: ``ReplicaGroup``, the shared rules, and the exchange of one
collective between its participants at the launch's ``runtime.ranks.World``. Imports isa
(alu, dispatch), memory, language.misc, runtime.ranks."""
from __future__ import annotations

import numpy as np

from ..errors import (ArgumentError, DeadlockError, DtypeError, MemorySpaceError, ShapeError,
                      UnsupportedError, kernel_location)
from ..isa import alu
from ..language.misc import NKIObject
from ..memory.access import read_raw
from ..memory.buffers import HBM, psum
from ..memory.tensor import NkiTensor
from ..runtime import ranks as _ranks


_REDUCE_OPS = ("add", "minimum", "maximum")
_U32 = np.dtype(np.uint32)


class ReplicaGroup(NKIObject):
    """The ranks that take part in a collective: ``ReplicaGroup([[0, 1], [2, 3]])``, one
    rank-list per sub-group ("sub-groups represented by lists of ranks should not have any
    overlap"). Each rank runs the collective with the other ranks of the rank-list that holds it;
    ring ops (``collective_permute_implicit*``) go around a rank-list in its order.
    Raises ShapeError for an empty list, a rank that is not a non-negative integer, or a rank in
    two rank-lists. Source: nki/api/nki/collectives/__init__.py (ReplicaGroup)."""

    def __init__(self, replica_groups=()):
        op = "ncc.ReplicaGroup"
        try:
            groups = tuple(tuple(g) for g in replica_groups)
        except TypeError:
            raise ShapeError(op, f"replica_groups must be a list of rank lists, got {replica_groups!r}") from None
        seen: dict = {}
        for gi, g in enumerate(groups):
            if not g:
                raise ShapeError(op, f"rank-list {gi} is empty")
            for r in g:
                if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
                    raise ShapeError(op, f"ranks must be non-negative integers, got {r!r} in rank-list {gi}")
                if int(r) in seen:
                    where = "twice in rank-list" if seen[int(r)] == gi else f"in rank-lists {seen[int(r)]} and"
                    raise ShapeError(op, f"rank {int(r)} appears {where} {gi}; sub-groups must not overlap")
                seen[int(r)] = gi
        self.replica_groups = tuple(tuple(int(r) for r in g) for g in groups)

    def __eq__(self, other):
        return isinstance(other, ReplicaGroup) and other.replica_groups == self.replica_groups

    def __hash__(self):
        return hash(self.replica_groups)

    def __repr__(self):
        return f"ReplicaGroup({[list(g) for g in self.replica_groups]})"


# ---- shared rules --------------------------------------------------------------------------------

def _tensor_list(op, name, value) -> list:
    """``value`` as a list of tensors (ShapeError if empty or not tensors)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ShapeError(op, f"{name} must be a non-empty list of tensors, got {value!r}")
    for i, t in enumerate(value):
        if not isinstance(t, NkiTensor):
            raise ShapeError(op, f"{name}[{i}] must be a tensor, got {type(t).__name__}")
    return list(value)


def _channels(op, name, value) -> list:
    """A by-channel argument: a list of one-tensor lists; the tensors."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ShapeError(op, f"{name} must be a non-empty list (one list per channel), got {value!r}")
    out = []
    for i, inner in enumerate(value):
        if not isinstance(inner, (list, tuple)) or len(inner) != 1:
            n = len(inner) if isinstance(inner, (list, tuple)) else "no list"
            raise ShapeError(op, f"{name}[{i}] must hold exactly one tensor, got {n}; coalesced collective "
                                 f"communication is not currently supported")
        out.append(_tensor_list(op, f"{name}[{i}]", inner)[0])
    return out


def _space(op, named, hbm_only=False, single_on_sbuf=True) -> bool:
    """Every tensor in HBM, or (unless ``hbm_only``) every one in SBUF; True for SBUF."""
    kinds = set()
    for name, t in named:
        if t.buffer is psum or (hbm_only and t.buffer not in HBM):
            allowed = "HBM" if hbm_only else "HBM or SBUF"
            raise MemorySpaceError(op, f"{name} is in {t.buffer}; tensors must reside on {allowed}")
        kinds.add("hbm" if t.buffer in HBM else "sbuf")
    if len(kinds) > 1:
        raise MemorySpaceError(op, "tensors are on both HBM and SBUF; mixing memory spaces is not supported: "
                                   "all tensors must be on HBM or all on SBUF")
    on_sbuf = kinds == {"sbuf"}
    if on_sbuf and single_on_sbuf and len(named) > 2:
        raise MemorySpaceError(op, f"{len(named) // 2} tensors per list on SBUF; coalesced collective "
                                   f"communication (multiple tensors) is only supported on HBM")
    return on_sbuf


def _pairs(op, srcs, dsts, a="srcs", b="dsts"):
    if len(srcs) != len(dsts):
        raise ShapeError(op, f"{a} has {len(srcs)} tensors but {b} has {len(dsts)}; they pair up one to one")
    return [x for i in range(len(srcs)) for x in ((f"{a}[{i}]", srcs[i]), (f"{b}[{i}]", dsts[i]))]


def _same_dtype(op, an, a, bn, b):
    if a.dtype != b.dtype:
        raise DtypeError(op, f"{bn} dtype {np.dtype(b.dtype).name} must equal {an} dtype "
                             f"{np.dtype(a.dtype).name}; a collective moves elements, it does not convert")


def _reduce_op(op, value):
    row = alu.lookup_alu(value, op, "op")
    if row.name not in _REDUCE_OPS:
        raise ArgumentError(op, f"op {row.name} is not a collective reduction; expected nl.add, "
                                f"nl.minimum or nl.maximum")
    return row


def _priority(op, priority, target):
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)) or not 0 <= priority <= 3:
        raise ShapeError(op, f"priority must be an integer 0-3 (lower is higher priority), got {priority!r}")
    if target.nc_version < 4:
        raise UnsupportedError(op, f"priority needs NeuronCore-v4 (trn3) or newer, not {target.name}")


def _group_arg(op, replica_group):
    if not isinstance(replica_group, ReplicaGroup):
        raise ArgumentError(op, f"replica_group must be an ncc.ReplicaGroup, got {type(replica_group).__name__}")


def _collective_dim(op, collective_dim, t, allowed, where):
    d = collective_dim
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d < len(t.shape):
        raise ShapeError(op, f"collective_dim {d!r} is not a dimension of a {len(t.shape)}-d tensor")
    if d not in allowed:
        raise UnsupportedError(op, f"collective_dim {d} is not supported for {where} tensors; currently only "
                                   f"{' or '.join(map(str, allowed))}")
    return int(d)


def _two_d(op, named):
    for name, t in named:
        if len(t.shape) != 2:
            raise ShapeError(op, f"{name} is {len(t.shape)}-d {list(t.shape)}; SBUF collectives operate on 2-D "
                                 f"tensors with a single free dimension")


# ---- the rank side -----------------------------------------------------------------------------

def _group(ins, replica_group):
    """(seat, rank-list holding this rank, this rank's position in it)."""
    seat = _ranks.seat_of(ins.core, ins.op)
    n = seat.world.num_ranks
    for g in replica_group.replica_groups:
        for r in g:
            if r >= n:
                raise ShapeError(ins.op, f"replica_group names rank {r} but the launch has {n} rank(s) "
                                         f"(ranks 0..{n - 1}; run nki.simulate(kernel, ranks=N))")
    for g in replica_group.replica_groups:
        if seat.rank in g:
            return seat, g, g.index(seat.rank)
    raise ShapeError(ins.op, f"rank {seat.rank} is in no rank-list of {replica_group}; every rank that "
                             f"issues the collective must be in one")


def _describe(tensors) -> str:
    return "[" + ", ".join(f"{list(t.shape)} {np.dtype(t.dtype).name} {t.buffer}" for t in tensors) + "]"


def _view_key(tensors) -> tuple:
    return tuple((id(t.alloc), t.offset, t.shape, t.strides) for t in tensors)


def _exchange(ins, seat, members, sig: str, dsts, gather, deliver):
    """Meet the other participants; ``gather()`` (this core's payload, read from its own memory)
    goes to everyone; ``deliver(data, skip)`` gets ``data[(rank, core)]`` of every participant
    and writes this core's dsts (``skip``: core 1 of an LNC2 rank whose dsts are core 0's).
    LNC1: one meeting, payloads read on arrival (only a rank's own thread writes its memory).
    LNC2: arrive, then read, then write, then leave together, so neither core of a rank reads
    operands the other is still writing, nor continues before shared dsts are written."""
    world, core = seat.world, ins.core
    where = kernel_location()
    channel = ("collective", tuple(sorted(members)))
    me = (seat.rank, core.core_id)
    ins.note(rank=seat.rank, ranks=list(members))
    key = _view_key(dsts)
    if world.lnc == 1:
        posts = world.meet(core, seat.rank, ins.op, channel, members, (ins.op, sig, where, gather()), where)
        _validate(ins, posts, members, world.lnc, where)
        deliver({p: v[3] for p, v in posts.items()}, False)
        return
    posts = world.meet(core, seat.rank, ins.op, channel, members, (ins.op, sig, where, key), where)
    _next_epoch(core)
    _validate(ins, posts, members, world.lnc, where)
    data = world.meet(core, seat.rank, ins.op, channel + ("data",), members, gather(), where)
    skip = me[1] == 1 and posts[(seat.rank, 0)][3] == key
    deliver(data, skip)
    world.meet(core, seat.rank, ins.op, channel + ("done",), members, None, where)
    _next_epoch(core)


def _next_epoch(core) -> None:
    """Both cores of an LNC2 rank met (like a core_barrier): a new race-check epoch."""
    sync = core.launch.sync
    if sync is not None:
        sync.rounds[core.core_id] += 1


def _validate(ins, posts, members, lnc, where):
    ref_p = (members[0], 0)
    ref = posts[ref_p]
    for m in members:
        for c in range(lnc):
            got = posts[(m, c)]
            if got[:2] != ref[:2]:
                raise DeadlockError(ins.op, f"{_ranks._who(ref_p, lnc)} issues {ref[0]} with {ref[1]} ({ref[2]}) "
                                            f"but {_ranks._who((m, c), lnc)} issues {got[0]} with {got[1]} "
                                            f"({got[2]}); every rank of the rank-list must issue the same "
                                            f"collective with the same shapes and parameters", where=where)


def _math(a, dtype):
    """Stored elements as the reduction reads them: int64 for integers, else float32."""
    return a.astype(np.int64) if np.issubdtype(np.dtype(dtype), np.integer) else a.astype(np.float32)


def _raw(t):
    return read_raw(t).copy()


def _reduce(row, arrays, dtype):
    acc = _math(arrays[0], dtype)
    for a in arrays[1:]:
        acc = row.fn(acc, _math(a, dtype))
    return acc


def _index(ndim, dim, lo, hi):
    return tuple(slice(lo, hi) if d == dim else slice(None) for d in range(ndim))


__all__ = ["ReplicaGroup"]
