"""nisa.max8, nc_find_index8, nc_match_replace8: values against per-partition NumPy loops, the
duplicate-value orders from the docs, every rule."""
import re
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.trace
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, ShapeError
from conftest import simulate, tile_out
from _tiles import load

BF16 = ml_dtypes.bfloat16


def err(op, what):
    return rf"^nisa\.{op}: {re.escape(what)} \(test_search\.py:\d+\)$"


def store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ---- max8 ------------------------------------------------------------------------------------

def run_max8(x, dst_shape=None, dtype=nl.float32, buffer=nl.sbuf):
    def kernel(x):
        d = nl.ndarray(dst_shape or (x.shape[0], 8), dtype=dtype, buffer=nl.sbuf)
        nisa.max8(dst=d, src=load(x, buffer))
        return store(d)
    return simulate(kernel, x, target="trn2")


def test_max8_descending_per_partition(rng):
    x = rng.standard_normal((16, 3, 40)).astype(np.float32)
    got = run_max8(x)
    flat = x.reshape(16, -1)
    want = np.array([sorted(r, reverse=True)[:8] for r in flat], np.float32)
    np.testing.assert_array_equal(got, want)


def test_max8_keeps_duplicates_and_reads_psum():
    x = np.array([[3, 1, 3, 2, 3, 0, -1, 7, 7, -5]], np.float32)
    np.testing.assert_array_equal(run_max8(x, buffer=nl.psum), [[7, 7, 3, 3, 3, 2, 1, 0]])


def test_max8_nan_ranks_lowest_and_dst_rounds_once(rng):
    x = np.array([[np.nan, -np.inf, 1.0, np.nan, 2.0, 0.1, -3.0, 5.0, 4.0, np.inf]], np.float32)
    got = run_max8(x)
    np.testing.assert_array_equal(got, [[np.inf, 5, 4, 2, 1, np.float32(0.1), -3, -np.inf]])
    y = rng.standard_normal((4, 12)).astype(np.float32)
    got = run_max8(y, dtype=nl.bfloat16)
    want = -np.sort(-y, axis=1)[:, :8]
    np.testing.assert_array_equal(got.view(np.uint16), want.astype(BF16).view(np.uint16))


def test_max8_element_count_limits():
    np.testing.assert_array_equal(run_max8(np.arange(8, dtype=np.float32).reshape(1, 8)),
                                  [np.arange(8)[::-1]])
    with pytest.raises(ShapeError, match=err("max8", "src has 7 elements per partition, needs at least 8 on trn2")):
        run_max8(np.zeros((1, 7), np.float32))
    run_max8(np.zeros((1, 16384), np.float32))
    with pytest.raises(ShapeError, match=err("max8", "src elements per partition 16385 exceeds 16384 on trn2")):
        run_max8(np.zeros((1, 16385), np.float32))


def test_max8_shape_rules():
    with pytest.raises(ShapeError, match=err("max8", "src has 4 dims, at most 3")):
        run_max8(np.zeros((1, 2, 2, 2), np.float32))
    with pytest.raises(ShapeError, match=err("max8", "dst shape (2, 2, 4) must be (2, 8)")):
        run_max8(np.zeros((2, 9), np.float32), dst_shape=(2, 2, 4))


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 8), f=st.integers(8, 64), seed=st.integers(0, 2**16))
def test_max8_property(p, f, seed):
    x = np.random.default_rng(seed).integers(-5, 5, (p, f)).astype(np.float32)   # many ties
    want = np.array([sorted(r, reverse=True)[:8] for r in x], np.float32)
    np.testing.assert_array_equal(run_max8(x), want)


# ---- nc_find_index8 --------------------------------------------------------------------------

def find_ref(data, vals, dtype):
    """Duplicate vals pair with successive occurrences in ascending order; absent -> all ones."""
    data, vals = data.reshape(data.shape[0], -1), vals.reshape(vals.shape[0], -1)
    out = np.full(vals.shape, np.iinfo(dtype).max, np.int64)
    for p in range(data.shape[0]):
        used = set()
        for i in range(8):
            for j in range(data.shape[1]):
                if j not in used and np.float32(data[p, j]) == np.float32(vals[p, i]):
                    out[p, i] = j
                    used.add(j)
                    break
    return out


