"""nki.collectives on a multi-rank launch: every op against a NumPy reference over the ranks
(2, 4, 8 ranks; LNC1 and LNC2 ranks), replica-group subsets, each rule's error, deadlocks (no
hang), the caller's arrays on failure, and the events."""
import functools
import sys
import time

import ml_dtypes
import numpy as np
import pytest

import nkisim
import nkisim.nki as nki
import nkisim.nki.collectives as ncc
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
import nkisim.trace
from nkisim.errors import (ArgumentError, BoundsError, DeadlockError, DtypeError, KernelArgumentError,
                           MemorySpaceError, ShapeError,
                           UnsupportedError)

RG = ncc.ReplicaGroup
F32 = np.float32
BF16 = ml_dtypes.bfloat16


def _next_line():
    return sys._getframe(1).f_lineno + 1


def _ranks(kernel, n, *args, lnc=1, **opts):
    k = nki.simulate(kernel, ranks=n, **opts)
    return k[lnc](*args) if lnc != 1 else k(*args)


def _inputs(n, shape, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return [rng.integers(-50, 50, shape).astype(dtype) for _ in range(n)]
    return [rng.standard_normal(shape).astype(F32).astype(dtype) for _ in range(n)]


def _fold(fn, arrays, dtype):
    """The reference reduction: float32 (int64 for integers) in rank order, rounded once."""
    wide = np.int64 if np.issubdtype(np.dtype(dtype), np.integer) else F32
    return functools.reduce(fn, [a.astype(wide) for a in arrays]).astype(dtype)


# ---- kernels -------------------------------------------------------------------------------------

def ar_hbm(x, group, op=nl.add):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.all_reduce(srcs=[src], dsts=[out], replica_group=group, op=op)
    return out


def ar_sbuf(x, group):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=t, src=x)
    ncc.all_reduce(srcs=[t], dsts=[r], replica_group=group, op=nl.maximum)
    nisa.dma_copy(dst=out, src=r)
    return out


def ag_hbm(x, group, n):
    out = nl.ndarray((x.shape[0] * n,) + tuple(x.shape[1:]), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather(srcs=[x], dsts=[out], replica_group=group, collective_dim=0)
    return out


def ag_sbuf(x, group, n, dim):
    p, f = x.shape
    shape = (p * n, f) if dim == 0 else (p, f * n)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    r = nl.ndarray(shape, dtype=x.dtype, buffer=nl.sbuf)
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=t, src=x)
    ncc.all_gather(srcs=[t], dsts=[r], replica_group=group, collective_dim=dim)
    nisa.dma_copy(dst=out, src=r)
    return out


def rs_hbm(x, group, n):
    out = nl.ndarray((x.shape[0] // n, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.reduce_scatter(srcs=[x], dsts=[out], replica_group=group, collective_dim=0, op=nl.add)
    return out


def a2a_hbm(x, group):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all(srcs=[x], dsts=[out], replica_group=group, collective_dim=0)
    return out


# ---- all_reduce ----------------------------------------------------------------------------------

@pytest.mark.parametrize("n,lnc", [(2, 1), (4, 1), (8, 1), (2, 2), (4, 2)])
def test_all_reduce_sums_every_rank(n, lnc):
    xs = _inputs(n, (16, 24))
    got = _ranks(ar_hbm, n, nki.per_rank(xs), RG([list(range(n))]), lnc=lnc)
    want = _fold(np.add, xs, F32)
    for r in range(n):
        np.testing.assert_array_equal(got[r], want)


@pytest.mark.parametrize("dtype,op,fn", [(BF16, nl.add, np.add), (np.int32, nl.add, np.add),
                                         (F32, nl.minimum, np.minimum), (BF16, nl.maximum, np.maximum)])
def test_all_reduce_dtypes_and_ops_round_once(dtype, op, fn):
    xs = _inputs(4, (8, 32), dtype)
    got = _ranks(ar_hbm, 4, nki.per_rank(xs), RG([[0, 1, 2, 3]]), op)
    for r in range(4):
        np.testing.assert_array_equal(got[r], _fold(fn, xs, dtype))


def test_all_reduce_coalesced_hbm_and_sbuf_on_lnc2():
    def kernel(x, y, group):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.shared_hbm)
        ncc.all_reduce(srcs=[x, y], dsts=[a, b], replica_group=group, op=nl.add)
        return a, b
    xs, ys = _inputs(2, (4, 8), seed=1), _inputs(2, (3, 5), seed=2)
    got = _ranks(kernel, 2, nki.per_rank(xs), nki.per_rank(ys), RG([[0, 1]]))
    for r in range(2):
        np.testing.assert_array_equal(got[r][0], xs[0] + xs[1])
        np.testing.assert_array_equal(got[r][1], ys[0] + ys[1])
    xs = _inputs(2, (32, 16))
    got = _ranks(ar_sbuf, 2, nki.per_rank(xs), RG([[0, 1]]), lnc=2)
    for r in range(2):
        np.testing.assert_array_equal(got[r], np.maximum(xs[0], xs[1]))


def test_all_reduce_in_place_on_lnc2_reduces_once():
    def kernel(x, group):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=t, src=x)
        ncc.all_reduce(srcs=[t], dsts=[t], replica_group=group, op=nl.add)
        return t
    xs = _inputs(2, (8, 8))
    got = _ranks(kernel, 2, nki.per_rank(xs), RG([[0, 1]]), lnc=2)
    np.testing.assert_array_equal(got[1], xs[0] + xs[1])


