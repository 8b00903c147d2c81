"""nisa.nc_stream_shuffle, nc_n_gather, local_gather, nonzero_with_count, sequence_bounds (and
dma_compute): values against NumPy references written from the docs' semantics, every rule, the
events."""
import re

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import (ArgumentError, BoundsError, DtypeError, MemorySpaceError, ShapeError,
                           UnsupportedError)
from conftest import simulate, tile_out
from _events import record
from _tiles import load, sb

BF16 = ml_dtypes.bfloat16


def err(op, what):
    return rf"^nisa\.{op}: {re.escape(what)} \(test_gather\.py:\d+\)$"


# ---- nc_stream_shuffle ------------------------------------------------------------------------

def shuffle_ref(src, dst, mask):
    """The docs' formula: per quadrant k, out[k*32+i] = src[k*32+mask[i]]; 255 keeps dst."""
    out = dst.copy()
    for o in range(dst.shape[0]):
        k, i = divmod(o, 32)
        if mask[i] != 255:
            out[o] = src[k * 32 + mask[i]]
    return out


def run_shuffle(x, mask, dst_parts=None, dtype=None, buffer=nl.sbuf, dst_init=None, target="trn2"):
    def kernel(x):
        s = load(x, buffer)
        d = nl.ndarray((dst_parts or x.shape[0],) + x.shape[1:], dtype=x.dtype, buffer=buffer)
        nisa.memset(dst=d, value=dst_init if dst_init is not None else -1)
        nisa.nc_stream_shuffle(dst=d, src=s, shuffle_mask=mask)
        return tile_out(d)
    return simulate(kernel, x, target=target)


@pytest.mark.parametrize("p", [32, 64, 128])
@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32])
def test_shuffle_rotates_each_quadrant(rng, p, dtype):
    x = (rng.standard_normal((p, 7)) * 100).astype(dtype)
    mask = [(i - 1) % 32 for i in range(32)]
    got = run_shuffle(x, mask)
    np.testing.assert_array_equal(got.view(np.uint8), shuffle_ref(x, x, mask).view(np.uint8))


def test_shuffle_broadcasts_one_partition_and_keeps_255(rng):
    x = rng.standard_normal((1, 2, 5)).astype(np.float32)
    got = run_shuffle(x, [0] * 32, dst_parts=32)
    np.testing.assert_array_equal(got, np.broadcast_to(x, (32, 2, 5)))
    y = rng.standard_normal((32, 4)).astype(np.float32)
    mask = [255 if i % 3 else 31 - i for i in range(32)]
    got = run_shuffle(y, mask, dst_init=7.0, buffer=nl.psum)
    np.testing.assert_array_equal(got, shuffle_ref(y, np.full_like(y, 7.0), mask))


def test_shuffle_short_dst_takes_first_mask_entries_and_in_place(rng):
    x = rng.standard_normal((32, 3)).astype(np.float32)
    mask = list(range(31, -1, -1))
    got = run_shuffle(x, mask, dst_parts=5)
    np.testing.assert_array_equal(got, x[[31, 30, 29, 28, 27]])

    def kernel(x):
        a = sb(x)
        nisa.nc_stream_shuffle(dst=a, src=a, shuffle_mask=mask)
        return tile_out(a)
    np.testing.assert_array_equal(simulate(kernel, x), x[::-1])


def test_shuffle_start_partition_rules(rng):
    x = rng.standard_normal((128, 4)).astype(np.float32)

    def kernel(x, s0, d0, n, sn=1):
        a = sb(x)
        b = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=b, value=0.0)
        nisa.nc_stream_shuffle(dst=b[d0:d0 + n], src=a[s0:s0 + sn], shuffle_mask=[0] * 32)
        return tile_out(b)
    got = simulate(kernel, x, 96, 32, 32)         # 32 active: starts 0/32/64/96
    np.testing.assert_array_equal(got[32:64], np.broadcast_to(x[96], (32, 4)))
    np.testing.assert_array_equal(got[:32], 0)
    with pytest.raises(ShapeError, match=err("nc_stream_shuffle", "src starts at partition 16; with 32 active "
                                                                  "partitions the start partition must be 0 or "
                                                                  "32 or 64 or 96")):
        simulate(kernel, x, 16, 0, 32)
    with pytest.raises(ShapeError, match=err("nc_stream_shuffle", "dst starts at partition 32; with 64 active "
                                                                  "partitions the start partition must be 0 or 64")):
        simulate(kernel, x, 0, 32, 33, 64)
    got = simulate(kernel, x, 0, 64, 64, 64)
    np.testing.assert_array_equal(got[64:], x[[0] * 32 + [32] * 32])
    with pytest.raises(ShapeError, match=err("nc_stream_shuffle", "src starts at partition 32; with 96 active "
                                                                  "partitions the start partition must be 0")):
        simulate(kernel, x, 32, 0, 96, 96)


