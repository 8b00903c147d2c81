"""The MX path: x4 packed dtypes and the e8m0 scale dtype (storage, DMA, views, bit-exact packing),
nisa.quantize_mx and nisa.nc_matmul_mx against NumPy references written from the docs' formulas
(aws-neuron-sdk nki/api/nki/isa/__init__.py, nki/deep-dives/mxfp-matmul.rst), and every rule."""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, MemorySpaceError, ShapeError, UnsupportedError
from conftest import simulate
from _tiles import sb
from _events import line, record, roles

BF16 = ml_dtypes.bfloat16
E8M0 = ml_dtypes.float8_e8m0fnu
X4 = (nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4)
# x4 dtype -> (element dtype, bits per element, raw word dtype): "The float8_*_x4 types are 32-bits
# wide ... The float4_*_x4 type is 16-bits wide" (mxfp-matmul.rst)
ELEM = {nl.float8_e4m3fn_x4: (ml_dtypes.float8_e4m3fn, 8, np.uint32),
        nl.float8_e5m2_x4: (ml_dtypes.float8_e5m2, 8, np.uint32),
        nl.float4_e2m1fn_x4: (ml_dtypes.float4_e2m1fn, 4, np.uint16)}
EMAX = {nl.float8_e4m3fn_x4: 8, nl.float8_e5m2_x4: 15}     # the quantize_mx docstring's E_max


def err(op, what):
    return rf"^nisa\.{op}: {re.escape(what)} \(test_mx\.py:\d+\)$"


# ---- NumPy references (independent of nkisim) -------------------------------------------------