def test_replica_group_subsets_reduce_within_their_rank_list():
    xs = _inputs(4, (4, 8))
    got = _ranks(ar_hbm, 4, nki.per_rank(xs), RG([[0, 2], [3, 1]]))
    for r, partner in ((0, 2), (1, 3), (2, 0), (3, 1)):
        np.testing.assert_array_equal(got[r], _fold(np.add, [xs[min(r, partner)], xs[max(r, partner)]], F32)
                                      if r in (0, 2) else _fold(np.add, [xs[3], xs[1]], F32))


# ---- all_gather / reduce_scatter / all_to_all ---------------------------------------------------

@pytest.mark.parametrize("n,lnc", [(2, 1), (4, 2), (8, 1)])
def test_all_gather_hbm_concatenates_in_rank_list_order(n, lnc):
    xs = _inputs(n, (3, 4, 5))
    got = _ranks(ag_hbm, n, nki.per_rank(xs), RG([list(range(n))]), n, lnc=lnc)
    for r in range(n):
        np.testing.assert_array_equal(got[r], np.concatenate(xs, axis=0))
    xs = _inputs(4, (2, 3), seed=9)
    order = [2, 0, 3, 1]
    got = _ranks(ag_hbm, 4, nki.per_rank(xs), RG([order]), 4)
    np.testing.assert_array_equal(got[0], np.concatenate([xs[i] for i in order], axis=0))


@pytest.mark.parametrize("dim,lnc", [(0, 1), (1, 1), (1, 2)])
def test_all_gather_sbuf_dims(dim, lnc):
    xs = _inputs(4, (16, 8), BF16)
    got = _ranks(ag_sbuf, 4, nki.per_rank(xs), RG([[0, 1, 2, 3]]), 4, dim, lnc=lnc)
    for r in range(4):
        np.testing.assert_array_equal(got[r], np.concatenate(xs, axis=dim))


@pytest.mark.parametrize("n,lnc", [(2, 1), (4, 1), (2, 2)])
def test_reduce_scatter_gives_each_rank_its_chunk_of_the_sum(n, lnc):
    xs = _inputs(n, (4 * n, 6))
    got = _ranks(rs_hbm, n, nki.per_rank(xs), RG([list(range(n))]), n, lnc=lnc)
    total = _fold(np.add, xs, F32)
    for r in range(n):
        np.testing.assert_array_equal(got[r], total[4 * r:4 * (r + 1)])


def test_reduce_scatter_sbuf():
    def kernel(x, group):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0] // 2, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        out = nl.ndarray(r.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=t, src=x)
        ncc.reduce_scatter(srcs=[t], dsts=[r], replica_group=group, collective_dim=0, op=nl.minimum)
        nisa.dma_copy(dst=out, src=r)
        return out
    xs = _inputs(2, (8, 4))
    got = _ranks(kernel, 2, nki.per_rank(xs), RG([[0, 1]]))
    np.testing.assert_array_equal(got[1], np.minimum(xs[0], xs[1])[4:])


@pytest.mark.parametrize("n,lnc", [(4, 2), (8, 1)])
def test_all_to_all_exchanges_chunks(n, lnc):
    xs = _inputs(n, (2 * n, 3))
    got = _ranks(a2a_hbm, n, nki.per_rank(xs), RG([list(range(n))]), lnc=lnc)
    for j in range(n):
        want = np.concatenate([xs[k][2 * j:2 * j + 2] for k in range(n)], axis=0)
        np.testing.assert_array_equal(got[j], want)


# ---- permutes ------------------------------------------------------------------------------------

def permute(x, pairs):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)              # a rank that receives nothing keeps its own
    ncc.collective_permute(srcs=[x], dsts=[out], source_target_pairs=pairs)
    return out


def test_collective_permute_pairs():
    xs = _inputs(4, (4, 4))
    got = _ranks(permute, 4, nki.per_rank(xs), ((0, 1), (1, 2), (2, 0)))
    for r, src in ((0, 2), (1, 0), (2, 1), (3, 3)):
        np.testing.assert_array_equal(got[r], xs[src])
    got = _ranks(permute, 2, nki.per_rank(xs[:2]), ((0, 1), (1, 0)), lnc=2)
    np.testing.assert_array_equal(got[0], xs[1])
    np.testing.assert_array_equal(got[1], xs[0])


def ring_gather(x, group, n, channels, on_sbuf):
    """Our own ring all-gather: n - 1 implicit permutes, each received chunk stored at the rank
    current_processing_rank_id names (through a register offset)."""
    m, k = x.shape
    c = m // channels
    out = nl.ndarray((n, m, k), dtype=x.dtype, buffer=nl.shared_hbm)
    space = nl.sbuf if on_sbuf else nl.shared_hbm
    bufs = [[nl.ndarray((c, k), dtype=x.dtype, buffer=space) for _ in range(channels)] for _ in range(2)]
    for ch in range(channels):
        nisa.dma_copy(dst=bufs[0][ch], src=x[ch * c:(ch + 1) * c, :])
    for it in range(n):
        cur = bufs[it % 2]
        if it:
            ncc.collective_permute_implicit(srcs_by_channel=[[b] for b in bufs[(it - 1) % 2]],
                                            dsts_by_channel=[[b] for b in cur], replica_group=group,
                                            channel_ids=list(range(channels)))
        for ch in range(channels):
            who = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=it, replica_group=group,
                                                                            channel_id=ch)
            nisa.dma_copy(dst=out.ap(pattern=[[k, c], [1, k]], offset=ch * c * k, scalar_offset=who,
                                     indirect_dim=0), src=cur[ch])
    return out


@pytest.mark.parametrize("n,lnc,channels,on_sbuf", [(2, 1, 1, False), (4, 1, 2, True), (4, 2, 2, False),
                                                    (8, 1, 4, True)])
