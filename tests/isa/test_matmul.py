"""nisa.nc_matmul: values against fp32 NumPy, PSUM accumulation flags, transpose and double-row
modes, tiling, every shape/dtype/buffer rule."""
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, MemorySpaceError, ShapeError, UnsupportedError
from conftest import simulate
from _tiles import load
from _events import line, record, roles

BF16 = ml_dtypes.bfloat16
FP8 = ml_dtypes.float8_e4m3


def err(what):
    return rf"^nisa\.nc_matmul: {re.escape(what)} \(test_matmul\.py:\d+\)$"


def ints(rng, shape, dtype, lo=-4, hi=5):
    """Small integers: every product and sum is exact in fp32, so the reference is exact."""
    return rng.integers(lo, hi, shape).astype(dtype)


def store(t):
    s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=t)
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=s)
    return out


def mm(st_, mv, target="trn2", dst_dtype=nl.float32, dst_shape=None, dst_buf=nl.psum, **kw):
    """One nc_matmul of HBM arrays ``st_`` (K, M...) and ``mv`` (K, N...) into a fresh dst."""
    def kernel(a, b):
        m = a.shape[2] if kw.get("perf_mode") == "double_row" else int(np.prod(a.shape[1:]))
        n = b.shape[2] if kw.get("perf_mode") == "double_row" else int(np.prod(b.shape[1:]))
        d = nl.ndarray(dst_shape or (m, n), dtype=dst_dtype, buffer=dst_buf)
        nisa.nc_matmul(dst=d, stationary=load(a), moving=load(b), **kw)
        return store(d)
    return simulate(kernel, st_, mv, target=target)


def ref(st_, mv):
    k = st_.shape[0]
    return st_.reshape(k, -1).astype(np.float32).T @ mv.reshape(k, -1).astype(np.float32)


# ---- values ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sdt, mdt", [(np.float32, np.float32), (BF16, BF16), (np.float16, BF16),
                                      (FP8, BF16), (ml_dtypes.float8_e5m2, FP8)])
def test_matmul_matches_fp32_reference(rng, sdt, mdt):
    a, b = ints(rng, (32, 16), sdt), ints(rng, (32, 24), mdt)
    np.testing.assert_array_equal(mm(a, b), ref(a, b))


def test_matmul_multi_dim_operands_flatten(rng):
    a, b = ints(rng, (8, 2, 3), BF16), ints(rng, (8, 4, 5), BF16)
    np.testing.assert_array_equal(mm(a, b, dst_shape=(6, 4, 5)), ref(a, b).reshape(6, 4, 5))


def test_tiled_matmul_accumulates_over_k_with_auto_flags(rng):
    """C[M, N] = A[M, K] @ B[K, N] with K = 384 in three 128-row tiles, accumulate=None."""
    a, b = ints(rng, (64, 384), BF16), ints(rng, (384, 96), BF16)

    def kernel(a_t, b):
        d = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.psum)
        for k in range(3):
            st_ = nl.ndarray((128, 64), dtype=a_t.dtype, buffer=nl.sbuf)
            mv = nl.ndarray((128, 96), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=st_, src=a_t[k * 128:(k + 1) * 128, :])
            nisa.dma_copy(dst=mv, src=b[k * 128:(k + 1) * 128, :])
            nisa.nc_matmul(dst=d, stationary=st_, moving=mv)
        return store(d)
    got = simulate(kernel, np.ascontiguousarray(a.T), b, target="trn2")
    np.testing.assert_array_equal(got, a.astype(np.float32) @ b.astype(np.float32))


