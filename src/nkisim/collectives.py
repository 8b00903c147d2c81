"""``nki.collectives``: collective instructions between the ranks of a multi-rank launch.

Every op is an ``@instruction`` spec (events with engine ``dma`` and the tensor operands; the
rank and the rank-list in the options). Rules read only the arguments (memory spaces, shapes,
dtypes, enums, the target); what depends on the launch — the number of ranks, this rank's
rank-list, the other ranks' operands, metadata values — is checked in compute, which meets the
other ranks at the launch's ``runtime.ranks.World``. Source: aws-neuron-sdk
nki/api/nki/collectives/__init__.py (every docstring quoted below), nki/api/nki.collectives.rst.
Imports isa (dispatch, alu, registers), memory, runtime.ranks; the API layer, like isa.

Decisions common to every op (the docs are silent):
- a collective moves elements: each src and its dst have one dtype (else DtypeError); reductions
  (``op`` ``nl.add``/``nl.minimum``/``nl.maximum``) run in float32 (integers exactly, in int64)
  in rank-list order, rounded once into dst's dtype;
- shapes, dtypes and parameters of one collective must agree on every rank of the rank-list; a
  rank issuing another collective (or other shapes) at the same point raises DeadlockError
  naming both ranks and lines (on hardware the ranks would wait for each other forever);
- under LNC2 both cores of every rank issue the collective (it is an instruction of the logical
  core); SBUF operands are each core's own (core c meets core c of every other rank), shared-HBM
  operands passed identically by both cores move once;
- a launch without ``ranks=`` is a world of one rank (rank 0).
"""
from __future__ import annotations

import operator

import numpy as np

from .errors import ArgumentError, BoundsError, DeadlockError, DtypeError, MemorySpaceError, ShapeError, \
    UnsupportedError, kernel_location
from .isa import alu
from .isa.dispatch import Passed, api_function, instruction
from .isa.enums import engine as _engine
from .isa.registers import VirtualRegister
from .language.misc import NKIObject
from .memory.access import read_raw, write
from .memory.buffers import HBM, psum, sbuf
from .memory.tensor import NkiTensor
from .runtime import ranks as _ranks
from .runtime.cores import CoreStopped  # noqa: F401  (raised through World.meet)

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

def _tensor_list(op, name, value, nested=False) -> list:
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
        with sync.cond:
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


# ---- all_reduce / all_gather / reduce_scatter / all_to_all -------------------------------------

def _ar_rules(ins, srcs, dsts, replica_group, op, priority, name):
    """all_reduce's rules (see its docstring)."""
    opn = ins.op
    srcs, dsts = _tensor_list(opn, "srcs", srcs), _tensor_list(opn, "dsts", dsts)
    named = _pairs(opn, srcs, dsts)
    _space(opn, named)
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        if s.shape != d.shape:
            raise ShapeError(opn, f"dsts[{i}] shape {list(d.shape)} must equal srcs[{i}] shape {list(s.shape)}")
        _same_dtype(opn, f"srcs[{i}]", s, f"dsts[{i}]", d)
    _group_arg(opn, replica_group)
    row = _reduce_op(opn, op)
    _priority(opn, priority, ins.target)
    return Passed(_engine.dma, row)


def _ar_compute(ins, srcs, dsts, replica_group, op, priority, name):
    seat, members, pos = _group(ins, replica_group)
    row = ins.info
    sig = f"srcs {_describe(srcs)} dsts {_describe(dsts)} {replica_group} op {row.name}"

    def deliver(data, skip):
        if skip:
            return
        c = ins.core.core_id
        for i, d in enumerate(dsts):
            write(d, _reduce(row, [data[(m, c)][i] for m in members], d.dtype))

    _exchange(ins, seat, members, sig, dsts, lambda: [_raw(s) for s in srcs], deliver)


@instruction(reads=("srcs",), writes=("dsts",), rules=_ar_rules, compute=_ar_compute, memo=False,
             api="ncc.all_reduce")