def test_collective_permute_implicit_ring_all_gather(n, lnc, channels, on_sbuf):
    xs = _inputs(n, (8, 16))
    got = _ranks(ring_gather, n, nki.per_rank(xs), RG([list(range(n))]), n, channels, on_sbuf, lnc=lnc)
    for r in range(n):
        np.testing.assert_array_equal(got[r], np.stack(xs))


def test_current_processing_rank_id_is_the_position_i_steps_back_in_the_rank_list():
    def kernel(group):
        out = nl.ndarray((1, 3), dtype=nl.int32, buffer=nl.shared_hbm)
        for it in range(3):
            reg = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=it, replica_group=group)
            nisa.register_store(out[0:1, it:it + 1], reg)
        return out
    got = _ranks(kernel, 4, RG([[3, 1], [0, 2]]))
    # rank 3 is at position 0 of [3, 1]; rank 2 at position 1 of [0, 2]
    np.testing.assert_array_equal(got[3], [[0, 1, 0]])
    np.testing.assert_array_equal(got[2], [[1, 0, 1]])


def test_collective_permute_implicit_reduce():
    def kernel(a, b, group):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[a]], srcs1_by_channel=[[b]],
                                               dsts_by_channel=[[out]], replica_group=group, op=nl.add)
        return out
    xs, ys = _inputs(4, (4, 8), BF16, seed=3), _inputs(4, (4, 8), BF16, seed=4)
    got = _ranks(kernel, 4, nki.per_rank(xs), nki.per_rank(ys), RG([[0, 1, 2, 3]]))
    for r in range(4):
        p = (r - 1) % 4
        np.testing.assert_array_equal(got[r], (xs[p].astype(F32) + ys[p].astype(F32)).astype(BF16))


def test_rank_id_selects_each_ranks_slice():
    def kernel(table):
        _, h, w = table.shape
        out = nl.ndarray((h, w), dtype=table.dtype, buffer=nl.shared_hbm)
        me = ncc.rank_id()
        nisa.dma_copy(dst=out, src=table.ap(pattern=[[w, h], [1, w]], scalar_offset=me, indirect_dim=0))
        return out
    table = np.arange(4 * 2 * 3, dtype=F32).reshape(4, 2, 3)
    for lnc in (1, 2):
        got = _ranks(kernel, 4, table, lnc=lnc)
        for r in range(4):
            np.testing.assert_array_equal(got[r], table[r])


def test_a_launch_without_ranks_is_one_rank():
    x = _inputs(1, (4, 4))[0]
    np.testing.assert_array_equal(nki.simulate(ar_hbm)(x, RG([[0]])), x)
    line = ar_hbm.__code__.co_firstlineno + 4
    with pytest.raises(ShapeError, match=rf"^ncc\.all_reduce: replica_group names rank 1 but the launch has 1 "
                                         rf"rank\(s\) \(ranks 0\.\.0; run nki\.simulate\(kernel, ranks=N\)\) "
                                         rf"\(test_collectives\.py:{line}\)$"):
        nki.simulate(ar_hbm)(x, RG([[0, 1]]))


# ---- variable-length -----------------------------------------------------------------------------

def test_all_gather_v_broadcasts_each_ranks_chunk_and_writes_recv_counts():
    def kernel(x, meta, group):
        out = nl.ndarray((4, 6), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=nl.zeros((4, 6), dtype=x.dtype, buffer=nl.sbuf))
        ncc.all_gather_v(srcs=[x], dsts=[out], replica_group=group, metadata_tensor=meta)
        return out, meta
    xs = _inputs(4, (2, 5))
    metas = []
    for r in range(4):
        m = np.zeros((3, 4), np.uint32)
        m[0, 0], m[1, 0] = r + 1, r          # send count r + 1 from element r
        metas.append(m)
    got = _ranks(kernel, 4, nki.per_rank(xs), nki.per_rank(metas), RG([[0, 1, 2, 3]]), lnc=2)
    for r in range(4):
        want = np.zeros(24, F32)
        for s in range(4):
            want[s * 6:s * 6 + s + 1] = xs[s].reshape(-1)[s:2 * s + 1]
        np.testing.assert_array_equal(got[r][0].reshape(-1), want)
        np.testing.assert_array_equal(got[r][1][2], [1, 2, 3, 4])


def a2av(x, meta, group, size):
    out = nl.ndarray((size,), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.zeros((1, size), dtype=x.dtype, buffer=nl.sbuf).reshape((1, size)))
    ncc.all_to_all_v(srcs=[x], dsts=[out.reshape((1, size))], replica_group=group, metadata_tensor=meta)
    return out, meta


@pytest.mark.parametrize("n,lnc,target", [(4, 1, "trn2"), (8, 2, "trn3")])
def test_all_to_all_v_sends_per_destination_chunks(n, lnc, target):
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(3 * n).astype(F32) for _ in range(n)]
    metas = []
    for r in range(n):
        m = np.zeros((3, n), np.uint32)
        m[0] = [(r + j) % 3 for j in range(n)]           # send_counts[j]
        m[1] = [3 * j for j in range(n)]                 # send_displs[j]
        metas.append(m)
    got = _ranks(a2av, n, nki.per_rank(xs), nki.per_rank(metas), RG([list(range(n))]), 4 * n, lnc=lnc,
                 target=target)
    for j in range(n):
        want = np.zeros(4 * n, F32)
        for k in range(n):
            c = (k + j) % 3
            want[4 * k:4 * k + c] = xs[k][3 * j:3 * j + c]
        np.testing.assert_array_equal(got[j][0], want)
        np.testing.assert_array_equal(got[j][1][2], [(k + j) % 3 for k in range(n)])


# ---- rules ---------------------------------------------------------------------------------------

def _raises(kernel, args, err, text, n=2, lnc=1, **opts):
    with pytest.raises(err) as info:
        _ranks(kernel, n, *args, lnc=lnc, **opts)
    assert str(info.value) == text, str(info.value)