def test_accumulate_true_and_false(rng):
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 8), BF16)

    def kernel(a, b):
        sa, sb = load(a), load(b)
        d = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        outs = []
        for acc in (False, True, True, False):
            nisa.nc_matmul(dst=d, stationary=sa, moving=sb, accumulate=acc)
            outs.append(store(d))
        return tuple(outs)
    r = ref(a, b)
    got = simulate(kernel, a, b, target="trn2")
    for g, w in zip(got, (r, 2 * r, 3 * r, r)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("writer", ["memset", "tensor_copy"])
def test_non_matmul_write_resets_auto_accumulation(rng, writer):
    a, b = ints(rng, (16, 4), BF16), ints(rng, (16, 6), BF16)

    def kernel(a, b):
        sa, sb = load(a), load(b)
        d = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb)          # auto: accumulates
        twice = store(d)
        if writer == "memset":
            nisa.memset(dst=d[:, 0:3], value=100.0)
        else:
            z = nl.ndarray((4, 3), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=z, value=100.0)
            nisa.tensor_copy(dst=d[:, 0:3], src=z)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb)          # cols 0:3 overwrite, 3:6 accumulate
        return twice, store(d)
    r = ref(a, b)
    twice, got = simulate(kernel, a, b, target="trn2")
    np.testing.assert_array_equal(twice, 2 * r)
    np.testing.assert_array_equal(got[:, :3], r[:, :3])
    np.testing.assert_array_equal(got[:, 3:], 3 * r[:, 3:])


def test_fresh_psum_is_overwritten_by_auto_mode(rng):
    a, b = ints(rng, (4, 4), np.float32), ints(rng, (4, 4), np.float32)
    np.testing.assert_array_equal(mm(a, b), ref(a, b))        # the NaN fill is never added


def test_bf16_dst_on_trn3_rounds_once_and_accumulates_in_fp32(rng):
    a = rng.standard_normal((32, 8)).astype(BF16)
    b = rng.standard_normal((32, 8)).astype(BF16)

    def kernel(a, b):
        sa, sb = load(a), load(b)
        d = nl.ndarray((8, 8), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb)
        once = store(d)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb)
        return once, store(d)
    once, twice = simulate(kernel, a, b, target="trn3")
    r = ref(a, b)
    want1 = r.astype(BF16)
    want2 = (want1.astype(np.float32) + r).astype(BF16)
    # the fp32 products are exact; only the summation order may differ by an ulp of fp32
    np.testing.assert_allclose(once.astype(np.float32), want1.astype(np.float32), rtol=2**-8)
    np.testing.assert_allclose(twice.astype(np.float32), want2.astype(np.float32), rtol=2**-7)
    ai, bi = ints(rng, (16, 4), BF16, 0, 3), ints(rng, (16, 4), BF16, 0, 3)
    np.testing.assert_array_equal(mm(ai, bi, target="trn3", dst_dtype=nl.bfloat16).view(np.uint16),
                                  ref(ai, bi).astype(BF16).view(np.uint16))


def test_bf16_dst_rejected_on_trn2():
    z = np.zeros((4, 4), BF16)
    with pytest.raises(DtypeError, match=err("dst dtype bfloat16 is not supported on trn2; expected float32")):
        mm(z, z, dst_dtype=nl.bfloat16)


# ---- shape limits ----------------------------------------------------------------------------

def test_moving_free_size_limits_trn2():
    z = np.zeros((2, 4), BF16)
    np.testing.assert_array_equal(mm(z, np.ones((2, 512), BF16)), np.zeros((4, 512)))
    with pytest.raises(ShapeError, match=err("moving free size 513 exceeds 512 on trn2")):
        mm(z, np.ones((2, 513), BF16))


def test_moving_free_size_limits_trn3():
    z = np.ones((2, 2), BF16)
    np.testing.assert_array_equal(mm(z, np.ones((2, 4096), BF16), target="trn3"), np.full((2, 4096), 2.0))
    with pytest.raises(ShapeError, match=err("moving free size 4097 exceeds 4096 on trn3")):
        mm(z, np.ones((2, 4097), BF16), target="trn3", dst_shape=(2, 4096))   # checked before dst
    got = mm(z, np.ones((2, 8192), BF16), target="trn3", dst_dtype=nl.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float32), np.full((2, 8192), 2.0))


def test_stationary_free_size_limit():
    np.testing.assert_array_equal(mm(np.ones((2, 128), BF16), np.ones((2, 3), BF16)), np.full((128, 3), 2.0))
    with pytest.raises(ShapeError, match=err("stationary free size 129 exceeds 128 on trn2")):
        mm(np.ones((2, 129), BF16), np.ones((2, 3), BF16), dst_shape=(128, 3))