def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    """dsts[i] = op over the rank-list's srcs[i] (every rank gets the same result).

    Shapes: srcs[i] and dsts[i] equal in shape and dtype, the same on every rank of the
    rank-list. Memory: "all tensors must be on HBM or all must be on SBUF" (PSUM or a mix:
    MemorySpaceError); "coalesced collective communication (multiple tensors) is only supported
    when tensors are on HBM". op: ``nl.add``, ``nl.minimum`` or ``nl.maximum`` (else
    ArgumentError); math in float32 (int64 for integers) in rank-list order, rounded once.
    priority: 0-3, "NeuronCore-v4+ only" (UnsupportedError before trn3). Engine: dma.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError, UnsupportedError,
    DeadlockError (a rank of the rank-list never issues it, or issues another collective).
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (all_reduce).
    """


def _ag_rules(ins, srcs, dsts, replica_group, collective_dim, priority, name):
    """all_gather's rules (see its docstring); the size relation needs the rank-list (compute)."""
    opn = ins.op
    srcs, dsts = _tensor_list(opn, "srcs", srcs), _tensor_list(opn, "dsts", dsts)
    named = _pairs(opn, srcs, dsts)
    on_sbuf = _space(opn, named)
    if on_sbuf:
        _two_d(opn, named)
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        if len(s.shape) != len(d.shape):
            raise ShapeError(opn, f"dsts[{i}] is {len(d.shape)}-d but srcs[{i}] is {len(s.shape)}-d")
        _same_dtype(opn, f"srcs[{i}]", s, f"dsts[{i}]", d)
        _collective_dim(opn, collective_dim, s, (0, 1) if on_sbuf else (0,), "SBUF" if on_sbuf else "HBM")
    _group_arg(opn, replica_group)
    _priority(opn, priority, ins.target)
    return Passed(_engine.dma)


def _concat_shapes(op, srcs, dsts, dim, n, what="dsts", whole="srcs"):
    """ShapeError unless each dst is n srcs concatenated along ``dim``."""
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        want = tuple(x * n if k == dim else x for k, x in enumerate(s.shape))
        if d.shape != want:
            raise ShapeError(op, f"{what}[{i}] shape {list(d.shape)} must be {list(want)}: {whole}[{i}] "
                                 f"{list(s.shape)} with dim {dim} times the {n} ranks of the rank-list")


def _ag_compute(ins, srcs, dsts, replica_group, collective_dim, priority, name):
    seat, members, pos = _group(ins, replica_group)
    n, dim = len(members), int(collective_dim)
    _concat_shapes(ins.op, srcs, dsts, dim, n)
    sig = f"srcs {_describe(srcs)} dsts {_describe(dsts)} {replica_group} collective_dim {dim}"

    def deliver(data, skip):
        if skip:
            return
        c = ins.core.core_id
        for i, (s, d) in enumerate(zip(srcs, dsts)):
            w = s.shape[dim]
            for k, m in enumerate(members):
                write(d[_index(len(d.shape), dim, k * w, (k + 1) * w)], data[(m, c)][i])

    _exchange(ins, seat, members, sig, dsts, lambda: [_raw(s) for s in srcs], deliver)


@instruction(reads=("srcs",), writes=("dsts",), rules=_ag_rules, compute=_ag_compute, memo=False,
             api="ncc.all_gather")
def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """dsts[i] = the rank-list's srcs[i] concatenated along ``collective_dim``, in rank-list order.

    Shapes: dsts[i] is srcs[i] with dim ``collective_dim`` multiplied by the rank-list's size,
    same dtype. collective_dim: "only 0 is supported for HBM tensors. For SBUF tensors, 0 or 1
    is supported as SBUF collectives currently only operate on 2D tensors with a single free
    dimension" (another dim: UnsupportedError; not a dim: ShapeError; a non-2-D SBUF tensor:
    ShapeError). Memory as ``all_reduce``. priority as ``all_reduce``. Engine: dma.
    Raises: ShapeError, DtypeError, MemorySpaceError, UnsupportedError, DeadlockError.
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (all_gather).
    """