def test_replica_group_construction_rules():
    assert RG([[0, 1], (2, 3)]).replica_groups == ((0, 1), (2, 3))
    with pytest.raises(ShapeError, match=r"^ncc\.ReplicaGroup: rank 1 appears in rank-lists 0 and 1; sub-groups "
                                         r"must not overlap \(test_collectives\.py:\d+\)$"):
        RG([[0, 1], [1, 2]])
    with pytest.raises(ShapeError, match=r"^ncc\.ReplicaGroup: rank-list 0 is empty"):
        RG([[]])
    with pytest.raises(ShapeError, match=r"^ncc\.ReplicaGroup: ranks must be non-negative integers, got -1"):
        RG([[0, -1]])


def test_rank_not_in_any_rank_list_and_rank_out_of_range():
    xs = _inputs(2, (2, 2))
    line = ar_hbm.__code__.co_firstlineno + 4
    _raises(ar_hbm, (nki.per_rank(xs), RG([[0]])), ShapeError,
            f"ncc.all_reduce: rank 1 is in no rank-list of ReplicaGroup([[0]]); every rank that issues the "
            f"collective must be in one (test_collectives.py:{line})")
    _raises(ar_hbm, (nki.per_rank(xs), RG([[0, 1, 2]])), ShapeError,
            f"ncc.all_reduce: replica_group names rank 2 but the launch has 2 rank(s) (ranks 0..1; run "
            f"nki.simulate(kernel, ranks=N)) (test_collectives.py:{line})")


def _one_op(call):
    """A kernel that issues ``call(x, scratch tiles)`` once; records its line."""
    lines = []

    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        p = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.psum)
        h = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        lines.append(_next_line())
        call(x, t, p, h)
        return h
    return kernel, lines


G2 = RG([[0, 1]])


@pytest.mark.parametrize("call,err,text", [
    (lambda x, t, p, h: ncc.all_reduce(srcs=[p], dsts=[t], replica_group=G2, op=nl.add), MemorySpaceError,
     "ncc.all_reduce: srcs[0] is in psum; tensors must reside on HBM or SBUF"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[t], replica_group=G2, op=nl.add), MemorySpaceError,
     "ncc.all_reduce: tensors are on both HBM and SBUF; mixing memory spaces is not supported: all tensors "
     "must be on HBM or all on SBUF"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[t, t], dsts=[t, t], replica_group=G2, op=nl.add), MemorySpaceError,
     "ncc.all_reduce: 2 tensors per list on SBUF; coalesced collective communication (multiple tensors) is "
     "only supported on HBM"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[h, h], replica_group=G2, op=nl.add), ShapeError,
     "ncc.all_reduce: srcs has 1 tensors but dsts has 2; they pair up one to one"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[h[0:2]], replica_group=G2, op=nl.add), ShapeError,
     "ncc.all_reduce: dsts[0] shape [2, 8] must equal srcs[0] shape [4, 8]"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[h], replica_group=G2, op=nl.multiply), ArgumentError,
     "ncc.all_reduce: op multiply is not a collective reduction; expected nl.add, nl.minimum or nl.maximum"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[h], replica_group=[[0, 1]], op=nl.add), ArgumentError,
     "ncc.all_reduce: replica_group must be an ncc.ReplicaGroup, got list"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[h], replica_group=G2, op=nl.add, priority=4), ShapeError,
     "ncc.all_reduce: priority must be an integer 0-3 (lower is higher priority), got 4"),
    (lambda x, t, p, h: ncc.all_reduce(srcs=[], dsts=[h], replica_group=G2, op=nl.add), ShapeError,
     "ncc.all_reduce: srcs must be a non-empty list of tensors, got []"),
    (lambda x, t, p, h: ncc.all_gather(srcs=[x], dsts=[h], replica_group=G2, collective_dim=1), UnsupportedError,
     "ncc.all_gather: collective_dim 1 is not supported for HBM tensors; currently only 0"),
    (lambda x, t, p, h: ncc.all_gather(srcs=[t], dsts=[t], replica_group=G2, collective_dim=2), ShapeError,
     "ncc.all_gather: collective_dim 2 is not a dimension of a 2-d tensor"),
    (lambda x, t, p, h: ncc.all_gather(srcs=[x], dsts=[h], replica_group=G2, collective_dim=0), ShapeError,
     "ncc.all_gather: dsts[0] shape [4, 8] must be [8, 8]: srcs[0] [4, 8] with dim 0 times the 2 ranks of the "
     "rank-list"),
    (lambda x, t, p, h: ncc.all_gather(srcs=[t.reshape((4, 2, 4))], dsts=[t.reshape((4, 2, 4))], replica_group=G2,
                                       collective_dim=1), ShapeError,
     "ncc.all_gather: srcs[0] is 3-d [4, 2, 4]; SBUF collectives operate on 2-D tensors with a single free "
     "dimension"),
    (lambda x, t, p, h: ncc.reduce_scatter(srcs=[t], dsts=[t], replica_group=G2, collective_dim=1, op=nl.add),
     UnsupportedError, "ncc.reduce_scatter: collective_dim 1 is not supported for HBM or SBUF tensors; "
                       "currently only 0"),
    (lambda x, t, p, h: ncc.all_to_all(srcs=[t], dsts=[t], replica_group=G2, collective_dim=0), MemorySpaceError,
     "ncc.all_to_all: srcs[0] is in sbuf; tensors must reside on HBM"),
    (lambda x, t, p, h: ncc.all_to_all(srcs=[x[0:3]], dsts=[h[0:3]], replica_group=G2, collective_dim=0),
     ShapeError, "ncc.all_to_all: srcs[0] dim 0 (3) must divide into the 2 ranks of the rank-list"),
    (lambda x, t, p, h: ncc.collective_permute(srcs=[t], dsts=[t], source_target_pairs=[(0, 1)]),
     MemorySpaceError, "ncc.collective_permute: srcs[0] is in sbuf; tensors must reside on HBM"),
    (lambda x, t, p, h: ncc.collective_permute(srcs=[x, x], dsts=[h, h], source_target_pairs=[(0, 1)]),
     ShapeError, "ncc.collective_permute: srcs has 2 tensors; coalesced collective communication is not "
                 "currently supported: each list must contain exactly one tensor"),
    (lambda x, t, p, h: ncc.collective_permute(srcs=[x], dsts=[h], source_target_pairs=[(0, 1), (0, 0)]),
     ShapeError, "ncc.collective_permute: rank 0 is the source of two pairs; each rank sends to at most one "
                 "rank and receives from at most one"),
    (lambda x, t, p, h: ncc.collective_permute(srcs=[x], dsts=[h], source_target_pairs=[(0, 5)]),
     ShapeError, "ncc.collective_permute: source_target_pairs names rank 5 but the launch has 2 rank(s)"),
    (lambda x, t, p, h: ncc.collective_permute_implicit(srcs_by_channel=[[x, x]], dsts_by_channel=[[h]],
                                                        replica_group=G2), ShapeError,
     "ncc.collective_permute_implicit: srcs_by_channel[0] must hold exactly one tensor, got 2; coalesced "
     "collective communication is not currently supported"),
    (lambda x, t, p, h: ncc.collective_permute_implicit(srcs_by_channel=[[x], [x]], dsts_by_channel=[[h], [h]],
                                                        replica_group=G2, channel_ids=[1, 2]), ShapeError,
     "ncc.collective_permute_implicit: channel_ids [1, 2] must be consecutive integers starting from 0"),
    (lambda x, t, p, h: ncc.collective_permute_implicit(srcs_by_channel=[[x]] * 5, dsts_by_channel=[[h]] * 5,
                                                        replica_group=G2, channel_ids=list(range(5))), ShapeError,
     "ncc.collective_permute_implicit: 5 channels exceed 4 for rank-list [0, 1] (4 for a replica group of "
     "every rank of the node, else 2)"),
    (lambda x, t, p, h: ncc.collective_permute_implicit(srcs_by_channel=[[x]] * 3, dsts_by_channel=[[h]] * 3,
                                                        replica_group=RG([[0], [1]]), channel_ids=[0, 1, 2]),
     ShapeError, "ncc.collective_permute_implicit: 3 channels exceed 2 for rank-list [0] (4 for a replica group "
                 "of every rank of the node, else 2)"),
    (lambda x, t, p, h: ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[x]], srcs1_by_channel=[[t]],
                                                               dsts_by_channel=[[h]], replica_group=G2, op=nl.add),
     MemorySpaceError, "ncc.collective_permute_implicit_reduce: tensors are on both HBM and SBUF; mixing memory "
                       "spaces is not supported: all tensors must be on HBM or all on SBUF"),
    (lambda x, t, p, h: ncc.collective_permute_implicit_current_processing_rank_id(0, G2, channel_id=4),
     ShapeError, "ncc.collective_permute_implicit_current_processing_rank_id: channel_id 4 must be a channel of "
                 "the ring, 0 to num_channels - 1 (at most 4 channels)"),
])
def test_rules(call, err, text):
    kernel, lines = _one_op(call)
    x = np.zeros((4, 8), F32)
    with pytest.raises(err) as info:
        _ranks(kernel, 2, x)
    # the location is the innermost kernel-side frame: the lambda's line
    assert str(info.value) == f"{text} (test_collectives.py:{call.__code__.co_firstlineno})"