def test_contraction_dim_mismatch():
    with pytest.raises(ShapeError, match=err("moving partition dim 8 does not match stationary partition "
                                             "dim 16 (the contraction dim)")):
        mm(np.zeros((16, 4), BF16), np.zeros((8, 4), BF16))


def test_dst_shape_must_be_m_by_n():
    with pytest.raises(ShapeError, match=err("dst shape (4, 5) must have 4 partitions (stationary free size) "
                                             "and 6 elements per partition (moving free size)")):
        mm(np.zeros((8, 4), BF16), np.zeros((8, 6), BF16), dst_shape=(4, 5))


# ---- buffers and dtypes ----------------------------------------------------------------------

def test_operands_in_wrong_buffers():
    def kernel(a, b, where):
        sa, sb = load(a), load(b)
        d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        if where == "stationary":
            sa = load(a, nl.psum)
        elif where == "moving":
            sb = b
        else:
            d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb)
    z = np.zeros((4, 4), np.float32)
    with pytest.raises(MemorySpaceError, match=err("stationary is in psum; must be in sbuf")):
        simulate(kernel, z, z, "stationary", target="trn2")
    with pytest.raises(MemorySpaceError, match=err("moving is in shared_hbm (HBM); must be in sbuf")):
        simulate(kernel, z, z, "moving", target="trn2")
    with pytest.raises(MemorySpaceError, match=err("dst is in sbuf; must be in psum")):
        simulate(kernel, z, z, "dst", target="trn2")


def test_fp32_cannot_mix_with_bf16():
    with pytest.raises(DtypeError, match=err("stationary float32 and moving bfloat16: fp32/tf32 pair only "
                                             "with fp32/tf32")):
        mm(np.zeros((4, 4), np.float32), np.zeros((4, 4), BF16))