def run_find(data, vals, dtype=nl.uint32, dst_shape=None):
    def kernel(data, vals):
        d = nl.ndarray(dst_shape or (data.shape[0], 8), dtype=dtype, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=d, data=load(data), vals=load(vals))
        return store(d)
    return simulate(kernel, data, vals, target="trn2")


def test_find_index8_first_occurrence_of_max8_values(rng):
    data = rng.standard_normal((8, 2, 32)).astype(np.float32)
    vals = -np.sort(-data.reshape(8, -1), axis=1)[:, :8]
    got = run_find(data, vals)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, find_ref(data, vals, np.uint32))


def test_find_index8_duplicates_take_successive_occurrences_and_absent_is_all_ones():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    np.testing.assert_array_equal(run_find(data, vals), [[2, 4, 5, 6, 7, 8, 9, 10]])
    vals = np.array([[8, 42, 8, 1, 1, np.nan, -0.0, 2]], np.float32)
    data[0, 0] = 0.0
    got = run_find(data, vals, nl.uint16)
    np.testing.assert_array_equal(got, [[4, 0xFFFF, 5, 0xFFFF, 0xFFFF, 0xFFFF, 0, 1]])
    got = run_find(data, vals)
    assert got[0, 1] == 0xFFFFFFFF


def test_find_index8_vals_shape_and_dst_dtype():
    data = np.zeros((2, 16), np.float32)
    np.testing.assert_array_equal(run_find(data, np.zeros((2, 2, 4), np.float32)),
                                  np.tile(np.arange(8), (2, 1)))
    with pytest.raises(ShapeError, match=err("nc_find_index8", "vals shape (2, 7) must have 2 partitions and "
                                                               "8 elements per partition")):
        run_find(data, np.zeros((2, 7), np.float32))
    with pytest.raises(DtypeError, match=err("nc_find_index8", "dst dtype int32 is not supported on trn2; "
                                                               "expected one of uint16, uint32")):
        run_find(data, np.zeros((2, 8), np.float32), nl.int32)


def test_find_index8_data_limits():
    with pytest.raises(ShapeError, match=err("nc_find_index8", "data has 4 dims, at most 3")):
        run_find(np.zeros((2, 2, 2, 4), np.float32), np.zeros((2, 8), np.float32))
    with pytest.raises(ShapeError, match=err("nc_find_index8", "data has 4 elements per partition, needs at "
                                                               "least 8 on trn2")):
        run_find(np.zeros((2, 4), np.float32), np.zeros((2, 8), np.float32))


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 4), f=st.integers(8, 40), seed=st.integers(0, 2**16))
def test_find_index8_property(p, f, seed):
    r = np.random.default_rng(seed)
    data = r.integers(0, 6, (p, f)).astype(np.float32)
    vals = r.integers(0, 8, (p, 8)).astype(np.float32)
    np.testing.assert_array_equal(run_find(data, vals), find_ref(data, vals, np.uint32))


# ---- nc_match_replace8 -----------------------------------------------------------------------

def replace_ref(data, vals, imm):
    """Process vals i = 7..0; each data position matches at most once (absent -> all ones)."""
    shape = data.shape
    data = data.reshape(shape[0], -1).astype(np.float32).copy()
    vals = vals.reshape(vals.shape[0], -1)
    idx = np.full(vals.shape, 0xFFFFFFFF, np.int64)
    for p in range(data.shape[0]):
        used = set()
        for i in reversed(range(8)):
            for j in range(data.shape[1]):
                if j not in used and data[p, j] == np.float32(vals[p, i]):
                    idx[p, i] = j
                    used.add(j)
                    break
        for j in used:
            data[p, j] = imm
    return data.reshape(shape), idx


def run_replace(data, vals, imm, with_idx=True, idx_dtype=nl.uint32, dst_dtype=None, dst_shape=None,
                idx_shape=None):
    def kernel(data, vals):
        d = nl.ndarray(dst_shape or data.shape, dtype=dst_dtype or data.dtype, buffer=nl.sbuf)
        i = nl.ndarray(idx_shape or (data.shape[0], 8), dtype=idx_dtype, buffer=nl.sbuf) if with_idx else None
        nisa.nc_match_replace8(dst=d, data=load(data), vals=load(vals), imm=imm, dst_idx=i)
        return (store(d), store(i)) if with_idx else store(d)
    return simulate(kernel, data, vals, target="trn2")