def test_dtype_rule_and_priority_needs_trn3():
    call = lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[h], replica_group=G2, op=nl.add)  # noqa: E731
    kernel, _ = _one_op(call)
    with pytest.raises(DtypeError) as info:
        _ranks(kernel, 2, np.zeros((4, 8), np.float16))
    line = call.__code__.co_firstlineno            # the lambda's line
    assert str(info.value) == (f"ncc.all_reduce: dsts[0] dtype float32 must equal srcs[0] dtype float16; a "
                               f"collective moves elements, it does not convert (test_collectives.py:{line})")
    call = lambda x, t, p, h: ncc.all_reduce(srcs=[x], dsts=[h], replica_group=G2, op=nl.add,  # noqa: E731
                                             priority=0)
    kernel, _ = _one_op(call)
    with pytest.raises(UnsupportedError) as info:
        _ranks(kernel, 2, np.zeros((4, 8), F32), target="trn2")
    assert str(info.value) == (f"ncc.all_reduce: priority needs NeuronCore-v4 (trn3) or newer, not trn2 "
                               f"(test_collectives.py:{call.__code__.co_firstlineno})")
    _ranks(kernel, 2, np.zeros((4, 8), F32), target="trn3")


def test_variable_length_rules():
    meta = np.zeros((3, 4), np.uint32)

    def agv(x, m, group, rd=False):
        out = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_gather_v(srcs=[x], dsts=[out], replica_group=group, metadata_tensor=m, has_rdispls=rd)
        return out
    line = agv.__code__.co_firstlineno + 2
    x = np.zeros((2, 2), F32)
    _raises(agv, (x, meta, RG([[0, 1, 2, 3]])), UnsupportedError,
            f"ncc.all_gather_v: only LNC=2 is supported; launch the ranks as kernel[2] (test_collectives.py:{line})",
            n=4)
    _raises(agv, (x, meta[:, :2], RG([[0, 1]])), UnsupportedError,
            f"ncc.all_gather_v: each rank-list must have exactly 4 ranks (intra-chip), got 2 "
            f"(test_collectives.py:{line})", lnc=2)
    _raises(agv, (x, meta.astype(np.int32), RG([[0, 1]])), DtypeError,
            f"ncc.all_gather_v: metadata_tensor dtype int32 must be uint32 (test_collectives.py:{line})")
    _raises(agv, (x, meta[:2], RG([[0, 1]])), ShapeError,
            f"ncc.all_gather_v: metadata_tensor shape [2, 4] must be (rows, rank_list_size) with rows = 3 "
            f"(has_rdispls=False) on shared_hbm (test_collectives.py:{line})")
    _raises(agv, (x, np.zeros((4, 4), np.uint32), RG([[0, 1]]), True), UnsupportedError,
            f"ncc.all_gather_v: has_rdispls=True is not supported (test_collectives.py:{line})")
    big = np.zeros((3, 4), np.uint32)
    big[0, 0] = 5                                 # 5 elements from a 4-element src
    _raises(agv, (x, big, RG([[0, 1, 2, 3]])), BoundsError,
            f"ncc.all_gather_v: send_displ + send_count (metadata rows 1/0): elements [0, 5) exceed srcs[0]'s 4 "
            f"elements (test_collectives.py:{line})", n=4, lnc=2)

    def a2av_rd(x, m, group):
        out = nl.ndarray((8,), dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_to_all_v(srcs=[x], dsts=[out], replica_group=group, metadata_tensor=m, has_rdispls=True)
        return out
    line = a2av_rd.__code__.co_firstlineno + 2
    _raises(a2av_rd, (np.zeros(8, F32), np.zeros((4, 2), np.uint32), G2), UnsupportedError,
            f"ncc.all_to_all_v: has_rdispls=True is only supported on NeuronSwitch-based instances (trn3), not "
            f"trn2 (test_collectives.py:{line})", target="trn2")
    _raises(a2av_rd, (np.zeros(8, F32), np.zeros((4, 2), np.uint32), G2), UnsupportedError,
            f"ncc.all_to_all_v: on trn3 (NeuronSwitch) all_to_all_v requires LNC=2; launch the ranks as kernel[2] "
            f"(test_collectives.py:{line})", target="trn3")
    _raises(a2av_rd, (np.zeros(8, F32), np.zeros((4, 2), np.uint32), G2), ShapeError,
            f"ncc.all_to_all_v: rank-list [0, 1]: on trn3 each rank-list must be sequential ranks holding whole "
            f"devices (4 LNC2 ranks each, starting at a multiple of 4) of more than one device "
            f"(test_collectives.py:{line})", target="trn3", lnc=2)


def test_a_misspelt_keyword_is_a_type_error():
    kernel, _ = _one_op(lambda x, t, p, h: ncc.all_gather(srcs=[x], dsts=[h], replica_group=G2, colective_dim=0))
    with pytest.raises(TypeError, match="colective_dim"):
        _ranks(kernel, 2, np.zeros((4, 8), F32))


# ---- deadlocks -----------------------------------------------------------------------------------

def test_a_rank_that_finishes_without_the_collective_is_a_deadlock():
    lines = []

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if ncc.rank_id() == 0:
            lines.append(_next_line())
            ncc.all_reduce(srcs=[x], dsts=[out], replica_group=G2, op=nl.add)
        return out
    t0 = time.monotonic()
    with pytest.raises(DeadlockError) as info:
        _ranks(kernel, 2, np.zeros((2, 2), F32), barrier_timeout_s=30)
    assert time.monotonic() - t0 < 10
    assert str(info.value) == (f"ncc.all_reduce: rank 0 waits at ncc.all_reduce with ranks [0, 1] but rank 1 "
                               f"finished the kernel without reaching it (test_collectives.py:{lines[0]})")


def test_mismatched_collectives_and_shapes_are_deadlocks_naming_both_ranks():
    lines = []

    def kernel(x):
        out = nl.ndarray((4, 2), dtype=x.dtype, buffer=nl.shared_hbm)
        lines.append(_next_line())
        if ncc.rank_id() == 0:
            ncc.all_reduce(srcs=[x], dsts=[out[0:2]], replica_group=G2, op=nl.add)
        else:
            ncc.all_gather(srcs=[x], dsts=[out], replica_group=G2, collective_dim=0)
        return out
    with pytest.raises(DeadlockError) as info:
        _ranks(kernel, 2, np.zeros((2, 2), F32))
    a, b = lines[0] + 1, lines[0] + 3
    assert str(info.value) == (
        f"ncc.all_reduce: rank 0 issues ncc.all_reduce with srcs [[2, 2] float32 shared_hbm] dsts [[2, 2] float32 "
        f"shared_hbm] ReplicaGroup([[0, 1]]) op add (test_collectives.py:{a}) but rank 1 issues ncc.all_gather "
        f"with srcs [[2, 2] float32 shared_hbm] dsts [[4, 2] float32 shared_hbm] ReplicaGroup([[0, 1]]) "
        f"collective_dim 0 (test_collectives.py:{b}); every rank of the rank-list must issue the same collective "
        f"with the same shapes and parameters (test_collectives.py:{a})")

    def shapes(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=G2, op=nl.add)
        return out
    with pytest.raises(DeadlockError, match=r"rank 0 issues ncc\.all_reduce with srcs \[\[2, 2\] .* but rank 1 "
                                            r"issues ncc\.all_reduce with srcs \[\[3, 2\]"):
        _ranks(shapes, 2, nki.per_rank([np.zeros((2, 2), F32), np.zeros((3, 2), F32)]))


def test_ranks_waiting_on_each_other_in_different_groups_deadlock_at_once():
    lines = []
    plan = {0: ([[0, 1], [2]], [[0, 2], [1]]), 1: ([[1, 2], [0]], [[0, 1], [2]]), 2: ([[0, 2], [1]], [[1, 2], [0]])}

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        first, second = plan[int(ncc.rank_id())]
        lines.append(_next_line())
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=RG(first), op=nl.add)
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=RG(second), op=nl.add)
        return out
    # a cycle: rank 0 waits for rank 1 ([0, 1]), rank 1 for rank 2 ([1, 2]), rank 2 for rank 0 ([0, 2])
    t0 = time.monotonic()
    with pytest.raises(DeadlockError) as info:
        _ranks(kernel, 3, np.zeros((2, 2), F32), barrier_timeout_s=30)
    assert time.monotonic() - t0 < 10
    line = lines[0]
    assert str(info.value) == (f"ncc.all_reduce: rank 0 waits at ncc.all_reduce with ranks [0, 1] but rank 1 waits "
                               f"at ncc.all_reduce (test_collectives.py:{line}) with ranks [1, 2]: every rank must "
                               f"issue the same collectives in the same order (test_collectives.py:{line})")