def test_fp8_e4m3fn_on_trn3_cannot_mix_with_legacy_e4m3(rng):
    a = ints(rng, (4, 4), ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(mm(a, a.astype(BF16), target="trn3"), ref(a, a))
    with pytest.raises(DtypeError, match=err("float8_e4m3fn cannot be mixed with float8_e4m3")):
        mm(a, a.astype(FP8), target="trn3")


# ---- transpose mode --------------------------------------------------------------------------

def transpose_kernel(dst_dtype=None, moving_n=None):
    def kernel(x, ident):
        d = nl.ndarray((x.shape[1], ident.shape[1]), dtype=dst_dtype or x.dtype, buffer=nl.psum)
        nisa.nc_matmul(dst=d, stationary=load(x), moving=load(ident), is_transpose=True)
        return store(d)
    return lambda x: simulate(kernel, x, np.eye(x.shape[0], moving_n or x.shape[0]).astype(x.dtype),
                              target="trn2")


@pytest.mark.parametrize("dt, bits_dt", [(BF16, np.uint16), (np.float32, np.uint32)])
def test_is_transpose_is_bit_exact_with_nan(rng, dt, bits_dt):
    bits = rng.integers(0, np.iinfo(bits_dt).max, (8, 5), dtype=bits_dt)
    nan = 0x7FC1 if bits_dt is np.uint16 else 0x7FC01234
    bits[0, 0], bits[1, 1] = nan, nan ^ (1 << (8 * np.dtype(bits_dt).itemsize - 1))
    got = transpose_kernel()(bits.view(dt))
    assert got.view(bits_dt).tolist() == bits.T.tolist()


def test_is_transpose_rules():
    with pytest.raises(ShapeError, match=err("is_transpose: moving must be a 8 x 8 identity, got (8, 4)")):
        transpose_kernel(moving_n=4)(np.zeros((8, 4), BF16))
    with pytest.raises(DtypeError, match=err("is_transpose: dst dtype float32 must equal stationary dtype "
                                             "bfloat16")):
        transpose_kernel(dst_dtype=nl.float32)(np.zeros((8, 4), BF16))


def test_is_transpose_on_trn1_is_a_plain_matmul():
    """Docs: on NeuronCore-v2 is_transpose is only a profiler hint (the moving tile is used as is)."""
    def kernel(x, i):
        d = nl.ndarray((3, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=d, stationary=load(x), moving=load(i), is_transpose=True)
        return store(d)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(simulate(kernel, x, 2 * np.eye(4, dtype=np.float32), target="trn1"), 2 * x.T)


# ---- double_row ------------------------------------------------------------------------------

def test_double_row_contracts_partitions_and_the_pair_dim(rng):
    a = ints(rng, (16, 2, 4), FP8)
    b = ints(rng, (16, 2, 6), ml_dtypes.float8_e5m2)
    got = mm(a, b, perf_mode="double_row")
    want = np.einsum("kjm,kjn->mn", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(got, want)


def test_double_row_rules():
    a = np.zeros((16, 2, 4), FP8)
    with pytest.raises(UnsupportedError, match=err("perf_mode=double_row needs trn2 or newer, not trn1")):
        mm(a, a, target="trn1", perf_mode="double_row")
    with pytest.raises(DtypeError, match=err("perf_mode=double_row needs fp8 operands, got bfloat16 and "
                                             "float8_e4m3")):
        mm(a.astype(BF16), a, perf_mode="double_row")
    with pytest.raises(ShapeError, match=err("perf_mode=double_row needs stationary (K, 2, M) and moving "
                                             "(K, 2, N), got (16, 3, 4) and (16, 2, 4)")):
        mm(np.zeros((16, 3, 4), FP8), a, perf_mode="double_row", dst_shape=(4, 4))


# ---- tiling ----------------------------------------------------------------------------------

def test_tiling_rules(rng):
    a, b = ints(rng, (64, 32), BF16), ints(rng, (64, 8), BF16)
    np.testing.assert_array_equal(mm(a, b, tile_position=(64, 32), tile_size=(64, 32)), ref(a, b))
    with pytest.raises(ShapeError, match=err("contraction (partition) dim 64 exceeds the row tile size 32 "
                                             "on trn2")):
        mm(a, b, tile_position=(0, 0), tile_size=(32, 128))
    with pytest.raises(ShapeError, match=err("tile_size (64, 16) must use sizes 32, 64 or 128")):
        mm(a, b, tile_position=(0, 0), tile_size=(64, 16))
    with pytest.raises(ShapeError, match=err("tile_position start_row 32 must be a multiple of 64 with "
                                             "start_row + 64 <= 128")):
        mm(a, b, tile_position=(32, 0), tile_size=(64, 128))
    with pytest.raises(UnsupportedError, match=err("tile_size (64, 32): 32-wide tiles need trn2 or newer, "
                                                   "not trn1")):
        mm(a, b, target="trn1", tile_position=(0, 0), tile_size=(64, 32))
    with pytest.raises(ShapeError, match=err("tile_position and tile_size must be given together")):
        mm(a, b, tile_size=(64, 128))


def test_tiling_column_size_limits_stationary(rng):
    a, b = ints(rng, (32, 64), BF16), ints(rng, (32, 8), BF16)
    with pytest.raises(ShapeError, match=err("stationary free size 64 exceeds 32 on trn2")):
        mm(a, b, tile_position=(0, 0), tile_size=(32, 32))


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 128), m=st.integers(1, 128), n=st.integers(1, 512), seed=st.integers(0, 2**16))
def test_matmul_exact_for_small_integers(k, m, n, seed):
    r = np.random.default_rng(seed)
    a, b = ints(r, (k, m), BF16), ints(r, (k, n), BF16)
    np.testing.assert_array_equal(mm(a, b), ref(a, b))


# ---- the instruction: keywords and events ----------------------------------------------------

def test_misspelt_keyword_raises_type_error_naming_op_keyword_and_line():
    def kernel(a):
        s = load(a)
        d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=d, stationary=s, moving=s, acumulate=True)  # ev:kw
    want = ("nisa.nc_matmul() got an unexpected keyword argument 'acumulate'; did you mean "
            f"'accumulate'? ({line(__file__, 'kw')})")
    with pytest.raises(TypeError, match="^" + re.escape(want) + "$"):
        simulate(kernel, np.zeros((4, 4), BF16), target="trn2")