def _rs_rules(ins, srcs, dsts, replica_group, collective_dim, op, priority, name):
    """reduce_scatter's rules (see its docstring)."""
    opn = ins.op
    srcs, dsts = _tensor_list(opn, "srcs", srcs), _tensor_list(opn, "dsts", dsts)
    named = _pairs(opn, srcs, dsts)
    _space(opn, named)
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        if len(s.shape) != len(d.shape):
            raise ShapeError(opn, f"dsts[{i}] is {len(d.shape)}-d but srcs[{i}] is {len(s.shape)}-d")
        _same_dtype(opn, f"srcs[{i}]", s, f"dsts[{i}]", d)
        _collective_dim(opn, collective_dim, s, (0,), "HBM or SBUF")
    _group_arg(opn, replica_group)
    row = _reduce_op(opn, op)
    _priority(opn, priority, ins.target)
    return Passed(_engine.dma, row)


def _rs_compute(ins, srcs, dsts, replica_group, collective_dim, op, priority, name):
    seat, members, pos = _group(ins, replica_group)
    n, row = len(members), ins.info
    _concat_shapes(ins.op, dsts, srcs, 0, n, what="srcs", whole="dsts")
    sig = f"srcs {_describe(srcs)} dsts {_describe(dsts)} {replica_group} collective_dim 0 op {row.name}"

    def deliver(data, skip):
        if skip:
            return
        c = ins.core.core_id
        for i, d in enumerate(dsts):
            h = d.shape[0]
            write(d, _reduce(row, [data[(m, c)][i][pos * h:(pos + 1) * h] for m in members], d.dtype))

    _exchange(ins, seat, members, sig, dsts, lambda: [_raw(s) for s in srcs], deliver)


@instruction(reads=("srcs",), writes=("dsts",), rules=_rs_rules, compute=_rs_compute, memo=False,
             api="ncc.reduce_scatter")
def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None, name=None):
    """dsts[i] on the k-th rank of the rank-list = op over the rank-list's srcs[i], chunk k of n
    along dim 0 (``srcs[i][k*h:(k+1)*h]``, h = dsts[i].shape[0]).

    Shapes: srcs[i] is dsts[i] with dim 0 multiplied by the rank-list's size n, same dtype.
    collective_dim: "Currently only 0 is supported for both HBM and SBUF tensors" (else
    UnsupportedError). Memory, op, priority as ``all_reduce``. Engine: dma.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError, UnsupportedError,
    DeadlockError. Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (reduce_scatter).
    """


def _a2a_rules(ins, srcs, dsts, replica_group, collective_dim, priority, name):
    """all_to_all's rules (see its docstring)."""
    opn = ins.op
    srcs, dsts = _tensor_list(opn, "srcs", srcs), _tensor_list(opn, "dsts", dsts)
    _space(opn, _pairs(opn, srcs, dsts), hbm_only=True)
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        if s.shape != d.shape:
            raise ShapeError(opn, f"dsts[{i}] shape {list(d.shape)} must equal srcs[{i}] shape {list(s.shape)}")
        _same_dtype(opn, f"srcs[{i}]", s, f"dsts[{i}]", d)
        _collective_dim(opn, collective_dim, s, (0,), "HBM")
    _group_arg(opn, replica_group)
    _priority(opn, priority, ins.target)
    return Passed(_engine.dma)


def _a2a_compute(ins, srcs, dsts, replica_group, collective_dim, priority, name):
    seat, members, pos = _group(ins, replica_group)
    n = len(members)
    for i, s in enumerate(srcs):
        if s.shape[0] % n:
            raise ShapeError(ins.op, f"srcs[{i}] dim 0 ({s.shape[0]}) must divide into the {n} ranks of the "
                                     f"rank-list")
    sig = f"srcs {_describe(srcs)} dsts {_describe(dsts)} {replica_group} collective_dim 0"

    def deliver(data, skip):
        if skip:
            return
        c = ins.core.core_id
        for i, d in enumerate(dsts):
            h = d.shape[0] // n
            for k, m in enumerate(members):
                write(d[k * h:(k + 1) * h], data[(m, c)][i][pos * h:(pos + 1) * h])

    _exchange(ins, seat, members, sig, dsts, lambda: [_raw(s) for s in srcs], deliver)