def test_match_replace8_doc_example_reverse_order():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    dst, idx = run_replace(data, vals, -1.0)
    np.testing.assert_array_equal(idx, [[2, 10, 9, 8, 7, 6, 5, 4]])
    np.testing.assert_array_equal(dst, [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]])


def test_match_replace8_topk_round(rng):
    data = rng.standard_normal((4, 2, 16)).astype(np.float32)
    vals = -np.sort(-data.reshape(4, -1), axis=1)[:, :8]
    dst, idx = run_replace(data, vals, nl.fp32.min)
    want_dst, want_idx = replace_ref(data, vals, np.float32(nl.fp32.min))
    np.testing.assert_array_equal(dst, want_dst)
    np.testing.assert_array_equal(idx, want_idx)


def test_match_replace8_absent_values_and_signed_index_dtype():
    data = np.array([[5, 6, 7, 5, 9, 9, 9, 9]], np.float32)
    vals = np.array([[5, 5, 5, 100, 9, 6, 6, 7]], np.float32)
    dst, idx = run_replace(data, vals, 0.0, idx_dtype=nl.int32)
    # slots 7..0: 7->2, 6->1, 6 again: none, 9->4, 100: none, 5->0, 5->3, 5 again: none
    np.testing.assert_array_equal(idx, [[-1, 3, 0, -1, 4, -1, 1, 2]])
    np.testing.assert_array_equal(dst, [[0, 0, 0, 0, 0, 9, 9, 9]])


def test_match_replace8_int_data_is_exact_and_dst_may_differ_in_dtype():
    data = np.array([[2**31 - 1, 3, 2**30 + 1, 4, 5, 6, 7, 8, 9]], np.int32)
    vals = np.array([[3, 4, 5, 6, 7, 8, 9, 100]], np.float32).astype(np.int32)
    dst = run_replace(data, vals, -2.0, with_idx=False)
    np.testing.assert_array_equal(dst, [[2**31 - 1, -2, 2**30 + 1, -2, -2, -2, -2, -2, -2]])
    x = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]], np.float32)
    dst = run_replace(x, x[:, :8], 7.0, with_idx=False, dst_dtype=nl.bfloat16)
    want = np.array([[7] * 8 + [0.9]], np.float32).astype(BF16)
    np.testing.assert_array_equal(dst.view(np.uint16), want.view(np.uint16))


def test_match_replace8_unreplaced_elements_keep_their_bits():
    bits = np.array([[0x7F81, 0x3F80, 0x4000, 0xFFC3, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0, 0x8000]],
                    np.uint16)                                          # NaN payloads and -0.0
    x = bits.view(BF16)
    vals = np.array([[1, 2, 3, 4, 5, 6, 7, 100]], np.float32).astype(BF16)
    got = run_replace(x, vals, 0.5, with_idx=False)
    want = bits.copy()
    want[0, [1, 2, 4, 5, 6, 7, 8]] = 0x3F00
    assert got.view(np.uint16).tolist() == want.tolist()


def test_match_replace8_shape_rules():
    data = np.zeros((2, 9), np.float32)
    vals = np.zeros((2, 8), np.float32)
    with pytest.raises(ShapeError, match=err("nc_match_replace8", "dst has 8 elements per partition, data has "
                                                                  "9 (shapes (2, 8) vs (2, 9))")):
        run_replace(data, vals, 0.0, dst_shape=(2, 8))
    with pytest.raises(ShapeError, match=err("nc_match_replace8", "dst_idx shape (2, 4) must have 2 "
                                                                  "partitions and 8 elements per partition")):
        run_replace(data, vals, 0.0, idx_shape=(2, 4))
    with pytest.raises(DtypeError, match=err("nc_match_replace8", "dst_idx dtype float32 is not an integer "
                                                                  "dtype")):
        run_replace(data, vals, 0.0, idx_dtype=nl.float32)
    with pytest.raises(ShapeError, match=err("nc_match_replace8", "data elements per partition 16385 exceeds "
                                                                  "16384 on trn2")):
        run_replace(np.zeros((1, 16385), np.float32), np.zeros((1, 8), np.float32), 0.0, with_idx=False)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 4), f=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_match_replace8_property(p, f, seed):
    r = np.random.default_rng(seed)
    data = r.integers(0, 6, (p, f)).astype(np.float32)
    vals = r.integers(0, 8, (p, 8)).astype(np.float32)
    dst, idx = run_replace(data, vals, -9.0)
    want_dst, want_idx = replace_ref(data, vals, np.float32(-9.0))
    np.testing.assert_array_equal(dst, want_dst)
    np.testing.assert_array_equal(idx, want_idx)