def ref_pack(vals, x4):
    """Values (last dim 4n) rounded to the element type, element q in bits [q*bits, (q+1)*bits)."""
    elem, bits, word = ELEM[x4]
    codes = np.asarray(vals, np.float32).astype(elem).view(np.uint8).astype(np.uint64) & ((1 << bits) - 1)
    codes = codes.reshape(codes.shape[:-1] + (codes.shape[-1] // 4, 4))
    w = sum(codes[..., q] << np.uint64(bits * q) for q in range(4))
    return w.astype(word).view(x4)


def ref_unpack(a):
    """x4 array -> float64 values of its elements (last dim 4n)."""
    elem, bits, word = ELEM[a.dtype]
    w = a.view(word).astype(np.uint64)
    codes = np.stack([(w >> np.uint64(bits * q)) & np.uint64((1 << bits) - 1) for q in range(4)], -1)
    return codes.astype(np.uint8).view(elem).astype(np.float64).reshape(a.shape[:-1] + (a.shape[-1] * 4,))


def hw_layout(dense, p):
    """Scales [P/8, F] in the SBUF layout: group 4j + i at partition 32j + i (rows P)."""
    out = np.zeros((p,) + dense.shape[1:], dense.dtype)
    for g in range(dense.shape[0]):
        out[32 * (g // 4) + g % 4] = dense[g]
    return out


def dense_of(hw, p, offset=0):
    return np.stack([hw[offset + 32 * (g // 4) + g % 4] for g in range(p // 8)])


def ref_quantize(src, x4, ocp=False):
    """The docstring's algorithm per 8 x 4 group: X = 2**(floor(log2 amax) - (Emax - 1)), 2**-127
    for an all-zero group; data = src / X rounded to the element type; scale bits = log2 X + 127.
    ocp=True: the OCP sample algorithm of the docs before NKI 0.5, X = 2**(floor(log2 amax) - Emax),
    data saturated to the element type's largest finite value."""
    p, f = src.shape
    x = src.astype(np.float64)
    scale = np.zeros((p // 8, f // 4), np.uint8)
    q = np.zeros_like(x)
    for g in range(p // 8):
        for j in range(f // 4):
            blk = x[8 * g:8 * g + 8, 4 * j:4 * j + 4]
            amax = np.abs(blk).max()
            e = -127 if amax == 0 else max(-127, math.floor(math.log2(amax)) - (EMAX[x4] - (not ocp)))
            scale[g, j] = e + 127
            q[8 * g:8 * g + 8, 4 * j:4 * j + 4] = blk / 2.0 ** e
    if ocp:
        top = {nl.float8_e4m3fn_x4: 448.0, nl.float8_e5m2_x4: 57344.0}[x4]
        q = np.clip(q, -top, top)
    return ref_pack(q, x4), scale


def ref_matmul(st, ss, mv, ms):
    """sum over partitions k and packed q of dequantized values (float64): value * 2**(bits - 127)."""
    def deq(a, s):
        k, free = a.shape
        v = ref_unpack(a).reshape(k, free, 4)
        return v * (2.0 ** (np.repeat(s.astype(np.int64), 8, axis=0) - 127))[:, :, None]
    return np.einsum("kmq,knq->mn", deq(st, ss), deq(mv, ms))


def mx_data(rng, shape, x4, lo=-6.0, hi=6.0):
    return ref_pack(rng.uniform(lo, hi, shape[:-1] + (shape[-1] * 4,)), x4)


def out(t):
    """An on-chip tile stored to a new HBM tensor (PSUM through SBUF)."""
    if t.buffer == nl.psum:
        s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


# ---- the dtypes --------------------------------------------------------------------------------

def test_dtypes_exist_with_the_documented_widths():
    assert [np.dtype(d).itemsize for d in X4] == [4, 4, 2]
    assert np.dtype(nl.float8_e8m0fnu) == np.dtype(E8M0)
    assert len({np.dtype(d) for d in X4} | {np.dtype(nl.uint32), np.dtype(nl.tfloat32)}) == 5
    for name in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4", "float8_e8m0fnu"):
        assert name in nl.__all__ and name in nki.language.__all__
    a = np.zeros((2, 3), nl.float8_e4m3fn_x4)     # the host side holds them as NumPy arrays
    assert a.view(np.uint32).shape == (2, 3) and a.nbytes == 24


def test_packing_matches_the_host_conventions(rng):
    v = rng.uniform(-6, 6, (4, 16)).astype(np.float32)
    f8 = v.astype(ml_dtypes.float8_e5m2)
    # fp8: four consecutive elements are one little-endian 32-bit word (fp8_array.view(uint32))
    np.testing.assert_array_equal(ref_pack(v, nl.float8_e5m2_x4).view(np.uint32), f8.view(np.uint32))
    # fp4: two elements per byte, the first in the low nibble; two bytes per x4 element
    c = v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    pairs = (c[:, 0::2] & 0xF) | ((c[:, 1::2] & 0xF) << 4)
    np.testing.assert_array_equal(ref_pack(v, nl.float4_e2m1fn_x4).view(np.uint8), pairs)
    np.testing.assert_array_equal(ref_unpack(ref_pack(v, nl.float4_e2m1fn_x4)),
                                  v.astype(ml_dtypes.float4_e2m1fn).astype(np.float64))


@pytest.mark.parametrize("x4", X4)
@pytest.mark.parametrize("precise", [True, False])
def test_dma_round_trip_and_slices_are_bit_exact(rng, x4, precise):
    a = mx_data(rng, (32, 12), x4)

    def kernel(a):
        t = sb(a)
        part = nl.ndarray((32, 4), dtype=x4, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=part, src=t[:, 3:11:2])
        return out(t), part
    whole, part = nki.simulate(kernel, target="trn3", precise_fp=precise)(a)
    assert whole.dtype == x4 and part.dtype == x4
    np.testing.assert_array_equal(whole.view(ELEM[x4][2]), a.view(ELEM[x4][2]))
    np.testing.assert_array_equal(part.view(ELEM[x4][2]), a.view(ELEM[x4][2])[:, 3:11:2])


def test_raw_words_from_uint_hosts_through_ap_and_view(rng):
    """The tutorial's host code: fp8 data as uint32 words, fp4 as uint8 pairs, viewed in-kernel."""
    words = rng.integers(0, 2 ** 32, (32, 8), dtype=np.uint32)
    words[(words.view(np.uint8).reshape(32, 8, 4) & 0x7F).min(-1) == 0x7F] = 0   # (no matter)
    pairs = rng.integers(0, 256, (32, 16), dtype=np.uint8)

    def kernel(words, pairs):
        w = nl.ndarray((32, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=w, src=words.ap(dtype=nl.float8_e4m3fn_x4, pattern=[[8, 32], [1, 8]], offset=0))
        f = nl.ndarray((32, 8), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=f, src=pairs.ap(dtype=nl.float4_e2m1fn_x4, pattern=[[8, 32], [1, 8]], offset=0))
        w_out = nl.ndarray((32, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=w_out.view(nl.float8_e4m3fn_x4), src=w)
        return w_out, out(f), out(f.view(nl.uint16))
    w_out, f_out, f_u16 = simulate(kernel, words, pairs, target="trn3")
    np.testing.assert_array_equal(w_out, words)
    assert f_out.shape == (32, 8) and f_out.dtype == nl.float4_e2m1fn_x4
    np.testing.assert_array_equal(f_out.view(np.uint8), pairs)
    np.testing.assert_array_equal(f_u16, pairs.view(np.uint16))


def test_fresh_x4_tiles_hold_nan_fp8_elements_and_largest_fp4():
    def kernel():
        a = nl.ndarray((32, 2), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        b = nl.ndarray((32, 2), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
        return out(a), out(b)
    a, b = simulate(kernel, target="trn3")
    assert np.isnan(ref_unpack(a)).all()
    assert (ref_unpack(b) == 6.0).all()


@pytest.mark.parametrize("name", ["float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4", "float8_e8m0fnu"])
def test_x4_and_e8m0_dtypes_are_trn3_only(name):
    def kernel():
        nl.ndarray((32, 4), dtype=getattr(nl, name), buffer=nl.sbuf)
    with pytest.raises(DtypeError, match=rf"^nl\.ndarray: tensor dtype {name} is not supported on trn2 "
                                         rf"\(test_mx\.py:\d+\)$"):
        simulate(kernel, target="trn2")
    simulate(kernel, target="trn3")


def test_packed_tensors_are_not_read_or_written_as_values(rng):
    a = mx_data(rng, (32, 4), nl.float8_e4m3fn_x4)

    def read(a):
        f = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=sb(a))

    def write(a):
        t = nl.ndarray((32, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=nl.zeros((32, 4), nl.float32, buffer=nl.sbuf))

    tail = ("dtype float8_e4m3fn_x4 is a packed MX type: only a copy to or from the same dtype, "
            "quantize_mx and nc_matmul_mx take it (view it as uint32/uint16 with .view() to handle "
            "the raw words)")
    with pytest.raises(DtypeError, match=err("tensor_copy", "src " + tail)):
        simulate(read, a, target="trn3")
    with pytest.raises(DtypeError, match=err("tensor_copy", "dst " + tail)):
        simulate(write, a, target="trn3")


# ---- quantize_mx ---------------------------------------------------------------------------------

def quantize(src, x4, scale_dtype=nl.uint8, scale_rows=None, offset=0, fill=0, **opts):
    """quantize_mx of an HBM array into fresh tiles; returns (data, whole scale tile)."""
    def kernel(src):
        p, f = src.shape
        d = nl.ndarray((p, f // 4), dtype=x4, buffer=nl.sbuf)
        sc = nl.ndarray((scale_rows or p, f // 4), dtype=scale_dtype, buffer=nl.sbuf)
        nisa.memset(dst=sc, value=fill)
        nisa.quantize_mx(dst=d, src=sb(src), dst_scale=sc[offset:])
        return out(d), out(sc)
    return nki.simulate(kernel, target="trn3", **opts)(src)


@pytest.mark.parametrize("shape", [(32, 4), (64, 24), (128, 64)])
@pytest.mark.parametrize("x4", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4])
@pytest.mark.parametrize("src_dtype", [BF16, np.float16])
def test_quantize_matches_the_documented_scale_and_rounding(rng, shape, x4, src_dtype):
    src = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 50.0], shape)).astype(src_dtype)
    src[:8, :4] = 0                                               # an all-zero group: 2**-127
    data, scale = quantize(src, x4, fill=0xAB)
    want_data, want_scale = ref_quantize(src, x4)
    assert data.dtype == x4
    np.testing.assert_array_equal(data.view(np.uint32), want_data.view(np.uint32))
    np.testing.assert_array_equal(dense_of(scale, shape[0]), want_scale)
    assert want_scale[0, 0] == 0
    filled = np.ones(scale.shape, bool)
    for g in range(shape[0] // 8):
        filled[32 * (g // 4) + g % 4] = False
    assert (scale[filled] == 0xAB).all()                          # the other rows are untouched


def test_quantize_doc_example_values():
    """amax 1.5 * 2**8 in a float8_e4m3fn group: X = 2**(8 - 7) = 2, so 384 is stored as 192."""
    src = np.full((32, 4), 1.0, np.float32)
    src[0, 0] = 384.0
    data, scale = quantize(src.astype(BF16), nl.float8_e4m3fn_x4)
    assert scale[0, 0] == 128 and scale[1, 0] == 127 - 7      # group 1 holds ones: X = 2**-7
    v = ref_unpack(data)
    assert v[0, 0] == 192.0 and v[0, 1] == 0.5 and v[8, 0] == 128.0


@pytest.mark.parametrize("release", ["0.3", "0.4"])
@pytest.mark.parametrize("x4", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4])
def test_quantize_before_nki_0_5_uses_the_ocp_sample_scale_and_saturates(rng, release, x4):
    src = (rng.standard_normal((64, 32)) * rng.choice([1e-2, 1.0, 300.0], (64, 32))).astype(BF16)
    src[8:16, 4:8] = 0
    data, scale = quantize(src, x4, nki_version=release)
    want_data, want_scale = ref_quantize(src, x4, ocp=True)
    np.testing.assert_array_equal(dense_of(scale, 64), want_scale)
    np.testing.assert_array_equal(data.view(np.uint32), want_data.view(np.uint32))
    assert (dense_of(scale, 64) == ref_quantize(src, x4)[1] - 1)[dense_of(scale, 64) > 1].all()


def test_quantize_before_nki_0_5_doc_style_values(monkeypatch):
    """float8_e4m3fn (Emax 8, largest 448): amax 1.5 * 2**8 gives X = 2**(8 - 8) = 1, so 384 stays
    384; a group with 500 (floor log2 = 8) also gets X = 1 and 500 saturates to 448."""
    src = np.full((32, 8), 1.0, np.float32)
    src[0, 0], src[0, 4] = 384.0, 500.0
    monkeypatch.setenv("NKISIM_NKI_VERSION", "0.4.0")
    data, scale = quantize(src.astype(BF16), nl.float8_e4m3fn_x4)
    v = ref_unpack(data)
    assert scale[0, 0] == 127 and scale[0, 1] == 127 and scale[1, 0] == 127 - 8
    assert v[0, 0] == 384.0 and v[0, 4] == 448.0 and v[8, 0] == 256.0
    monkeypatch.setenv("NKISIM_NKI_VERSION", "0.2")
    with pytest.raises(ValueError, match="NKISIM_NKI_VERSION: expected an NKI release, one of 0.3, 0.4, 0.5"):
        quantize(src.astype(BF16), nl.float8_e4m3fn_x4)


@pytest.mark.parametrize("precise", [True, False])
def test_quantize_into_e8m0_scales(rng, precise):
    src = rng.standard_normal((64, 16)).astype(BF16)
    data, scale = quantize(src, nl.float8_e5m2_x4, scale_dtype=nl.float8_e8m0fnu, fill=1.0, precise_fp=precise)
    want_data, want_scale = ref_quantize(src, nl.float8_e5m2_x4)
    assert scale.dtype == E8M0
    np.testing.assert_array_equal(dense_of(scale.view(np.uint8), 64), want_scale)
    np.testing.assert_array_equal(data.view(np.uint32), want_data.view(np.uint32))
    assert (scale.view(np.uint8)[4:32] == 127).all()


def test_quantize_nonfinite_group_gets_nan_scale_and_data():
    src = np.ones((32, 8), np.float32)
    src[3, 5] = np.inf
    data, scale = quantize(src.astype(BF16), nl.float8_e4m3fn_x4)
    assert scale[0, 1] == 0xFF and scale[0, 0] == 127 - 7
    v = ref_unpack(data)
    assert np.isnan(v[:8, 4:8]).all() and not np.isnan(v[:8, :4]).any()


def test_quantize_packs_scales_at_an_offset_in_each_quadrant(rng):
    a, b = rng.standard_normal((64, 32)).astype(BF16), rng.standard_normal((64, 16)).astype(BF16)

    def kernel(a, b):
        da = nl.ndarray((64, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        db = nl.ndarray((64, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sc = nl.ndarray((64, 8), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=sc, value=0)
        nisa.quantize_mx(dst=da, src=sb(a), dst_scale=sc[0:, :8])
        nisa.quantize_mx(dst=db, src=sb(b), dst_scale=sc[4:, :4])
        return out(sc)
    sc = simulate(kernel, a, b, target="trn3")
    np.testing.assert_array_equal(dense_of(sc[:, :8], 64), ref_quantize(a, nl.float8_e4m3fn_x4)[1])
    np.testing.assert_array_equal(dense_of(sc[:, :4], 64, offset=4), ref_quantize(b, nl.float8_e4m3fn_x4)[1])


# ---- nc_matmul_mx ---------------------------------------------------------------------------------

def matmul(st, ss, mv, ms, dst_dtype=nl.float32, target="trn3", **kw):
    def kernel(st, ss, mv, ms):
        d = nl.ndarray((st.shape[1], mv.shape[1]), dtype=dst_dtype, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=d, stationary=sb(st), moving=sb(mv), stationary_scale=sb(ss),
                          moving_scale=sb(ms), **kw)
        return out(d)
    return simulate(kernel, st, ss, mv, ms, target=target)


def operands(rng, k, m, n, sdt, mdt, lo=120, hi=134):
    st, mv = mx_data(rng, (k, m), sdt), mx_data(rng, (k, n), mdt)
    ss = rng.integers(lo, hi, (k // 8, m), dtype=np.uint8)
    ms = rng.integers(lo, hi, (k // 8, n), dtype=np.uint8)
    return st, ss, mv, ms


@pytest.mark.parametrize("k, m, n", [(32, 2, 8), (64, 16, 40), (128, 128, 512)])
@pytest.mark.parametrize("sdt, mdt", [(nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4),
                                      (nl.float8_e5m2_x4, nl.float8_e5m2_x4),
                                      (nl.float4_e2m1fn_x4, nl.float4_e2m1fn_x4),
                                      (nl.float4_e2m1fn_x4, nl.float8_e5m2_x4)])
def test_matmul_mx_matches_dequantized_reference(rng, k, m, n, sdt, mdt):
    st, ss, mv, ms = operands(rng, k, m, n, sdt, mdt)
    got = matmul(st, hw_layout(ss, k), mv, hw_layout(ms, k))
    want = ref_matmul(st, ss, mv, ms)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def test_matmul_mx_small_integers_are_exact_and_bf16_rounds_once(rng):
    k, m, n = 64, 4, 6
    st = ref_pack(rng.integers(-3, 4, (k, 4 * m)), nl.float8_e4m3fn_x4)
    mv = ref_pack(rng.integers(-3, 4, (k, 4 * n)), nl.float4_e2m1fn_x4)
    ss = np.full((k // 8, m), 127, np.uint8)
    ms = rng.integers(126, 129, (k // 8, n), dtype=np.uint8)
    want = ref_matmul(st, ss, mv, ms)
    np.testing.assert_array_equal(matmul(st, hw_layout(ss, k), mv, hw_layout(ms, k)), want)
    got = matmul(st, hw_layout(ss, k), mv, hw_layout(ms, k), dst_dtype=nl.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), want.astype(np.float32).astype(BF16).view(np.uint16))


def test_matmul_mx_e8m0_scales_nan_scale_and_one_quadrant_scale_tile(rng):
    k, m, n = 32, 4, 8
    st, ss, mv, ms = operands(rng, k, m, n, nl.float8_e5m2_x4, nl.float8_e4m3fn_x4)
    ms[2, 3] = 0xFF                                   # NaN scale: its column is NaN
    got = matmul(st, ss.view(E8M0), mv, ms)           # 4-row scale tiles (P <= 32)
    want = ref_matmul(st, ss, mv, ms)
    assert np.isnan(got[:, 3]).all()
    want[:, 3] = np.nan
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_matmul_mx_accumulates_and_tiles(rng):
    k, m, n = 64, 8, 16
    st, ss, mv, ms = operands(rng, k, m, n, nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4)
    ssh, msh = hw_layout(ss, k), hw_layout(ms, k)

    def kernel(st, ss, mv, ms):
        d = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        args = dict(dst=d, stationary=sb(st), moving=sb(mv), stationary_scale=sb(ss), moving_scale=sb(ms))
        nisa.nc_matmul_mx(**args, tile_position=(64, 0), tile_size=(64, 128))   # ev:mx1
        nisa.nc_matmul_mx(**args)                                               # ev:mx2
        nisa.nc_matmul_mx(**args, accumulate=True)                              # ev:mx3
        return out(d)
    got, ev = record(kernel, st, ssh, mv, msh, target="trn3")
    want = ref_matmul(st, ss, mv, ms)
    np.testing.assert_allclose(got, 3 * want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    mms = [e for e in ev if e.op == "nc_matmul_mx"]
    assert [e.options["accumulate"] for e in mms] == [False, True, True]
    assert [e.location for e in mms] == [line(__file__, t) for t in ("mx1", "mx2", "mx3")]
    e = mms[0]
    assert (e.api, e.engine) == ("nisa.nc_matmul_mx", "tensor")
    assert roles(e.reads) == [("stationary", "sbuf", (k, m), "float8_e4m3fn_x4", k * m * 4),
                              ("moving", "sbuf", (k, n), "float8_e4m3fn_x4", k * n * 4),
                              ("stationary_scale", "sbuf", (k, m), "uint8", k * m),
                              ("moving_scale", "sbuf", (k, n), "uint8", k * n)]
    assert roles(e.writes) == [("dst", "psum", (m, n), "float32", m * n * 4)]


@pytest.mark.parametrize("fast", [True, False])
def test_quantize_then_matmul_end_to_end(rng, fast):
    """Both operands quantized on device (interleaved layout given), then one MX matmul: equals
    the fp32 matmul of the dequantized reference values, and approximates the bf16 inputs' product."""
    k, m, n = 128, 32, 64
    a = rng.standard_normal((k, 4 * m)).astype(BF16)
    b = rng.standard_normal((k, 4 * n)).astype(BF16)

    def kernel(a, b):
        qa = nl.ndarray((k, m), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        qb = nl.ndarray((k, n), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        sa = nl.ndarray((k, m), dtype=nl.uint8, buffer=nl.sbuf)      # never memset: only the scale
        sbb = nl.ndarray((k, n), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)   # rows are read
        nisa.quantize_mx(dst=qa, src=sb(a), dst_scale=sa)              # ev:q
        nisa.quantize_mx(dst=qb, src=sb(b), dst_scale=sbb)
        d = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sbb)
        return out(d)
    got, ev = record(kernel, a, b, fast=fast, target="trn3")
    qa, sa = ref_quantize(a, nl.float8_e4m3fn_x4)
    qb, sbb = ref_quantize(b, nl.float8_e5m2_x4)
    want = ref_matmul(qa, sa, qb, sbb)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    exact = np.einsum("kmq,knq->mn", a.astype(np.float64).reshape(k, m, 4), b.astype(np.float64).reshape(k, n, 4))
    assert np.abs(got - exact).max() < 0.1 * np.abs(exact).max()
    q = next(e for e in ev if e.op == "quantize_mx")
    assert (q.api, q.engine, q.location) == ("nisa.quantize_mx", "vector", line(__file__, "q"))
    assert roles(q.reads) == [("src", "sbuf", (k, 4 * m), "bfloat16", k * 4 * m * 2)]
    assert roles(q.writes) == [("dst", "sbuf", (k, m), "float8_e4m3fn_x4", k * m * 4),
                               ("dst_scale", "sbuf", (k, m), "uint8", k * m)]


def test_only_the_scale_rows_are_read_in_strict_uninitialised_mode(rng):
    a = rng.standard_normal((64, 16)).astype(BF16)

    def kernel(a):
        qa = nl.ndarray((64, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sa = nl.ndarray((64, 4), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=qa, src=sb(a), dst_scale=sa)
        d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qa, stationary_scale=sa, moving_scale=sa)
        return out(d)
    got = nki.simulate(kernel, target="trn3", uninitialized_reads="raise")(a)
    q, s = ref_quantize(a, nl.float8_e4m3fn_x4)
    np.testing.assert_allclose(got, ref_matmul(q, s, q, s), rtol=1e-5)


# ---- rules ----------------------------------------------------------------------------------------

def q_case(src_shape=(32, 8), src_dtype=nl.bfloat16, dst_shape=None, dst_dtype=nl.float8_e4m3fn_x4,
           scale_shape=None, scale_dtype=nl.uint8, scale_slice=slice(None), src_buf=nl.sbuf,
           dst_start=0):
    def kernel():
        p, f = src_shape
        src = nl.ndarray(src_shape, dtype=src_dtype, buffer=src_buf)
        dst = nl.ndarray(dst_shape or (p + dst_start, f // 4), dtype=dst_dtype, buffer=nl.sbuf)
        sc = nl.ndarray(scale_shape or (p, f // 4), dtype=scale_dtype, buffer=nl.sbuf)
        nisa.quantize_mx(dst=dst[dst_start:], src=src, dst_scale=sc[scale_slice])
    return kernel


Q_RULES = [
    (dict(src_dtype=nl.float32), DtypeError,
     "src dtype float32 is not supported on trn3; expected one of float16, bfloat16"),
    (dict(dst_dtype=nl.float4_e2m1fn_x4), DtypeError,
     "dst dtype float4_e2m1fn_x4 is not supported on trn3; expected one of float8_e4m3fn_x4, float8_e5m2_x4"),
    (dict(scale_dtype=nl.float32), DtypeError,
     "dst_scale dtype float32 is not supported on trn3; expected one of float8_e8m0fnu, uint8"),
    (dict(src_buf=nl.psum), MemorySpaceError, "src is in psum; must be in sbuf"),
    (dict(src_shape=(48, 8)), ShapeError, "src partition dim 48 must be a multiple of 32 and at most 128 on trn3"),
    (dict(src_shape=(32, 6), dst_shape=(32, 1), scale_shape=(32, 1)), ShapeError,
     "src has 6 elements per partition; must be a multiple of 4"),
    (dict(dst_shape=(32, 4)), ShapeError,
     "dst shape (32, 4) must have 32 partitions and 2 elements per partition (src (32, 8): 4 values "
     "per float8_e4m3fn_x4 element)"),
    (dict(scale_shape=(32, 4)), ShapeError,
     "dst_scale has 4 elements per partition; it needs one scale per dst element per partition, 2"),
    (dict(scale_slice=slice(2, None)), ShapeError,
     "dst_scale starts at partition 2, offset 2 in its quadrant; scales start at offset 0, 4, 8, 12 "
     "of a 32-partition quadrant"),
    (dict(src_shape=(64, 8), scale_shape=(32, 2)), ShapeError,
     "dst_scale has 32 partitions; the scales of 64 dst partitions fill 4 partitions of each of 2 "
     "quadrant(s), so it needs at least 36"),
    (dict(scale_shape=(64, 2), scale_slice=slice(32, None)), ShapeError,
     "dst_scale starts in quadrant 1 (partition 32) but dst starts in quadrant 0 (partition 0); "
     "scales sit in the quadrant of their scaling groups"),
    (dict(dst_start=32, dst_shape=(64, 2)), ShapeError,
     "dst and src must start at the same partition (quantize_mx keeps the layout)"),
]


@pytest.mark.parametrize("case, exc, what", Q_RULES)
def test_quantize_rules(case, exc, what):
    with pytest.raises(exc, match=err("quantize_mx", what)):
        simulate(q_case(**case), target="trn3")


def test_quantize_passes_with_a_four_row_scale_tile():
    simulate(q_case(scale_shape=(4, 2)), target="trn3")


@pytest.mark.parametrize("target, v", [("trn1", 2), ("trn2", 3)])
def test_mx_ops_need_trn3(target, v):
    def kernel():
        t = nl.ndarray((32, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.quantize_mx(dst=t, src=t, dst_scale=t)

    def kernel2():
        t = nl.ndarray((32, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        d = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=d, stationary=t, moving=t, stationary_scale=t, moving_scale=t)
    for op, k in (("quantize_mx", kernel), ("nc_matmul_mx", kernel2)):
        with pytest.raises(UnsupportedError, match=err(op, f"needs NeuronCore-v4 (trn3) or newer, not "
                                                           f"{target} (NeuronCore-v{v})")):
            simulate(k, target=target)


def m_case(k=32, m=4, n=8, sdt=nl.float8_e4m3fn_x4, mdt=nl.float8_e4m3fn_x4, mk=None, dst_dtype=nl.float32,
           dst_shape=None, dst_buf=nl.psum, ss_shape=None, ms_shape=None, ss_dtype=nl.uint8, st_buf=nl.sbuf,
           **kw):
    def kernel():
        st = nl.ndarray((k, m), dtype=sdt, buffer=st_buf)
        mv = nl.ndarray((mk or k, n), dtype=mdt, buffer=nl.sbuf)
        ss = nl.ndarray(ss_shape or (k, m), dtype=ss_dtype, buffer=nl.sbuf)
        ms = nl.ndarray(ms_shape or (mk or k, n), dtype=nl.uint8, buffer=nl.sbuf)
        d = nl.ndarray(dst_shape or (m, n), dtype=dst_dtype, buffer=dst_buf)
        nisa.nc_matmul_mx(dst=d, stationary=st, moving=mv, stationary_scale=ss, moving_scale=ms, **kw)
    return kernel


M_RULES = [
    (dict(st_buf=nl.psum), MemorySpaceError, "stationary is in psum; must be in sbuf"),
    (dict(dst_buf=nl.sbuf), MemorySpaceError, "dst is in sbuf; must be in psum"),
    (dict(sdt=nl.bfloat16), DtypeError, "stationary dtype bfloat16 is not supported on trn3; expected one "
                                        "of float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4"),
    (dict(mdt=nl.float8_e4m3fn), DtypeError, "moving dtype float8_e4m3fn is not supported on trn3; expected "
                                             "one of float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4"),
    (dict(k=16), ShapeError, "stationary partition dim 16 must be a multiple of 32 and at most 128 on trn3"),
    (dict(mk=64), ShapeError, "moving partition dim 64 does not match stationary partition dim 32 "
                              "(the contraction dim)"),
    (dict(m=3), ShapeError, "stationary free size 3 must be even"),
    (dict(m=130, dst_shape=(4, 8)), ShapeError, "stationary free size 130 exceeds 128 on trn3"),
    (dict(dst_dtype=nl.float16), DtypeError, "dst dtype float16 is not supported on trn3; expected "
                                             "float32 or bfloat16"),
    (dict(n=4098, m=2, dst_shape=(2, 8)), ShapeError, "moving free size 4098 exceeds 4096 on trn3 (dst float32)"),
    (dict(dst_shape=(4, 4)), ShapeError, "dst shape (4, 4) must have 4 partitions (stationary free size) "
                                         "and 8 elements per partition (moving free size)"),
    (dict(ss_dtype=nl.int8), DtypeError, "stationary_scale dtype int8 is not supported on trn3; expected "
                                         "one of float8_e8m0fnu, uint8"),
    (dict(ms_shape=(32, 4)), ShapeError, "moving_scale has 4 elements per partition; it needs one scale "
                                         "per moving element per partition, 8"),
    (dict(k=128, ss_shape=(64, 4)), ShapeError,
     "stationary_scale has 64 partitions; the scales of 128 stationary partitions fill 4 partitions "
     "of each of 4 quadrant(s), so it needs at least 100"),
    (dict(tile_size=(64, 128)), ShapeError, "tile_position and tile_size must be given together"),
    (dict(tile_position=(0, 0), tile_size=(64, 64)), ShapeError,
     "tile_size (64, 64): row size must be one of 32, 64, 128 and column size 128 (row tiling only)"),
    (dict(tile_position=(32, 0), tile_size=(64, 128)), ShapeError,
     "tile_position (32, 0): start_row must be a multiple of 64 with start_row + 64 <= 128, start_column 0"),
    (dict(k=64, tile_position=(0, 0), tile_size=(32, 128)), ShapeError,
     "contraction (partition) dim 64 exceeds the row tile size 32"),
]


@pytest.mark.parametrize("case, exc, what", M_RULES)
def test_matmul_mx_rules(case, exc, what):
    with pytest.raises(exc, match=err("nc_matmul_mx", what)):
        simulate(m_case(**case), target="trn3")


def test_matmul_mx_limits_that_pass():
    simulate(m_case(n=8192, m=2, dst_dtype=nl.bfloat16), target="trn3")
    simulate(m_case(k=32, tile_position=(96, 0), tile_size=(32, 128)), target="trn3")
    simulate(m_case(k=128, m=128, ss_shape=(100, 128)), target="trn3")


@pytest.mark.parametrize("x4", X4)
def test_host_pack_and_unpack_helpers_round_trip(rng, x4):
    """``nkisim.dtypes.pack_x4`` / ``unpack_x4`` (for host code building MX inputs) agree with
    the reference packing bit for bit."""
    from nkisim import dtypes
    v = rng.uniform(-8, 8, (3, 5, 8)).astype(np.float32)
    got = dtypes.pack_x4(v, x4)
    assert got.dtype == x4 and got.shape == (3, 5, 2)
    np.testing.assert_array_equal(got.view(ELEM[x4][2]), ref_pack(v, x4).view(ELEM[x4][2]))
    np.testing.assert_array_equal(dtypes.unpack_x4(got).astype(np.float64), ref_unpack(got))


@pytest.mark.parametrize("x4", X4)
def test_memset_of_an_x4_tile_sets_every_packed_element(x4):
    def kernel():
        t = nl.ndarray((32, 3), dtype=x4, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        u = nl.ndarray((32, 3), dtype=x4, buffer=nl.sbuf)
        nisa.memset(dst=u, value=1.5)
        return out(t), out(u)
    zero, onehalf = simulate(kernel, target="trn3")
    assert (zero.view(ELEM[x4][2]) == 0).all()
    assert (ref_unpack(onehalf) == 1.5).all()


def test_nl_load_store_and_same_dtype_tensor_copy_of_x4_tiles(rng):
    a = mx_data(rng, (64, 6), nl.float8_e5m2_x4)

    def kernel(a):
        t = nl.load(a)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t)
        o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(o, u)
        return o
    got = simulate(kernel, a, target="trn3")
    np.testing.assert_array_equal(got.view(np.uint32), a.view(np.uint32))
