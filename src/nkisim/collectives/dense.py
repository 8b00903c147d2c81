"""``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``: fixed-shape collectives over a
rank-list. Source: aws-neuron-sdk nki/api/nki/collectives/__init__.py."""
from __future__ import annotations

from ..errors import ShapeError
from ..isa.dispatch import Passed, instruction
from ..isa.enums import engine as _engine
from ..memory.access import write
from .common import (_tensor_list, _space, _pairs, _same_dtype, _reduce_op, _priority, _group_arg,
                     _collective_dim, _two_d, _group, _describe, _exchange, _raw, _reduce, _index)


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


__all__ = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