def test_shuffle_rules(rng):
    x = rng.standard_normal((32, 4)).astype(np.float32)
    with pytest.raises(ArgumentError, match=err("nc_stream_shuffle", "shuffle_mask has 31 elements; it must have 32")):
        run_shuffle(x, [0] * 31)
    with pytest.raises(ArgumentError, match=err("nc_stream_shuffle", "shuffle_mask[3] is 32; it must be a source "
                                                                     "partition 0..31 or 255 (leave the output "
                                                                     "partition unmodified)")):
        run_shuffle(x, [0, 1, 2, 32] + [0] * 28)
    with pytest.raises(ArgumentError, match=err("nc_stream_shuffle", "shuffle_mask must be a list of 32 ints, got 3")):
        run_shuffle(x, 3)
    with pytest.raises(BoundsError, match=err("nc_stream_shuffle", "shuffle_mask[0] = 1 reads src partition 1 of "
                                                                   "quadrant 0, but src has 1 partitions")):
        run_shuffle(x[:1], [1] * 32, dst_parts=32)

    def kernel(x, dtype, free):
        a = sb(x)
        b = nl.ndarray((32, free), dtype=dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=b, src=a, shuffle_mask=list(range(32)))
        return tile_out(b)
    with pytest.raises(DtypeError, match=err("nc_stream_shuffle", "dst dtype bfloat16 must equal src dtype float32")):
        simulate(kernel, x, nl.bfloat16, 4)
    with pytest.raises(ShapeError, match=err("nc_stream_shuffle", "dst has 5 elements per partition, src has 4; "
                                                                  "they must match")):
        simulate(kernel, x, nl.float32, 5)

    def hbm_kernel(x):
        b = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=b, src=x, shuffle_mask=list(range(32)))
        return tile_out(b)
    with pytest.raises(MemorySpaceError, match=err("nc_stream_shuffle", "src is in shared_hbm (HBM); must be in psum or sbuf")):
        simulate(hbm_kernel, x)


def test_shuffle_event(rng):
    x = rng.standard_normal((64, 4)).astype(np.float32)

    def kernel(x):
        a = sb(x)
        b = nl.ndarray((64, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=b, src=a, shuffle_mask=[5] * 32)
        return tile_out(b)
    for fast in (True, False):
        out, events = record(kernel, x, fast=fast)
        ev = [e for e in events if e.op == "nc_stream_shuffle"]
        assert len(ev) == 1 and ev[0].engine == "vector"
        assert [(o.role, o.shape) for o in ev[0].reads] == [("src", (64, 4))]
        assert [(o.role, o.shape) for o in ev[0].writes] == [("dst", (64, 4))]
        assert ev[0].options["shuffle_mask"] == (5,) * 32
        np.testing.assert_array_equal(out, x[[5] * 32 + [37] * 32])


# ---- nc_n_gather ------------------------------------------------------------------------------

def run_n_gather(data, idx, dst_dtype=None, idx_dtype=nl.uint32):
    def kernel(data, idx):
        d = sb(data)
        i = sb(idx, idx_dtype)
        out = nl.ndarray(idx.shape, dtype=dst_dtype or data.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=out, data=d, indices=i)
        return tile_out(out)
    return simulate(kernel, data, idx)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32, np.uint16])
def test_n_gather_per_partition(rng, dtype):
    data = (rng.standard_normal((16, 3, 10)) * 1000).astype(dtype)
    idx = rng.integers(0, 30, (16, 2, 9)).astype(np.uint32)
    got = run_n_gather(data, idx)
    flat = data.reshape(16, -1)
    want = np.array([[flat[p, j] for j in idx[p].reshape(-1)] for p in range(16)]).reshape(idx.shape)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_n_gather_rules(rng):
    data = rng.standard_normal((4, 8)).astype(np.float32)
    idx = np.zeros((4, 3), np.uint32)
    with pytest.raises(DtypeError, match=err("nc_n_gather", "indices dtype int32 must be uint32")):
        run_n_gather(data, idx.astype(np.int32), idx_dtype=nl.int32)
    with pytest.raises(DtypeError, match=err("nc_n_gather", "dst dtype bfloat16 must equal data dtype float32")):
        run_n_gather(data, idx, dst_dtype=nl.bfloat16)
    with pytest.raises(BoundsError, match=err("nc_n_gather", "indices[2, 1] = 8 is outside 0:8 (data has 8 "
                                                             "elements per partition)")):
        run_n_gather(data, np.array([[0] * 3, [1] * 3, [0, 8, 9], [0] * 3], np.uint32))

    def kernel(data, idx, dparts, free, buffer):
        d = load(data, buffer)
        i = sb(idx)
        out = nl.ndarray((dparts, free), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=out, data=d, indices=i)
        return tile_out(out)
    with pytest.raises(ShapeError, match=err("nc_n_gather", "data partition dim 4 does not match dst partition dim 3")):
        simulate(kernel, data, idx, 3, 3, nl.sbuf)
    with pytest.raises(ShapeError, match=err("nc_n_gather", "dst has 2 elements per partition, indices has 3; "
                                                            "they must match")):
        simulate(kernel, data, idx, 4, 2, nl.sbuf)
    with pytest.raises(MemorySpaceError, match=err("nc_n_gather", "data is in psum; must be in sbuf")):
        simulate(kernel, data, idx, 4, 3, nl.psum)