def test_a_rank_that_stops_issuing_instructions_times_out():
    lines = []

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if ncc.rank_id() == 1:
            for _ in range(300):                   # a Python loop: no instruction
                time.sleep(0.01)
        lines.append(_next_line())
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=G2, op=nl.add)
        return out
    t0 = time.monotonic()
    with pytest.raises(DeadlockError) as info:
        _ranks(kernel, 2, np.zeros((2, 2), F32), barrier_timeout_s=0.3)
    assert time.monotonic() - t0 < 2.5
    assert str(info.value) == (f"ncc.all_reduce: rank 0 waits at ncc.all_reduce with ranks [0, 1] but rank 1 "
                               f"issued no instruction for 0.3 s without reaching it (test_collectives.py:{lines[0]})")


def test_lnc2_core_that_skips_the_collective_is_named():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 0:
            ncc.all_reduce(srcs=[x], dsts=[out], replica_group=G2, op=nl.add)
        return out
    with pytest.raises(DeadlockError, match=r"^ncc\.all_reduce: rank 0 \(core 0\) waits at ncc\.all_reduce with "
                                            r"ranks \[0, 1\] but rank 0 \(core 1\), rank 1 \(core 1\) finished the kernel "
                                            r"without reaching it"):
        _ranks(kernel, 2, np.zeros((2, 2), F32), lnc=2, barrier_timeout_s=30)