@instruction(reads=("srcs",), writes=("dsts",), rules=_a2a_rules, compute=_a2a_compute, memo=False,
             api="ncc.all_to_all")
def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Chunk k of n (along dim 0) of dsts[i] on the j-th rank of the rank-list = chunk j of the
    k-th rank's srcs[i].

    Shapes: srcs[i] and dsts[i] equal, dim 0 divisible by the rank-list's size (ShapeError).
    "Tensors must reside on HBM. SBUF is not currently supported" (MemorySpaceError).
    collective_dim: "Currently only 0 is supported" (else UnsupportedError). priority as
    ``all_reduce``. Engine: dma. Raises: ShapeError, DtypeError, MemorySpaceError,
    UnsupportedError, DeadlockError.
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (all_to_all).
    """


# ---- variable-length: all_gather_v / all_to_all_v ---------------------------------------------

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


# ---- permutes ----------------------------------------------------------------------------------

def _pairs_arg(op, source_target_pairs):
    try:
        pairs = [tuple(p) for p in source_target_pairs]
    except TypeError:
        raise ShapeError(op, f"source_target_pairs must be a list of (source, target) pairs, got "
                             f"{source_target_pairs!r}") from None
    for p in pairs:
        if len(p) != 2 or any(isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0 for r in p):
            raise ShapeError(op, f"source_target_pairs entry {p!r} must be two non-negative rank ids")
    for i, what in ((0, "source"), (1, "target")):
        seen = set()
        for p in pairs:
            if p[i] in seen:
                raise ShapeError(op, f"rank {p[i]} is the {what} of two pairs; each rank sends to at most one "
                                     f"rank and receives from at most one")
            seen.add(p[i])
    return [(int(a), int(b)) for a, b in pairs]


def _cp_rules(ins, srcs, dsts, source_target_pairs, priority, name):
    """collective_permute's rules (see its docstring)."""
    opn = ins.op
    srcs, dsts = _tensor_list(opn, "srcs", srcs), _tensor_list(opn, "dsts", dsts)
    for nm, lst in (("srcs", srcs), ("dsts", dsts)):
        if len(lst) != 1:
            raise ShapeError(opn, f"{nm} has {len(lst)} tensors; coalesced collective communication is not "
                                  f"currently supported: each list must contain exactly one tensor")
    _space(opn, [("srcs[0]", srcs[0]), ("dsts[0]", dsts[0])], hbm_only=True)
    if srcs[0].shape != dsts[0].shape:
        raise ShapeError(opn, f"dsts[0] shape {list(dsts[0].shape)} must equal srcs[0] shape {list(srcs[0].shape)}")
    _same_dtype(opn, "srcs[0]", srcs[0], "dsts[0]", dsts[0])
    pairs = _pairs_arg(opn, source_target_pairs)
    _priority(opn, priority, ins.target)
    return Passed(_engine.dma, pairs)


def _cp_compute(ins, srcs, dsts, source_target_pairs, priority, name):
    pairs = ins.info
    seat = _ranks.seat_of(ins.core, ins.op)
    n = seat.world.num_ranks
    for p in pairs:
        for r in p:
            if r >= n:
                raise ShapeError(ins.op, f"source_target_pairs names rank {r} but the launch has {n} rank(s)")
    members = tuple(sorted({r for p in pairs for r in p}))
    ins.note(rank=seat.rank, ranks=list(members))
    if seat.rank not in members:
        return                       # Decision: a rank in no pair neither sends nor receives
    source = {t: s for s, t in pairs}.get(seat.rank)
    sig = f"srcs {_describe(srcs)} dsts {_describe(dsts)} source_target_pairs {pairs}"

    def deliver(data, skip):
        if not skip and source is not None:
            write(dsts[0], data[(source, ins.core.core_id)])

    _exchange(ins, seat, members, sig, dsts, lambda: _raw(srcs[0]), deliver)


@instruction(reads=("srcs",), writes=("dsts",), rules=_cp_rules, compute=_cp_compute, memo=False,
             api="ncc.collective_permute")