def test_n_gather_event(rng):
    data = rng.standard_normal((2, 8)).astype(np.float32)
    idx = np.array([[7, 0], [3, 3]], np.uint32)

    def kernel(data, idx):
        out = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=out, data=sb(data), indices=sb(idx))
        return tile_out(out)
    out, events = record(kernel, data, idx)
    ev = [e for e in events if e.op == "nc_n_gather"]
    assert len(ev) == 1 and ev[0].engine == "gpsimd"
    assert [o.role for o in ev[0].reads] == ["data", "indices"] and [o.role for o in ev[0].writes] == ["dst"]
    np.testing.assert_array_equal(out, [[data[0, 7], data[0, 0]], [data[1, 3], data[1, 3]]])


# ---- local_gather -----------------------------------------------------------------------------

def local_gather_ref(src, index, e, nv):
    """The docs' NumPy semantics: per 16-partition core, its indices flattened partition dim
    first (order='F'); each partition of the core takes E elements at every index."""
    p = src.shape[0]
    flat = src.reshape(p, -1)
    out = np.empty((p, nv * e), src.dtype)
    for c in range(p // 16):
        ind = index[c * 16:(c + 1) * 16].flatten(order="F")[:nv]
        for j, i in enumerate(ind):
            out[c * 16:(c + 1) * 16, j * e:(j + 1) * e] = flat[c * 16:(c + 1) * 16, i:i + e]
    return out


def run_local_gather(src, index, e=1, nv=None, dst_free=None, dst_dtype=None):
    def kernel(src, index):
        s = sb(src)
        i = sb(index)
        n = nv if nv is not None else index.shape[1] * 16
        out = nl.ndarray((src.shape[0], dst_free or n * e), dtype=dst_dtype or src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=out, src_buffer=s, index=i, num_elem_per_idx=e, num_valid_indices=nv)
        return tile_out(out)
    return simulate(kernel, src, index, target="trn2")


def test_local_gather_docs_example(rng):
    src = (rng.random((128, 512, 4)) * 100).astype(np.float32)
    per_core = rng.integers(0, 512, (16, 4)).astype(np.uint16)
    index = np.tile(per_core, (8, 1))
    got = run_local_gather(src, index * 4, e=4, nv=64)
    np.testing.assert_array_equal(got, local_gather_ref(src, index * 4, 4, 64))
    # every core with its own indices, the rows it reads really are each partition's own
    src2 = rng.standard_normal((32, 40)).astype(BF16)
    index2 = rng.integers(0, 39, (32, 3)).astype(np.uint16)
    got = run_local_gather(src2, index2, e=2, nv=45)
    np.testing.assert_array_equal(got.view(np.uint16), local_gather_ref(src2, index2, 2, 45).view(np.uint16))
    got = run_local_gather(src2.astype(np.float32), index2)      # default: every index, E = 1
    np.testing.assert_array_equal(got, local_gather_ref(src2.astype(np.float32), index2, 1, 48))


def test_local_gather_rules(rng):
    src = rng.standard_normal((16, 64)).astype(np.float32)
    index = np.zeros((16, 2), np.uint16)
    with pytest.raises(ArgumentError, match=err("local_gather", "num_elem_per_idx 3 must be one of "
                                                                "[1, 2, 4, 8, 16, 32]")):
        run_local_gather(src, index, e=3, nv=4)
    with pytest.raises(ShapeError, match=err("local_gather", "num_valid_indices 33 exceeds the 32 indices in each "
                                                             "16-partition slice of index (16, 2)")):
        run_local_gather(src, index, nv=33)
    with pytest.raises(ShapeError, match=err("local_gather", "dst has 5 elements per partition; it must hold "
                                                             "num_valid_indices * num_elem_per_idx = 4 * 2 = 8")):
        run_local_gather(src, index, e=2, nv=4, dst_free=5)
    with pytest.raises(DtypeError, match=err("local_gather", "dst dtype bfloat16 must equal src_buffer dtype "
                                                             "float32 (no casting)")):
        run_local_gather(src, index, dst_dtype=nl.bfloat16)
    with pytest.raises(DtypeError, match=err("local_gather", "index dtype uint32 must be uint16")):
        run_local_gather(src, index.astype(np.uint32))
    with pytest.raises(ShapeError, match=err("local_gather", "src_buffer partition dim 8 must be a multiple of 16 "
                                                             "(partitions per GpSimd core)")):
        run_local_gather(src[:8], index[:8])
    with pytest.raises(ShapeError, match=err("local_gather", "indices per GpSimd core 4097 exceeds 4096 on trn2")):
        run_local_gather(np.zeros((16, 8), np.float32), np.zeros((16, 257), np.uint16), nv=4097)
    run_local_gather(np.zeros((16, 8), np.float32), np.zeros((16, 256), np.uint16), nv=4096)
    bad = index.copy()
    bad[3, 1] = 63
    with pytest.raises(BoundsError, match=err("local_gather", "index 63 (GpSimd core 0, index 19) with "
                                                              "num_elem_per_idx 2 reads past the 64 elements per "
                                                              "partition of src_buffer")):
        run_local_gather(src, bad, e=2)


def test_local_gather_event(rng):
    src = rng.standard_normal((16, 8)).astype(np.float32)

    def kernel(src, index):
        out = nl.ndarray((16, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.local_gather(dst=out, src_buffer=sb(src), index=sb(index), num_valid_indices=4)
        return tile_out(out)
    out, events = record(kernel, src, np.full((16, 1), 2, np.uint16))
    ev = [e for e in events if e.op == "local_gather"]
    assert len(ev) == 1 and ev[0].engine == "gpsimd"
    assert [o.role for o in ev[0].reads] == ["src_buffer", "index"]
    assert ev[0].options["num_valid_indices"] == 4
    np.testing.assert_array_equal(out, np.repeat(src[:, 2:3], 4, axis=1))


# ---- nonzero_with_count -----------------------------------------------------------------------

def nonzero_ref(row, offset, pad):
    hit = [i + offset for i, v in enumerate(row) if v != 0]
    return hit + [pad] * (len(row) - len(hit)) + [len(hit)]


def run_nonzero(x, offset=0, pad=-1, target="trn2", dst_free=None, dst_dtype=nl.int32):
    def kernel(x):
        s = sb(x)
        d = nl.ndarray((x.shape[0], dst_free or x.shape[1] + 1), dtype=dst_dtype, buffer=nl.sbuf)
        nisa.memset(dst=d, value=5)
        nisa.nonzero_with_count(dst=d, src=s, index_offset=offset, padding_val=pad)
        return tile_out(d)
    return simulate(kernel, x, target=target)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_nonzero_docs_example_and_core_partitions(rng, dtype):
    x = np.array([[0, 1, 1, 0, 0, 1, 0, 0]], dtype)
    np.testing.assert_array_equal(run_nonzero(x, offset=16), [[17, 18, 21, -1, -1, -1, -1, -1, 3]])
    y = (rng.random((128, 20)) < 0.3).astype(dtype) * rng.integers(1, 9, (128, 20)).astype(dtype)
    got = run_nonzero(y, offset=3, pad=-7, target="trn3")
    for p in range(128):
        want = nonzero_ref(y[p], 3, -7) if p % 16 == 0 else [5] * 21
        np.testing.assert_array_equal(got[p], want)


def test_nonzero_rules():
    x = np.ones((16, 4), np.float32)
    with pytest.raises(UnsupportedError, match=err("nonzero_with_count", "nonzero_with_count needs NeuronCore-v3 "
                                                                         "(trn2) or newer, not trn1")):
        run_nonzero(x, target="trn1")
    with pytest.raises(ShapeError, match=err("nonzero_with_count", "dst has 4 elements per partition; it must have "
                                                                   "src's 4 + 1 (the count)")):
        run_nonzero(x, dst_free=4)
    with pytest.raises(DtypeError, match=err("nonzero_with_count", "dst dtype float32 is not supported on trn2; "
                                                                   "expected one of int32")):
        run_nonzero(x, dst_dtype=nl.float32)
    with pytest.raises(DtypeError, match=err("nonzero_with_count", "src dtype bfloat16 is not supported on trn2; "
                                                                   "expected one of float32, int32")):
        run_nonzero(x.astype(BF16))
    with pytest.raises(DtypeError, match=err("nonzero_with_count", "padding_val 2147483648 is outside the int32 range")):
        run_nonzero(x, pad=2**31)
    with pytest.raises(ArgumentError, match=err("nonzero_with_count", "index_offset must be an int, got 1.5")):
        run_nonzero(x, offset=1.5)


def test_nonzero_event():
    x = np.array([[0, 2, 0, 3]] * 32, np.float32)
    out, events = record(lambda x: run_nonzero_kernel(x), x)
    ev = [e for e in events if e.op == "nonzero_with_count"]
    assert len(ev) == 1 and ev[0].engine == "gpsimd"
    assert ev[0].options["partitions"] == (0, 16) and ev[0].options["padding_val"] == -1
    np.testing.assert_array_equal(out[16], [1, 3, -1, -1, 2])


def run_nonzero_kernel(x):
    s = sb(x)
    d = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(dst=d, src=s)
    return tile_out(d)


# ---- sequence_bounds --------------------------------------------------------------------------

def bounds_ref(seq):
    """The docs' reference: runs of equal neighbours; padding (0) -> (n, -1)."""
    n = len(seq)
    lo, hi = np.zeros(n), np.zeros(n)
    for i in range(n):
        lo[i] = n if seq[i] == 0 else (lo[i - 1] if i and seq[i] == seq[i - 1] else i)
    for i in range(n - 1, -1, -1):
        hi[i] = -1 if seq[i] == 0 else (hi[i + 1] if i < n - 1 and seq[i] == seq[i + 1] else i + 1)
    return np.stack([lo, hi])[None]


def run_bounds(ids, dst_dtype=None, dst_shape=None):
    def kernel(ids):
        d = nl.ndarray(dst_shape or (1, 2, ids.shape[1]), dtype=dst_dtype or ids.dtype, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=sb(ids))
        return tile_out(d)
    return simulate(kernel, ids, target="trn2")


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_sequence_bounds_docs_example(rng, dtype):
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], dtype)
    np.testing.assert_array_equal(run_bounds(ids), [[[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]]])
    for n in (1, 32, 200):
        seq = np.sort(rng.integers(0, max(2, n // 3), n)).reshape(1, n).astype(dtype)
        np.testing.assert_array_equal(run_bounds(seq), bounds_ref(seq[0]))
    seq = np.array([[2, 2, 5, 2, 0, 0, 1]], dtype)          # a repeated id after another: a new run
    np.testing.assert_array_equal(run_bounds(seq), bounds_ref(seq[0]))


def test_sequence_bounds_rules():
    ids = np.array([[1, 1, 2]], np.float32)
    with pytest.raises(ShapeError, match=err("sequence_bounds", "dst has 3 elements per partition; it must be "
                                                                "(1, 2, 3): a start and an end index per segment id")):
        run_bounds(ids, dst_shape=(1, 3))
    with pytest.raises(ShapeError, match=err("sequence_bounds", "segment_ids partition dim is 2; it must be 1")):
        run_bounds(np.ones((2, 3), np.float32), dst_shape=(1, 2, 3))
    with pytest.raises(DtypeError, match=err("sequence_bounds", "dst dtype bfloat16 is not supported on trn2; "
                                                                "expected one of float32, int32")):
        run_bounds(ids, dst_dtype=nl.bfloat16)
    with pytest.raises(ArgumentError, match=err("sequence_bounds", "segment_ids[0, 1] is -1.0; segment ids must "
                                                                   "be non-negative")):
        run_bounds(np.array([[1, -1, 2]], np.float32))


def test_sequence_bounds_event():
    ids = np.array([[3, 3, 0]], np.int32)

    def kernel(ids):
        d = nl.ndarray((1, 2, 3), dtype=nl.int32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=sb(ids))
        return tile_out(d)
    out, events = record(kernel, ids)
    ev = [e for e in events if e.op == "sequence_bounds"]
    assert len(ev) == 1 and ev[0].engine == "gpsimd"
    assert [o.role for o in ev[0].reads] == ["segment_ids"] and [o.role for o in ev[0].writes] == ["dst"]
    np.testing.assert_array_equal(out, [[[0, 0, 3], [2, 2, -1]]])


# ---- dma_compute ------------------------------------------------------------------------------

def test_dma_compute_sums_in_fp32_and_rounds_once(rng):
    a = rng.standard_normal((4, 6)).astype(BF16)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    c = rng.standard_normal((2, 12)).astype(BF16)

    def kernel(a, b, c):
        out = nl.ndarray((4, 6), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[a, sb(b), c], reduce_op=nl.add, scales=[1.0, 1.0, 1.0])
        return out
    got = simulate(kernel, a, b, c, target="trn2")
    want = ((a.astype(np.float32) + b) + c.astype(np.float32).reshape(4, 6)).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))

    def into_sbuf(a):                        # dst is also a source: read before written
        t = sb(a)
        nisa.dma_compute(t, (t, a), nl.add)
        return tile_out(t)
    np.testing.assert_array_equal(simulate(into_sbuf, b), b + b)


def test_dma_compute_gather_and_scatter_rmw(rng):
    table = rng.standard_normal((10, 5)).astype(np.float32)
    acc = rng.standard_normal((3, 5)).astype(np.float32)
    idx = np.array([[7], [2], [9]], np.int32)

    def gather(table, acc, idx):
        d = sb(acc)
        view = table.ap(pattern=[[5, 3], [1, 5]], vector_offset=sb(idx), indirect_dim=0)
        nisa.dma_compute(dst=d, srcs=[view, d], reduce_op=nl.add)
        return tile_out(d)
    np.testing.assert_array_equal(simulate(gather, table, acc, idx), acc + table[[7, 2, 9]])

    def scatter(table, acc, idx):
        view = table.ap(pattern=[[5, 3], [1, 5]], vector_offset=sb(idx), indirect_dim=0)
        nisa.dma_compute(dst=view, srcs=[view, sb(acc)], reduce_op=nl.add)
        return table
    want = table.copy()
    want[[7, 2, 9]] += acc
    np.testing.assert_array_equal(simulate(scatter, table.copy(), acc, idx), want)

    def skip(table, acc, idx, mode):
        d = sb(acc)
        view = table.ap(pattern=[[5, 3], [1, 5]], vector_offset=sb(idx), indirect_dim=0)
        nisa.dma_compute(dst=d, srcs=[d, view], reduce_op=nl.add, oob_mode=mode)
        return tile_out(d)
    bad = np.array([[7], [10], [9]], np.int32)
    got = simulate(skip, table, acc, bad, nisa.oob_mode.skip)
    np.testing.assert_array_equal(got, acc + np.where([[1], [0], [1]], table[[7, 0, 9]], 0))
    with pytest.raises(BoundsError, match=r"^nisa\.dma_compute: vector_offset index 10 at partition 1 is outside "
                                          r"0:10 rows of .* \(oob_mode=error\) \(test_gather\.py:\d+\)$"):
        simulate(skip, table, acc, bad, nisa.oob_mode.error)



def test_dma_compute_scatter_with_a_repeated_index_raises_and_keeps_the_table(rng):
    """unique_indices=True (the only mode the docs support): two updates of one row would race."""
    table = rng.standard_normal((10, 5)).astype(np.float32)
    acc = rng.standard_normal((3, 5)).astype(np.float32)

    def scatter(table, acc, idx):
        view = table.ap(pattern=[[5, 3], [1, 5]], vector_offset=sb(idx), indirect_dim=0)
        nisa.dma_compute(dst=view, srcs=[view, sb(acc)], reduce_op=nl.add)
        return table
    before = table.copy()
    with pytest.raises(ArgumentError, match=r"^nisa\.dma_compute: unique_indices=True but the dst index names "
                                            r"row 2 twice \(index rows 0 and 2\): non-unique indices are not "
                                            r"supported \(their updates race\) \(test_gather\.py:\d+\)$"):
        simulate(scatter, table, acc, np.array([[2], [5], [2]], np.int32))
    np.testing.assert_array_equal(table, before)

    def gather(table, acc, idx):                 # reading one row twice is fine
        d = sb(acc)
        view = table.ap(pattern=[[5, 3], [1, 5]], vector_offset=sb(idx), indirect_dim=0)
        nisa.dma_compute(dst=d, srcs=[view, d], reduce_op=nl.add)
        return tile_out(d)
    np.testing.assert_array_equal(simulate(gather, table, acc, np.array([[2], [5], [2]], np.int32)),
                                  acc + table[[2, 5, 2]])

def test_dma_compute_rules(rng):
    a = rng.standard_normal((2, 4)).astype(np.float32)

    def kernel(a, srcs_n=2, op=nl.add, scales=None, free=4, unique=True, psum=False):
        out = nl.ndarray((2, free), dtype=nl.float32, buffer=nl.shared_hbm)
        srcs = [a] * srcs_n
        if psum:
            p = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.psum)
            nisa.memset(dst=p, value=0.0)
            srcs = [a, p]
        nisa.dma_compute(dst=out, srcs=srcs, reduce_op=op, scales=scales and list(scales), unique_indices=unique)
        return out
    want = a.copy()
    for _ in range(15):
        want = want + a                      # fp32, left to right
    np.testing.assert_array_equal(simulate(kernel, a, 16), want)
    with pytest.raises(ShapeError, match=err("dma_compute", "number of srcs 17 exceeds 16 on trn3")):
        simulate(kernel, a, 17)
    with pytest.raises(ArgumentError, match=err("dma_compute", "reduce_op must be nl.add (the only one supported), "
                                                               "got maximum")):
        simulate(kernel, a, op=nl.maximum)
    with pytest.raises(ArgumentError, match=err("dma_compute", "scales must all be 1.0 (the only value supported), "
                                                               "got [1.0, 2.0]")):
        simulate(kernel, a, scales=(1.0, 2.0))
    with pytest.raises(ShapeError, match=err("dma_compute", "scales must be None or one scale per source (2), "
                                                            "got [1.0]")):
        simulate(kernel, a, scales=(1.0,))
    with pytest.raises(ShapeError, match=err("dma_compute", "srcs[0] has 8 elements, dst has 10 "
                                                            "(shapes (2, 4) vs (2, 5))")):
        simulate(kernel, a, free=5)
    with pytest.raises(MemorySpaceError, match=err("dma_compute", "srcs[1] is in psum; must be in "
                                                                  "private_hbm or sbuf or shared_hbm")):
        simulate(kernel, a, psum=True)

    def rmw(table, idx, n, unique):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=d, value=0.0)
        view = table.ap(pattern=[[4, 2], [1, 4]], vector_offset=sb(idx), indirect_dim=0)
        nisa.dma_compute(dst=d, srcs=[view, d, d][:n], reduce_op=nl.add, unique_indices=unique)
        return tile_out(d)
    idx = np.array([[1], [0]], np.int32)
    with pytest.raises(UnsupportedError, match=err("dma_compute", "unique_indices=False (non-unique indices) is not "
                                                                  "supported for a read-modify-write with vector_offset")):
        simulate(rmw, a, idx, 2, False)
    with pytest.raises(UnsupportedError, match=err("dma_compute", "a read-modify-write with vector_offset takes "
                                                                  "exactly 2 srcs, got 3")):
        simulate(rmw, a, idx, 3, True)


