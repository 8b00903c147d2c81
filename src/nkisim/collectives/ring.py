"""Point-to-point and ring collectives (``collective_permute``, ``collective_permute_implicit``,
``collective_permute_implicit_reduce``) and the rank-id registers (``rank_id``,
``collective_permute_implicit_current_processing_rank_id``). Source: aws-neuron-sdk
nki/api/nki/collectives/__init__.py."""
from __future__ import annotations

import operator

import numpy as np

from ..errors import ShapeError
from ..isa.dispatch import Passed, api_function, instruction
from ..isa.enums import engine as _engine
from ..isa.registers import VirtualRegister
from ..memory.access import write
from ..runtime import ranks as _ranks
from .common import (_tensor_list, _channels, _space, _pairs, _same_dtype, _reduce_op, _priority, _group_arg,
                     _group, _describe, _exchange, _raw, _reduce)


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


__all__ = ["collective_permute", "collective_permute_implicit", "collective_permute_implicit_reduce",
           "collective_permute_implicit_current_processing_rank_id", "rank_id"]