def accumulate_kernel(a, b):
    """Five matmuls into one fresh fp32 PSUM tile: auto (fresh: overwrite), auto (accumulate),
    False, True, then auto after a memset of columns 0:3 (mixed)."""
    sa, sb = load(a), load(b)
    d = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=d, stationary=sa, moving=sb)                    # ev:auto1
    nisa.nc_matmul(dst=d, stationary=sa, moving=sb)                    # ev:auto2
    nisa.nc_matmul(dst=d, stationary=sa, moving=sb, accumulate=False)  # ev:false
    nisa.nc_matmul(dst=d, stationary=sa, moving=sb, accumulate=True)   # ev:true
    nisa.memset(dst=d[:, 0:3], value=1.0)
    nisa.nc_matmul(dst=d, stationary=sa, moving=sb)                    # ev:mixed
    return store(d)


@pytest.mark.parametrize("fast", [True, False])
def test_events_note_the_accumulation_applied(rng, fast):
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)
    out, ev = record(accumulate_kernel, a, b, fast=fast, target="trn2")
    r = ref(a, b)
    # columns 0:3 were last written by the memset: overwritten; 3:6 accumulate onto 2 * r
    np.testing.assert_array_equal(out, np.concatenate([r[:, :3], 3 * r[:, 3:]], axis=1))
    mms = [e for e in ev if e.op == "nc_matmul"]
    assert [e.options["accumulate"] for e in mms] == [False, True, False, True, "mixed"]
    assert [e.location for e in mms] == [line(__file__, t) for t in ("auto1", "auto2", "false", "true", "mixed")]
    for e in mms:
        assert (e.api, e.engine) == ("nisa.nc_matmul", "tensor")
        assert roles(e.reads) == [("stationary", "sbuf", (16, 8), "bfloat16", 16 * 8 * 2),
                                  ("moving", "sbuf", (16, 6), "bfloat16", 16 * 6 * 2)]
        assert roles(e.writes) == [("dst", "psum", (8, 6), "float32", 8 * 6 * 4)]
        assert e.options["perf_mode"] == "none" and e.options["is_transpose"] is False
    assert len({e.writes[0].alloc for e in mms}) == 1
    memset = next(e for e in ev if e.op == "memset")
    assert memset.engine == "vector" and roles(memset.writes) == [("dst", "psum", (8, 3), "float32", 8 * 3 * 4)]


def test_events_and_results_are_the_same_with_and_without_fast_paths(rng):
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)
    out_f, ev_f = record(accumulate_kernel, a, b, fast=True, target="trn2")
    out_s, ev_s = record(accumulate_kernel, a, b, fast=False, target="trn2")
    np.testing.assert_array_equal(out_f, out_s)
    assert list(ev_f) == list(ev_s)
    assert ev_f.fast_paths["matmul_out"] == 2          # the two overwrites of the whole fp32 tile
    assert not +ev_s.fast_paths


def test_bf16_dst_overwrite_takes_the_plain_path_with_the_same_event(rng):
    """No product straight into a bf16 PSUM tile (it must be rounded): the scratch path runs."""
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)

    def kernel(a, b):
        d = nl.ndarray((8, 6), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=d, stationary=load(a), moving=load(b), accumulate=False)
        return store(d)
    out, ev = record(kernel, a, b, target="trn3")
    np.testing.assert_array_equal(out, ref(a, b).astype(BF16))
    mm_ev = next(e for e in ev if e.op == "nc_matmul")
    assert mm_ev.options["accumulate"] is False and ev.fast_paths["matmul_out"] == 0
    assert roles(mm_ev.writes) == [("dst", "psum", (8, 6), "bfloat16", 8 * 6 * 2)]