def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    """For each pair ``(source, target)``: dsts[0] on rank ``target`` = srcs[0] of rank ``source``.

    Shapes: exactly one src and one dst ("coalesced ... not currently supported"), equal in shape
    and dtype, the same on every rank that takes part. "Tensors must reside on HBM"
    (MemorySpaceError). Pairs: rank ids of the launch; Decision: a rank is the source of at most
    one pair and the target of at most one (ShapeError), every rank named in a pair must issue
    the permute (they meet), a rank that is no pair's target keeps its dst, and a rank named in
    no pair neither waits nor moves data. priority as ``all_reduce``. Engine: dma.
    Raises: ShapeError, DtypeError, MemorySpaceError, UnsupportedError, DeadlockError.
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (collective_permute).
    """


def _channel_ids(op, channel_ids, k):
    ids = list(channel_ids) if isinstance(channel_ids, (list, tuple)) else None
    if ids is None or ids != list(range(len(ids))):
        raise ShapeError(op, f"channel_ids {channel_ids!r} must be consecutive integers starting from 0")
    if len(ids) != k:
        raise ShapeError(op, f"{len(ids)} channel_ids for {k} channels of tensors; one id per channel")


def _max_channels(seat, members) -> int:
    """Decision: the launch is one node, so a rank-list of every rank of the launch is "all
    devices inside a node" (4 channels); any other rank-list gets 2."""
    return 4 if len(members) == seat.world.num_ranks else 2


def _check_channels(ins, seat, members, k):
    limit = _max_channels(seat, members)
    if k > limit:
        raise ShapeError(ins.op, f"{k} channels exceed {limit} for rank-list {list(members)} (4 for a "
                                 f"replica group of every rank of the node, else 2)")


def _cpi_rules(ins, srcs_by_channel, dsts_by_channel, replica_group, channel_ids, priority, name):
    """collective_permute_implicit's rules (see its docstring)."""
    opn = ins.op
    srcs = _channels(opn, "srcs_by_channel", srcs_by_channel)
    dsts = _channels(opn, "dsts_by_channel", dsts_by_channel)
    named = _pairs(opn, srcs, dsts, "srcs_by_channel", "dsts_by_channel")
    _space(opn, named, single_on_sbuf=False)
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        if s.shape != d.shape:
            raise ShapeError(opn, f"dsts_by_channel[{i}][0] shape {list(d.shape)} must equal "
                                  f"srcs_by_channel[{i}][0] shape {list(s.shape)}")
        _same_dtype(opn, f"srcs_by_channel[{i}][0]", s, f"dsts_by_channel[{i}][0]", d)
    _channel_ids(opn, channel_ids, len(srcs))
    _group_arg(opn, replica_group)
    _priority(opn, priority, ins.target)
    return Passed(_engine.dma, (srcs, dsts))


def _cpi_compute(ins, srcs_by_channel, dsts_by_channel, replica_group, channel_ids, priority, name):
    srcs, dsts = ins.info
    seat, members, pos = _group(ins, replica_group)
    _check_channels(ins, seat, members, len(srcs))
    pred = members[(pos - 1) % len(members)]
    sig = f"srcs {_describe(srcs)} dsts {_describe(dsts)} {replica_group} channel_ids {list(channel_ids)}"

    def deliver(data, skip):
        if not skip:
            got = data[(pred, ins.core.core_id)]
            for ch, d in enumerate(dsts):
                write(d, got[ch])

    _exchange(ins, seat, members, sig, dsts, lambda: [_raw(s) for s in srcs], deliver)


@instruction(reads=("srcs_by_channel",), writes=("dsts_by_channel",), rules=_cpi_rules, compute=_cpi_compute,
             memo=False, api="ncc.collective_permute_implicit")