def test_dma_compute_event(rng):
    a = rng.standard_normal((2, 4)).astype(np.float32)

    def kernel(a, b):
        out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[a, b], reduce_op=nl.add)
        return out
    for fast in (True, False):
        out, events = record(kernel, a, a)
        ev = [e for e in events if e.op == "dma_compute"]
        assert len(ev) == 1 and ev[0].engine == "dma"
        assert [(o.role, o.shape) for o in ev[0].reads] == [("srcs[0]", (2, 4)), ("srcs[1]", (2, 4))]
        assert [o.role for o in ev[0].writes] == ["dst"] and "srcs" not in ev[0].options
        assert ev[0].options["reduce_op"] == "add"
        np.testing.assert_array_equal(out, a + a)


# ---- topk -------------------------------------------------------------------------------------

def topk_ref(src, n, k, val_init, idx_init):
    """Per 16-partition group: its snake (position s at partition s % 16, column s // 16), the K
    largest of the first n (ties: lower position first), ascending, written back as a snake."""
    val, idx = val_init.copy(), idx_init.copy()
    for b in range(0, src.shape[0], 16):
        snake = [(float(src[b + s % 16, s // 16]), s) for s in range(n)]
        best = sorted(snake, key=lambda vs: (-vs[0], vs[1]))[:k][::-1]
        for j, (v, s) in enumerate(best):
            val[b + j % 16, j // 16] = v
            idx[b + j % 16, j // 16] = s
    return val, idx


def run_topk(src, n, k, src_dtype=nl.bfloat16, val_dtype=nl.bfloat16, idx_dtype=nl.uint32, parts=None):
    def kernel(src):
        s = sb(src, src_dtype)
        p = parts or src.shape[0]
        v = nl.ndarray((p, k), dtype=val_dtype, buffer=nl.sbuf)
        i = nl.ndarray((p, k), dtype=idx_dtype, buffer=nl.sbuf)
        nisa.memset(dst=v, value=-5.0)
        nisa.memset(dst=i, value=7)
        nisa.topk(val_dst=v, idx_dst=i, src=s, n=n)
        return tile_out(v, i)
    return simulate(kernel, src, target="trn2")


@pytest.mark.parametrize("p,n,k", [(16, 42, 8), (32, 100, 17), (128, 512, 64), (16, 8, 8), (16, 300, 1)])
def test_topk_snake(rng, p, n, k):
    cols = -(-n // 16) + 1                     # one spare column: positions past n are ignored
    src = rng.standard_normal((p, cols)).astype(BF16)
    src[0, 0] = src[1, 0]                      # a tie (positions 0 and 1)
    val, idx = run_topk(src, n, k)
    want_v, want_i = topk_ref(src, n, k, np.full((p, k), -5.0, BF16), np.full((p, k), 7, np.uint32))
    np.testing.assert_array_equal(val.view(np.uint16), want_v.view(np.uint16))
    np.testing.assert_array_equal(idx, want_i)


def test_topk_rules(rng):
    src = rng.standard_normal((16, 4)).astype(BF16)
    with pytest.raises(ShapeError, match=err("topk", "n 7 must satisfy 8 <= n < 65536")):
        run_topk(src, 7, 4)
    with pytest.raises(ShapeError, match=err("topk", "K 20 (val_dst free dim) must satisfy 1 <= K < 32768 and "
                                                     "K <= n (16)")):
        run_topk(src, 16, 20)
    with pytest.raises(ShapeError, match=err("topk", "src free dim 4 must be at least ceil(n / 16) = 5")):
        run_topk(src, 65, 4)
    with pytest.raises(DtypeError, match=err("topk", "src dtype float32 is not supported on trn2; expected one of "
                                                     "bfloat16")):
        run_topk(src, 16, 4, src_dtype=nl.float32)
    with pytest.raises(DtypeError, match=err("topk", "idx_dst dtype int32 is not supported on trn2; expected one "
                                                     "of uint32")):
        run_topk(src, 16, 4, idx_dtype=nl.int32)
    with pytest.raises(ShapeError, match=err("topk", "src partition dim 8 must be a multiple of 16")):
        run_topk(src[:8], 16, 4)
    with pytest.raises(ShapeError, match=err("topk", "val_dst shape (32, 4) must be (16, 4): src's partitions and "
                                                     "val_dst's K")):
        run_topk(src, 16, 4, parts=32)
    with pytest.raises(ArgumentError, match=err("topk", "n must be an int, got 16.0")):
        run_topk(src, 16.0, 4)


def test_topk_event(rng):
    src = rng.standard_normal((16, 2)).astype(BF16)

    def kernel(src):
        v = nl.ndarray((16, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 16), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.topk(val_dst=v, idx_dst=i, src=sb(src), n=32)
        return tile_out(v[:, 0:1], i[:, 0:1])
    (v, i), events = record(kernel, src)
    ev = [e for e in events if e.op == "topk"]
    assert len(ev) == 1 and ev[0].engine == "gpsimd" and ev[0].options["n"] == 32
    assert [o.role for o in ev[0].reads] == ["src"] and [o.role for o in ev[0].writes] == ["val_dst", "idx_dst"]
    snake = src.T.reshape(-1).astype(np.float32)             # 16 of 32: the top 16, ascending
    order = sorted(range(32), key=lambda s: (-snake[s], s))[:16][::-1]
    np.testing.assert_array_equal(i[:, 0], order)
    np.testing.assert_array_equal(v[:, 0].astype(np.float32), snake[order])


def test_topk_and_nonzero_read_only_the_active_elements():
    """Strict uninitialised reads: topk reads the n active snake positions only, nonzero_with_count
    only the GpSimd cores' partitions (0, 16, ...); the rest of src may stay unwritten."""
    import nkisim.nki as nki

    def topk_kernel(x):
        s = nl.ndarray((16, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[:, 0:2], src=x[:, 0:2])            # positions 0..31
        nisa.dma_copy(dst=s[0:3, 2:3], src=x[0:3, 2:3])        # positions 32..34
        v = nl.ndarray((16, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((16, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.topk(val_dst=v, idx_dst=i, src=s, n=35)
        return tile_out(i[0:8, 0:1])
    x = np.arange(48, dtype=np.float32).reshape(3, 16).T.astype(BF16)      # position s holds s
    got = nki.simulate(topk_kernel, uninitialized_reads="raise", target="trn2")(x)
    np.testing.assert_array_equal(got[:, 0], np.arange(27, 35))

    def nz_kernel(x):
        s = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:1], src=x[0:1])
        nisa.dma_copy(dst=s[16:17], src=x[1:2])
        d = nl.ndarray((32, 5), dtype=nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(dst=d, src=s)
        return tile_out(d[0:1], d[16:17])
    a, b = nki.simulate(nz_kernel, uninitialized_reads="raise", target="trn2")(
        np.array([[0, 3, 0, 1], [5, 0, 0, 0]], np.float32))
    np.testing.assert_array_equal(a, [[1, 3, -1, -1, 2]])
    np.testing.assert_array_equal(b, [[0, -1, -1, -1, 1]])