# ---- the caller's arrays, results, events -------------------------------------------------------

def test_failure_leaves_callers_arrays_untouched_and_success_writes_them_back():
    def kernel(x, group):
        nisa.dma_copy(dst=x, src=nl.zeros(x.shape, dtype=x.dtype, buffer=nl.sbuf))
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=group, op=nl.add)
        return out
    xs = [np.ones((2, 2), F32), np.full((2, 2), 2, F32)]
    keep = [a.copy() for a in xs]
    with pytest.raises(ShapeError):
        _ranks(kernel, 2, nki.per_rank(xs), RG([[0]]))         # rank 1 fails after rank 0 wrote its x
    for a, k in zip(xs, keep):
        np.testing.assert_array_equal(a, k)
    got = _ranks(kernel, 2, nki.per_rank(xs), G2)
    np.testing.assert_array_equal(got[0], np.zeros((2, 2), F32))
    for a in xs:
        np.testing.assert_array_equal(a, np.zeros((2, 2), F32))


def test_simulate_ranks_takes_inputs_per_rank():
    xs = _inputs(4, (2, 3))
    got = nkisim.simulate_ranks(ag_hbm, 4, lambda r: {"x": xs[r], "group": RG([[0, 1, 2, 3]]), "n": 4})
    np.testing.assert_array_equal(got[3], np.concatenate(xs))
    got = nki.simulate_ranks(ag_hbm, 2, [(xs[0], G2, 2), (xs[1], G2, 2)], lnc=2)
    np.testing.assert_array_equal(got[0], np.concatenate(xs[:2]))


def test_events_of_collectives():
    lines = []

    def kernel(x, group):
        out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        lines.append(_next_line())
        ncc.all_gather(srcs=[x], dsts=[out], replica_group=group, collective_dim=0)
        lines.append(_next_line())
        ncc.rank_id()
        return out
    with nkisim.trace.record() as events:
        _ranks(kernel, 2, np.zeros((2, 8), F32), G2)
    ours = [(e.op, e.api, e.engine, e.core, e.location, e.options.get("rank")) for e in events]
    ag_line, rid_line = sorted(set(lines))
    assert ours == [(op, f"ncc.{op}", eng, 0, f"test_collectives.py:{line}", r) for r in (0, 1)
                    for op, eng, line in (("all_gather", "dma", ag_line), ("rank_id", "sync", rid_line))]
    ag = events[0]
    assert [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ag.reads] == [
        ("srcs[0]", "shared_hbm", (2, 8), "float32", 64)]
    assert [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ag.writes] == [
        ("dsts[0]", "shared_hbm", (4, 8), "float32", 128)]
    assert ag.options == {"replica_group": "ReplicaGroup([[0, 1]])", "collective_dim": 0, "priority": None,
                          "rank": 0, "ranks": [0, 1]}


def test_a_rank_that_fails_stops_the_waiting_ranks_and_its_error_is_raised():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if ncc.rank_id() == 1:
            nisa.dma_copy(dst=out, src=x[0:1])          # a shape error on rank 1 only
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=G2, op=nl.add)
        return out
    t0 = time.monotonic()
    with pytest.raises(ShapeError) as info:
        _ranks(kernel, 2, np.zeros((2, 2), F32), barrier_timeout_s=30)
    assert time.monotonic() - t0 < 10
    assert str(info.value).startswith("nisa.dma_copy: ")
    assert "(raised on rank 1)" in getattr(info.value, "__notes__", [])