def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group, channel_ids=[0], priority=None,
                                name=None):
    """Ring step: on every channel, each rank sends its src to its successor in its rank-list and
    receives its predecessor's src into its dst (successor of the k-th rank: the (k+1)-th, the
    last's: the first).

    Shapes: one list per channel, each holding exactly one tensor ("coalesced ... not currently
    supported"; ShapeError); src and dst of a channel equal in shape and dtype. Memory: HBM or
    SBUF (Decision: the docs restrict only other ops to HBM; nki-library's fine-grained
    all-gather permutes SBUF tiles), all tensors in one memory space. channel_ids: "consecutive
    integers starting from 0", one per channel; at most 4 channels "for replica groups containing
    all devices inside a node and 2 for other supported replica groups" (ShapeError; Decision: see
    ``_max_channels``). Decision: every channel goes around the same ring (the rank-list's
    order). priority as ``all_reduce``. Engine: dma.
    Raises: ShapeError, DtypeError, MemorySpaceError, UnsupportedError, DeadlockError.
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (collective_permute_implicit).
    """


def _cpir_rules(ins, srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op, channel_ids,
                priority, name):
    """collective_permute_implicit_reduce's rules (see its docstring)."""
    opn = ins.op
    srcs0 = _channels(opn, "srcs0_by_channel", srcs0_by_channel)
    srcs1 = _channels(opn, "srcs1_by_channel", srcs1_by_channel)
    dsts = _channels(opn, "dsts_by_channel", dsts_by_channel)
    if not len(srcs0) == len(srcs1) == len(dsts):
        raise ShapeError(opn, f"srcs0_by_channel, srcs1_by_channel and dsts_by_channel have {len(srcs0)}, "
                              f"{len(srcs1)} and {len(dsts)} channels; they must be equal")
    named = [x for i in range(len(dsts)) for x in ((f"srcs0_by_channel[{i}][0]", srcs0[i]),
                                                    (f"srcs1_by_channel[{i}][0]", srcs1[i]),
                                                    (f"dsts_by_channel[{i}][0]", dsts[i]))]
    _space(opn, named, single_on_sbuf=False)
    for i, d in enumerate(dsts):
        for nm, s in ((f"srcs0_by_channel[{i}][0]", srcs0[i]), (f"srcs1_by_channel[{i}][0]", srcs1[i])):
            if s.shape != d.shape:
                raise ShapeError(opn, f"dsts_by_channel[{i}][0] shape {list(d.shape)} must equal {nm} shape "
                                      f"{list(s.shape)}")
            _same_dtype(opn, nm, s, f"dsts_by_channel[{i}][0]", d)
    _channel_ids(opn, channel_ids, len(dsts))
    _group_arg(opn, replica_group)
    row = _reduce_op(opn, op)
    _priority(opn, priority, ins.target)
    return Passed(_engine.dma, (srcs0, srcs1, dsts, row))


def _cpir_compute(ins, srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op, channel_ids,
                  priority, name):
    srcs0, srcs1, dsts, row = ins.info
    seat, members, pos = _group(ins, replica_group)
    _check_channels(ins, seat, members, len(dsts))
    pred = members[(pos - 1) % len(members)]
    sig = (f"srcs0 {_describe(srcs0)} srcs1 {_describe(srcs1)} dsts {_describe(dsts)} {replica_group} "
           f"op {row.name} channel_ids {list(channel_ids)}")

    def deliver(data, skip):
        if not skip:
            got = data[(pred, ins.core.core_id)]
            for ch, d in enumerate(dsts):
                write(d, _reduce(row, list(got[ch]), d.dtype))

    _exchange(ins, seat, members, sig, dsts,
              lambda: [(_raw(a), _raw(b)) for a, b in zip(srcs0, srcs1)], deliver)


@instruction(reads=("srcs0_by_channel", "srcs1_by_channel"), writes=("dsts_by_channel",), rules=_cpir_rules,
             compute=_cpir_compute, memo=False, api="ncc.collective_permute_implicit_reduce")