def test_is_transpose_event_overwrites_and_writes_only_in_compute(rng):
    x = rng.standard_normal((8, 5)).astype(BF16)

    def kernel(x, ident):
        d = nl.ndarray((5, 8), dtype=x.dtype, buffer=nl.psum)
        for _ in range(2):                 # the second call's rules come from the memo
            nisa.nc_matmul(dst=d, stationary=load(x), moving=load(ident), is_transpose=True,
                           accumulate=True)
        return store(d)
    for fast in (True, False):
        out, ev = record(kernel, x, np.eye(8, dtype=BF16), fast=fast, target="trn2")
        assert out.tolist() == x.T.tolist()
        mms = [e for e in ev if e.op == "nc_matmul"]
        assert [(e.engine, e.options["accumulate"], e.options["is_transpose"]) for e in mms] == \
            [("tensor", False, True)] * 2
        assert roles(mms[0].writes) == [("dst", "psum", (5, 8), "bfloat16", 5 * 8 * 2)]


def test_double_row_event(rng):
    a, b = ints(rng, (16, 2, 4), FP8), ints(rng, (16, 2, 6), FP8)
    for fast in (True, False):
        out, ev = record(lambda a, b: mm_body(a, b, perf_mode="double_row"), a, b, fast=fast, target="trn2")
        np.testing.assert_array_equal(out, np.einsum("kjm,kjn->mn", a.astype(np.float32), b.astype(np.float32)))
        e = next(e for e in ev if e.op == "nc_matmul")
        assert e.options["perf_mode"] == "double_row" and e.options["accumulate"] is False
        assert roles(e.reads) == [("stationary", "sbuf", (16, 2, 4), "float8_e4m3", 128),
                                  ("moving", "sbuf", (16, 2, 6), "float8_e4m3", 192)]


def mm_body(a, b, **kw):
    d = nl.ndarray((a.shape[-1], b.shape[-1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=d, stationary=load(a), moving=load(b), **kw)
    return store(d)


def test_auto_accumulation_reads_psum_flags_on_every_call(rng):
    """The PSUM flags are runtime state: a memoised call still decides per call."""
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)

    def kernel(a, b):
        sa, sb = load(a), load(b)
        outs = []
        for _ in range(3):
            d = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.psum)     # fresh each time
            nisa.nc_matmul(dst=d, stationary=sa, moving=sb)
            nisa.nc_matmul(dst=d, stationary=sa, moving=sb)
            outs.append(store(d))
        return tuple(outs)
    out, ev = record(kernel, a, b, target="trn2")
    for o in out:
        np.testing.assert_array_equal(o, 2 * ref(a, b))
    assert [e.options["accumulate"] for e in ev if e.op == "nc_matmul"] == [False, True] * 3


# ---- accumulate=True onto values a non-matmul instruction wrote (NeuronCore-v2/v3: unsupported) --

def onto_values_kernel(a, b, writer="memset"):
    """Columns 0:3 of a fresh PSUM tile from a matmul, 3:5 from ``writer``, 5:6 never written;
    then accumulate=True over the whole tile."""
    sa, sb = load(a), load(b)
    d = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=d[:, 0:3], stationary=sa, moving=sb[:, 0:3], accumulate=False)
    if writer == "memset":
        nisa.memset(dst=d[:, 3:5], value=0.5)
    else:
        z = nl.ndarray((8, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.5)
        nisa.tensor_copy(dst=d[:, 3:5], src=z)
    nisa.nc_matmul(dst=d, stationary=sa, moving=sb, accumulate=True)   # ev:onto
    return store(d)


@pytest.mark.parametrize("writer", ["memset", "tensor_copy"])
@pytest.mark.parametrize("target, version", [("trn1", 2), ("trn2", 3)])
@pytest.mark.parametrize("fast", [True, False])
def test_accumulate_true_onto_non_matmul_values_is_unsupported_on_neuroncore_v2_v3(rng, target, version,
                                                                                 writer, fast):
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)
    want = err(f"dst: accumulate=True onto 16 PSUM element(s) last written by a non-matmul instruction "
               f"(first at view index (0, 3)) is not supported on {target} (NeuronCore-v{version}); start "
               f"the accumulation group with accumulate=False and add the other values with "
               f"nisa.tensor_tensor")
    with pytest.raises(UnsupportedError, match=want.replace(r"test_matmul\.py:\d+", line(__file__, "onto"))):
        record(lambda a, b: onto_values_kernel(a, b, writer), a, b, fast=fast, target=target)