# ---- the instruction events and the documented signature ----------------------------------------

def _next_line():
    """The line after the caller's: where the instruction under test is called."""
    return sys._getframe(1).f_lineno + 1


def _operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def test_search_events_match_the_kernel_calls():
    lines = []

    def kernel(x):
        t = load(x)
        top = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.max8(dst=top, src=t)
        idx = nl.ndarray((4, 8), dtype=nl.uint16, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.nc_find_index8(dst=idx, data=t, vals=top)
        rep = nl.ndarray((4, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
        pos = nl.ndarray((4, 8), dtype=nl.uint32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.nc_match_replace8(dst=rep, data=t, vals=top, imm=0.0, dst_idx=pos)
        return tile_out(pos)
    with nkisim.trace.record() as events:
        simulate(kernel, np.arange(64, dtype=np.float32).reshape(4, 16))
    ours = [e for e in events if e.op in ("max8", "nc_find_index8", "nc_match_replace8")]
    assert [(e.op, e.api, e.engine, e.core, e.location) for e in ours] == [
        (op, f"nisa.{op}", "vector", 0, f"test_search.py:{line}")
        for op, line in zip(("max8", "nc_find_index8", "nc_match_replace8"), lines)]
    m8, fi8, mr8 = ours
    data = ("sbuf", (4, 16), "float32", 256)
    vals = ("sbuf", (4, 8), "float32", 128)
    assert _operands(m8.reads) == [("src", *data)]
    assert _operands(m8.writes) == [("dst", *vals)]
    assert _operands(fi8.reads) == [("data", *data), ("vals", *vals)]
    assert _operands(fi8.writes) == [("dst", "sbuf", (4, 8), "uint16", 64)]
    assert _operands(mr8.reads) == [("data", *data), ("vals", *vals)]
    assert _operands(mr8.writes) == [("dst", "sbuf", (4, 16), "bfloat16", 128),
                                     ("dst_idx", "sbuf", (4, 8), "uint32", 128)]
    assert mr8.options == {"imm": 0.0}


def test_search_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x):
        t = load(x)
        top = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.nc_match_replace8(dst=t, data=t, vals=top, imm=0.0, dst_id=top)
    with pytest.raises(TypeError) as info:
        simulate(kernel, np.ones((4, 16), np.float32))
    assert str(info.value) == (f"nisa.nc_match_replace8() got an unexpected keyword argument 'dst_id'; "
                               f"did you mean 'dst_idx'? (test_search.py:{lines[0]})")


def test_top8_order_is_the_stable_descending_sort_on_long_rows_with_ties_zeros_and_nan():
    """max8's O(F) selection (rows longer than 64) equals NumPy's stable sort of -x."""
    from nkisim.isa.search import _top8
    rng = np.random.default_rng(1)
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 2.5, -3e38, 1e-40], np.float32)
    for trial in range(120):
        f, p = int(rng.integers(65, 600)), int(rng.integers(1, 9))
        x = (rng.choice(specials, (p, f)) if trial % 2 else rng.standard_normal((p, f))).astype(np.float32)
        if trial % 3 == 0:
            x[:, :f - 3] = np.nan                     # fewer than 8 numbers: NaN fills the tail
        np.testing.assert_array_equal(_top8(x), np.argsort(-x, axis=1, kind="stable")[:, :8])


def test_top8_rows_with_and_without_a_tie_at_the_eighth_in_one_call():
    """Rows taking the argpartition path and rows needing the exact keys, mixed in one array,
    each equal to NumPy's stable sort of -x (and the keys alone agree on every row)."""
    from nkisim.isa.search import _top8, _top8_keys
    rng = np.random.default_rng(2)
    for trial in range(60):
        f = int(rng.integers(65, 400))
        x = rng.standard_normal((12, f)).astype(np.float32)
        x[1::3, :] = rng.integers(-2, 3, (4, f))          # ties across the 8th largest
        x[2::3, : f - int(rng.integers(0, 8))] = np.nan   # fewer than 8 numbers
        x[0, : 5] = -0.0
        x[0, 5: 9] = 0.0
        want = np.argsort(-x, axis=1, kind="stable")[:, :8]
        np.testing.assert_array_equal(_top8(x), want)
        np.testing.assert_array_equal(_top8_keys(x), want)