def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op,
                                       channel_ids=[0], priority=None, name=None):
    """Ring step with a reduction: each rank's dst on every channel = ``op(srcs0, srcs1)`` of its
    predecessor in the rank-list ("each rank reduces its local sources ... sends the result to its
    successor, and receives its predecessor's reduced result").

    Shapes: one one-tensor list per channel in each of the three arguments, the same number of
    channels; srcs0, srcs1 and dst of a channel equal in shape and dtype. op as ``all_reduce``
    (float32, rounded once into dst). Memory, channels, priority as
    ``collective_permute_implicit``. Engine: dma.
    Raises: ShapeError, DtypeError, MemorySpaceError, ArgumentError, UnsupportedError, DeadlockError.
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (collective_permute_implicit_reduce).
    """


# ---- rank ids ----------------------------------------------------------------------------------

def _cpr_rules(ins, dst, iteration_id, replica_group, channel_id, name):
    opn = ins.op
    _group_arg(opn, replica_group)
    if isinstance(channel_id, bool) or not isinstance(channel_id, (int, np.integer)) or not 0 <= channel_id < 4:
        raise ShapeError(opn, f"channel_id {channel_id!r} must be a channel of the ring, 0 to num_channels - 1 "
                              f"(at most 4 channels)")
    return Passed(_engine.sync)


def _cpr_compute(ins, dst, iteration_id, replica_group, channel_id, name):
    seat, members, pos = _group(ins, replica_group)
    limit = _max_channels(seat, members)
    if channel_id >= limit:
        raise ShapeError(ins.op, f"channel_id {channel_id} is not a channel of rank-list {list(members)} "
                                 f"({limit} channels)")
    try:
        it = operator.index(iteration_id)
    except TypeError:
        raise ShapeError(ins.op, f"iteration_id must be an integer, got {iteration_id!r}") from None
    ins.note(rank=seat.rank)
    dst.value = (pos - it) % len(members)


@instruction(rules=_cpr_rules, compute=_cpr_compute, memo=False,
             op="collective_permute_implicit_current_processing_rank_id",
             api="ncc.collective_permute_implicit_current_processing_rank_id")
def _current_processing_rank_id(dst, iteration_id, replica_group, channel_id=0, name=None):
    """(the instruction behind ``collective_permute_implicit_current_processing_rank_id``)"""


@api_function("ncc.collective_permute_implicit_current_processing_rank_id")
def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group, channel_id=0, name=None):
    """A register holding the rank whose data a ring step ``iteration_id`` processes: "at
    iteration 0, this returns the current rank's own ID"; at iteration i, the rank i places
    before this one in its rank-list (whose data i ``collective_permute_implicit`` steps brought).

    Decision: the value is that rank's position in the rank-list (equal to its rank id for the
    rank-list ``[0, ..., n-1]``): kernels use it to index a per-rank dimension of the rank-list's
    size. Decision: every channel follows the same ring, so ``channel_id`` (0 to the rank-list's
    channel count - 1, see ``collective_permute_implicit``; else ShapeError) does not change the
    value. Engine: sync (a register write, like ``nisa.register_move``).
    Raises: ShapeError, ArgumentError.
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py
    (collective_permute_implicit_current_processing_rank_id).
    """
    reg = VirtualRegister()
    _current_processing_rank_id(reg, iteration_id, replica_group, channel_id, name)
    return reg


def _rank_rules(ins, dst, name):
    return Passed(_engine.sync)


def _rank_compute(ins, dst, name):
    seat = _ranks.seat_of(ins.core, ins.op)
    ins.note(rank=seat.rank)
    dst.value = seat.rank


@instruction(rules=_rank_rules, compute=_rank_compute, memo=False, op="rank_id", api="ncc.rank_id")
def _rank_id(dst, name=None):
    """(the instruction behind ``rank_id``)"""


@api_function("ncc.rank_id")
def rank_id(name=None):
    """A register holding this rank's id in the launch (0 .. ranks - 1; 0 in a launch without
    ``ranks=``). Decision: the docs say "within the collective group" but take no group; nki-library
    indexes per-rank tables of every rank by it, so it is the launch-wide rank. Engine: sync.
    Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py (rank_id).
    """
    reg = VirtualRegister()
    _rank_id(reg, name)
    return reg


__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all",
           "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_reduce", "collective_permute_implicit_current_processing_rank_id",
           "rank_id"]