def test_accumulate_true_onto_non_matmul_values_is_a_finding_and_the_matmul_is_skipped(rng):
    from nkisim.errors import FindingsError
    import nkisim.nki as nki
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)
    sim = nki.simulate(onto_values_kernel, findings="all", target="trn2")
    with pytest.raises(FindingsError):
        sim(a, b)
    assert [(type(e).__name__, e.op) for e in sim.findings] == [("UnsupportedError", "nisa.nc_matmul")]
    assert sim.findings[0].where.endswith(line(__file__, "onto"))


@pytest.mark.parametrize("fast", [True, False])
def test_trn3_accumulates_onto_non_matmul_values(rng, fast):
    """Decision: NeuronCore-v4 (left out of the docs' note) adds the product onto the values."""
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)

    def kernel(a, b):
        sa, sb = load(a), load(b)
        d = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=d, value=0.5)
        nisa.nc_matmul(dst=d[:, 0:4], stationary=sa, moving=sb[:, 0:4], accumulate=True)
        return store(d)
    out, ev = record(kernel, a, b, fast=fast, target="trn3")
    want = np.full((8, 6), 0.5, np.float32)
    want[:, 0:4] += ref(a, b)[:, 0:4]
    np.testing.assert_array_equal(out, want)
    assert [e.options["accumulate"] for e in ev if e.op == "nc_matmul"] == [True]


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_matmul_values_never_written_psum_and_auto_mode_are_not_the_non_matmul_rule(rng, target):
    """accumulate=True after matmuls only, or onto never-written PSUM (strict mode's uninitialised
    read, not this rule); accumulate=None overwrites a memset."""
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)

    def kernel(a, b):
        sa, sb = load(a), load(b)
        d = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=d[:, 0:3], stationary=sa, moving=sb[:, 0:3], accumulate=False)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb, accumulate=True)      # 3:6 never written
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb, accumulate=True)
        e = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=e, value=0.5)
        nisa.nc_matmul(dst=e, stationary=sa, moving=sb)                      # auto: overwrites
        return store(d), store(e)
    d, e = simulate(kernel, a, b, target=target)
    r = ref(a, b)
    np.testing.assert_array_equal(d[:, 0:3], 3 * r[:, 0:3])
    assert np.isnan(d[:, 3:]).all()                                          # the sentinel, added to
    np.testing.assert_array_equal(e, r)


@pytest.mark.parametrize("fast", [True, False])
def test_a_whole_tile_write_between_partial_matmuls_leaves_the_flags_right(rng, fast):
    """A matmul into part of a tile, a memset of the whole tile, the matmul again, then auto mode
    over the whole tile: the part accumulates, the rest is overwritten (fast path: the view the
    flags kept before the memset must not answer for the flags after it)."""
    a, b = ints(rng, (16, 8), BF16), ints(rng, (16, 6), BF16)

    def kernel(a, b):
        sa, sb = load(a), load(b)
        d = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=d[:, 0:2], stationary=sa, moving=sb[:, 0:2], accumulate=False)
        nisa.memset(dst=d, value=0.0)
        nisa.nc_matmul(dst=d[:, 0:2], stationary=sa, moving=sb[:, 0:2], accumulate=False)
        nisa.nc_matmul(dst=d, stationary=sa, moving=sb)
        return store(d)
    out, ev = record(kernel, a, b, fast=fast, target="trn2")
    r = ref(a, b)
    np.testing.assert_array_equal(out, np.concatenate([2 * r[:, 0:2], r[:, 2:]], axis=1))
    assert [e.options["accumulate"] for e in ev if e.op == "nc_matmul"] == [False, False, "mixed"]