def test_a_rank_blocked_behind_a_computing_rank_does_not_time_out():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        me = int(ncc.rank_id())
        if me == 2:
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            end = time.monotonic() + 1.0            # busy issuing instructions past the timeout
            while time.monotonic() < end:
                nisa.dma_copy(dst=t, src=x)
        if me in (1, 2):                            # rank 1 waits for rank 2 ...
            ncc.all_reduce(srcs=[x], dsts=[out], replica_group=RG([[1, 2], [0]]), op=nl.add)
        if me in (0, 1):                            # ... and rank 0 for rank 1
            ncc.all_reduce(srcs=[x], dsts=[out], replica_group=RG([[0, 1], [2]]), op=nl.add)
        return out
    xs = _inputs(3, (2, 2))
    got = _ranks(kernel, 3, nki.per_rank(xs), barrier_timeout_s=0.3)
    np.testing.assert_array_equal(got[2], xs[1] + xs[2])
    np.testing.assert_array_equal(got[0], xs[0] + xs[1])


def test_lnc2_cores_filling_halves_before_a_collective_is_no_race():
    def kernel(x, group):
        me = nl.program_id(0)
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        h = x.shape[0] // 2
        nisa.dma_copy(dst=src[me * h:(me + 1) * h], src=x[me * h:(me + 1) * h])
        out = nl.ndarray((2 * x.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_gather(srcs=[src], dsts=[out], replica_group=group, collective_dim=0)
        return out
    xs = _inputs(2, (4, 3))
    got = _ranks(kernel, 2, nki.per_rank(xs), G2, lnc=2, detect_races=True, uninitialized_reads="raise")
    for r in range(2):
        np.testing.assert_array_equal(got[r], np.concatenate(xs))


def test_launch_arguments_are_checked():
    with pytest.raises(ValueError, match=r"^nki\.simulate: ranks must be a positive integer, got 0$"):
        nki.simulate(ar_hbm, ranks=0)(np.zeros((2, 2), F32), G2)
    with pytest.raises(ValueError, match=r"^per_rank: 3 values given for 2 ranks$"):
        nki.simulate(ar_hbm, ranks=2)(nki.per_rank([np.zeros((2, 2), F32)] * 3), G2)
    with pytest.raises(ValueError, match=r"^nkisim\.simulate_ranks: 1 inputs given for 2 ranks$"):
        nkisim.simulate_ranks(ar_hbm, 2, [{"x": np.zeros((2, 2), F32), "group": G2}])
    with pytest.raises(TypeError, match=r"^nkisim\.simulate_ranks: unknown option\(s\) \['colour'\]"):
        nkisim.simulate_ranks(ar_hbm, 2, {"x": np.zeros((2, 2), F32), "group": G2}, colour=1)


def test_a_list_argument_is_located_at_the_callers_line():
    with pytest.raises(nkisim.errors.KernelArgumentError) as info:
        line = _next_line()
        nki.simulate(permute, ranks=2)(np.zeros((2, 2), F32), [(0, 1)])
    assert str(info.value) == (f"kernel argument: argument 'pairs' is a list; NKI kernels do not take list "
                               f"arguments: pass a tuple instead (test_collectives.py:{line})")


def test_a_plain_lnc2_launch_is_one_rank_of_two_cores():
    x = _inputs(1, (4, 4))[0]
    np.testing.assert_array_equal(nki.simulate(ar_hbm)[2](x, RG([[0]])), x)

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 1:
            ncc.all_reduce(srcs=[x], dsts=[out], replica_group=RG([[0]]), op=nl.add)
        return out
    with pytest.raises(DeadlockError, match=r"^ncc\.all_reduce: rank 0 \(core 1\) waits at ncc\.all_reduce with "
                                            r"ranks \[0\] but rank 0 \(core 0\) finished the kernel without "
                                            r"reaching it"):
        nki.simulate(kernel, barrier_timeout_s=30)[2](x)


# ---- arguments shared by all ranks, and per_rank outside a multi-rank launch -------------------

def _store_from(x, v):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=v)
    nisa.dma_copy(dst=x, src=t)
    return x


def test_a_shared_input_written_alike_by_every_rank_reaches_the_caller():
    x = np.zeros((2, 4), np.float32)
    v = np.arange(8, dtype=np.float32).reshape(2, 4)
    nki.simulate(_store_from, ranks=4)(x, v)
    np.testing.assert_array_equal(x, v)


def test_a_shared_input_written_differently_by_two_ranks_raises_and_is_kept():
    x = np.zeros((2, 4), np.float32)
    values = nki.per_rank([np.full((2, 4), r, np.float32) for r in range(3)])
    with pytest.raises(KernelArgumentError, match=r"^nki\.simulate: ranks 1 and 2 wrote different values into one "
                                                  r"input array given to every rank; give each rank its own "
                                                  r"with nki\.per_rank\(\.\.\.\) \(test_collectives\.py:\d+\)$"):
        nki.simulate(_store_from, ranks=3)(x, values)
    np.testing.assert_array_equal(x, 0)


def test_per_rank_in_a_plain_launch_names_the_parameter():
    x = np.ones((2, 4), np.float32)
    with pytest.raises(KernelArgumentError, match=r"^kernel argument: argument 'v' is nki\.per_rank\(\.\.\.\), "
                                                  r"which only a multi-rank launch takes: run "
                                                  r"nki\.simulate\(kernel, ranks=N\) \(test_collectives\.py:\d+\)$"):
        nki.simulate(_store_from)(x, nki.per_rank([x, x]))
