"""nisa.dma_copy and nisa.dma_transpose: values against NumPy, every rule."""
import re

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, EngineError, MemorySpaceError, NkiError, ShapeError, UnsupportedError
from conftest import simulate

BF16 = ml_dtypes.bfloat16
FP8 = ml_dtypes.float8_e4m3


def err(op, what):
    return rf"^nisa\.{op}: {re.escape(what)} \(test_dma\.py:\d+\)$"


def copy_kernel(shape, dtype, **kw):
    """HBM x -> SBUF tile of ``shape``/``dtype`` -> HBM output of the same shape/dtype."""
    def kernel(x):
        t = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, **kw)
        out = nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


# ---- dma_copy --------------------------------------------------------------------------------

def test_dma_copy_same_dtype_keeps_nan_payloads_fp32():
    x = (np.arange(12, dtype=np.uint32).reshape(3, 4) | np.uint32(0x7F800001)).view(np.float32)
    x[0, 0], x[0, 1] = -0.0, -np.inf
    got = simulate(copy_kernel((3, 4), nl.float32), x, target="trn2")
    assert got.view(np.uint32).tolist() == x.view(np.uint32).tolist()


def test_dma_copy_same_dtype_keeps_nan_payloads_bf16():
    bits = np.array([[0x7F81, 0xFFC3, 0x7FFF, 0x8000], [0x0001, 0x7F80, 0x3F80, 0xFF80]], np.uint16)
    x = bits.view(BF16)
    got = simulate(copy_kernel((2, 4), nl.bfloat16, dge_mode=nisa.dge_mode.hwdge), x, target="trn2")
    assert got.view(np.uint16).tolist() == bits.tolist()


def test_dma_copy_casts_through_fp32(rng):
    x = np.array([[2**24 + 1, -(2**24) - 3, 7, 2**31 - 1]], np.int32)
    got = simulate(copy_kernel((1, 4), nl.bfloat16), x, target="trn2")
    want = x.astype(np.float32).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    y = rng.standard_normal((4, 8)).astype(BF16)
    got = simulate(copy_kernel((4, 8), nl.float8_e4m3), y, target="trn2")
    np.testing.assert_array_equal(got.view(np.uint8), y.astype(np.float32).astype(FP8).view(np.uint8))


def test_dma_copy_float_to_int_rounds_half_even_and_saturates():
    x = np.array([[2.5, -1.5, 0.5, 3e9, -3e9, 126.7]], np.float32)
    got = simulate(copy_kernel((1, 6), nl.int32), x, target="trn2")
    np.testing.assert_array_equal(got, [[2, -2, 0, 2**31 - 1, -2**31, 127]])


def test_dma_copy_is_a_flat_element_order_copy():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    got = simulate(copy_kernel((4, 3, 2), nl.float32), x, target="trn2")
    np.testing.assert_array_equal(got, x.reshape(4, 3, 2))


def test_dma_copy_element_count_mismatch():
    with pytest.raises(ShapeError, match=err("dma_copy", "src has 6 elements, dst has 8 "
                                                         "(shapes (2, 3) vs (2, 4))")):
        simulate(copy_kernel((2, 4), nl.float32), np.zeros((2, 3), np.float32), target="trn2")


def test_dma_copy_psum_source_rejected():
    def kernel(x):
        p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        nisa.dma_copy(dst=x, src=p)
    with pytest.raises(MemorySpaceError, match=err("dma_copy", "src is in psum; must be in private_hbm or "
                                                               "sbuf or shared_hbm")):
        simulate(kernel, np.zeros((2, 2), np.float32), target="trn2")


@pytest.mark.parametrize("engine", [nisa.engine.sync, nisa.engine.scalar, nisa.engine.unknown])
def test_dma_copy_hwdge_engine_sync_or_scalar(engine):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = simulate(copy_kernel((2, 4), nl.float32, dge_mode=nisa.dge_mode.hwdge, engine=engine), x,
                   target="trn2")
    np.testing.assert_array_equal(got, x)


def test_dma_copy_engine_rules():
    """Docs: engine is "sync or scalar. Only valid when dge_mode=nisa.dge_mode.hwdge"."""
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(EngineError, match=err("dma_copy", "engine gpsimd is not supported for dge_mode hwdge on "
                                                          "trn2; expected sync, scalar or unknown")):
        simulate(copy_kernel((2, 4), nl.float32, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.gpsimd), x,
                 target="trn2")
    for mode in (nisa.dge_mode.unknown, nisa.dge_mode.swdge):
        with pytest.raises(EngineError, match=err("dma_copy", f"engine sync is not supported for dge_mode "
                                                              f"{mode.name} on trn2; expected unknown (engine is "
                                                              f"only valid with dge_mode=hwdge)")):
            simulate(copy_kernel((2, 4), nl.float32, dge_mode=mode, engine=nisa.engine.sync), x, target="trn2")


def test_dma_copy_hwdge_needs_trn2():
    """Docs: "Hardware based DGE is only supported for NeuronCore-v3 or newer"."""
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(simulate(copy_kernel((2, 4), nl.float32), x, target="trn1"), x)
    with pytest.raises(UnsupportedError, match=err("dma_copy", "dge_mode=hwdge needs trn2 or newer, not trn1")):
        simulate(copy_kernel((2, 4), nl.float32, dge_mode=nisa.dge_mode.hwdge), x, target="trn1")


def test_dma_copy_hwdge_needs_equal_dtypes():
    with pytest.raises(DtypeError, match=err("dma_copy", "dge_mode=hwdge copies bytes and needs equal "
                                                         "dtypes, got src float32 and dst bfloat16")):
        simulate(copy_kernel((2, 2), nl.bfloat16, dge_mode=nisa.dge_mode.hwdge),
                 np.zeros((2, 2), np.float32), target="trn2")


def test_dma_copy_accepts_raw_int_enums():
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    got = simulate(copy_kernel((2, 2), nl.float32, dge_mode=1, oob_mode=0), x, target="trn2")
    np.testing.assert_array_equal(got, x)


# ---- dma_transpose ---------------------------------------------------------------------------

def transpose_kernel(dst_shape, via_sbuf=False, **kw):
    def kernel(x):
        src = x
        if via_sbuf:
            src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=x)
        t = nl.ndarray(dst_shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=src, **kw)
        out = nl.ndarray(dst_shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


def bf16_bits(shape, rng):
    bits = rng.integers(0, 2**16, shape, dtype=np.uint16)
    bits.reshape(-1)[:3] = [0x7F81, 0xFFC1, 0x8000]     # NaN payloads and -0.0 survive
    return bits


@pytest.mark.parametrize("via_sbuf", [False, True])
def test_dma_transpose_2d_bit_exact(rng, via_sbuf):
    bits = bf16_bits((5, 7), rng)
    got = simulate(transpose_kernel((7, 5), via_sbuf), bits.view(BF16), target="trn2")
    assert got.view(np.uint16).tolist() == bits.T.tolist()


def test_dma_transpose_3d_and_4d_default_and_explicit_axes(rng):
    b3 = bf16_bits((2, 3, 4), rng)
    got = simulate(transpose_kernel((4, 3, 2)), b3.view(BF16), target="trn2")
    assert got.view(np.uint16).tolist() == np.transpose(b3, (2, 1, 0)).tolist()
    b4 = rng.integers(-30000, 30000, (2, 3, 4, 5), dtype=np.int16)
    got = simulate(transpose_kernel((5, 3, 4, 2), axes=(3, 1, 2, 0)), b4, target="trn3")
    np.testing.assert_array_equal(got, np.transpose(b4, (3, 1, 2, 0)))


def test_dma_transpose_hwdge_shape_rules(rng):
    bits = bf16_bits((16, 128), rng)
    got = simulate(transpose_kernel((128, 16), dge_mode=nisa.dge_mode.hwdge), bits.view(BF16), target="trn2")
    assert got.view(np.uint16).tolist() == bits.T.tolist()
    with pytest.raises(ShapeError, match=err("dma_transpose", "dge_mode=hwdge needs src.shape[0] == 16, "
                                                              "got 8 on trn2")):
        simulate(transpose_kernel((128, 8), dge_mode=nisa.dge_mode.hwdge), np.zeros((8, 128), BF16),
                 target="trn2")
    with pytest.raises(ShapeError, match=err("dma_transpose", "dge_mode=hwdge needs src.shape[-1] to be a "
                                                              "multiple of 128, got 64 on trn2")):
        simulate(transpose_kernel((64, 16), dge_mode=nisa.dge_mode.hwdge), np.zeros((16, 64), BF16),
                 target="trn2")


def test_dma_transpose_hwdge_needs_trn2():
    with pytest.raises(UnsupportedError, match=err("dma_transpose", "dge_mode=hwdge needs trn2 or newer, "
                                                                    "not trn1")):
        simulate(transpose_kernel((128, 16), dge_mode=nisa.dge_mode.hwdge), np.zeros((16, 128), BF16),
                 target="trn1")
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    np.testing.assert_array_equal(simulate(transpose_kernel((3, 2)), x, target="trn1"), x.T)


def test_dma_transpose_needs_two_byte_dtype():
    with pytest.raises(DtypeError, match=err("dma_transpose", "src dtype float32 is 4 bytes; the DMA "
                                                              "transpose needs a 2-byte dtype")):
        simulate(transpose_kernel((3, 2)), np.zeros((2, 3), np.float32), target="trn2")


def test_dma_transpose_dtype_must_match():
    def kernel(x):
        t = nl.ndarray((3, 2), dtype=nl.float16, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x)
    with pytest.raises(DtypeError, match=err("dma_transpose", "dst dtype float16 must equal src dtype "
                                                              "bfloat16")):
        simulate(kernel, np.zeros((2, 3), BF16), target="trn2")


def test_dma_transpose_unsupported_axes():
    with pytest.raises(ShapeError, match=err("dma_transpose", "axes (0, 2, 1) is not supported for a 3-D "
                                                              "src; expected (2, 1, 0)")):
        simulate(transpose_kernel((2, 4, 3), axes=(0, 2, 1)), np.zeros((2, 3, 4), BF16), target="trn2")


def test_dma_transpose_dst_shape_must_be_permuted_src_shape():
    with pytest.raises(ShapeError, match=err("dma_transpose", "dst shape (2, 3) must equal the transposed "
                                                              "src shape (3, 2)")):
        simulate(transpose_kernel((2, 3)), np.zeros((2, 3), BF16), target="trn2")
    with pytest.raises(ShapeError, match=err("dma_transpose", "dst shape (3, 2, 1) must equal the "
                                                              "transposed src shape (3, 2)")):
        simulate(transpose_kernel((3, 2, 1)), np.zeros((2, 3), BF16), target="trn2")


def test_dma_transpose_rank_limits():
    with pytest.raises(ShapeError, match=err("dma_transpose", "src has 5 dims; dma_transpose takes 2, 3 "
                                                              "or 4")):
        simulate(transpose_kernel((1, 1, 1, 1, 2)), np.zeros((2, 1, 1, 1, 1), BF16), target="trn2")


def test_dma_transpose_dst_must_be_sbuf_and_src_not_psum():
    def to_hbm(x):
        out = nl.ndarray((3, 2), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_transpose(dst=out, src=x)
    with pytest.raises(MemorySpaceError, match=err("dma_transpose", "dst is in shared_hbm (HBM); must be in "
                                                                    "sbuf")):
        simulate(to_hbm, np.zeros((2, 3), BF16), target="trn2")

    def from_psum(x):
        p = nl.ndarray((2, 3), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        nisa.dma_transpose(dst=nl.ndarray((3, 2), dtype=nl.bfloat16, buffer=nl.sbuf), src=p)
    with pytest.raises(MemorySpaceError, match=err("dma_transpose", "src is in psum; must be in private_hbm "
                                                                    "or sbuf or shared_hbm")):
        simulate(from_psum, np.zeros((2, 3), BF16), target="trn2")


def test_dma_transpose_indirect_and_other_modes_unsupported():
    with pytest.raises(UnsupportedError, match=err("dma_transpose", "the indirect (gather) transpose "
                                                   "(src.ap(vector_offset=...), dge_mode=swdge) is not "
                                                   "supported by nkisim yet")):
        simulate(transpose_kernel((3, 2), dge_mode=nisa.dge_mode.swdge), np.zeros((2, 3), BF16),
                 target="trn2")
    with pytest.raises(UnsupportedError, match=err("dma_transpose", "dge_mode=none is not valid for "
                                                   "dma_transpose; use unknown or hwdge")):
        simulate(transpose_kernel((3, 2), dge_mode=3), np.zeros((2, 3), BF16), target="trn2")
    with pytest.raises(UnsupportedError, match=err("dma_transpose", "oob_mode=skip is only valid for an "
                                                   "indirect src")):
        simulate(transpose_kernel((3, 2), oob_mode=nisa.oob_mode.skip), np.zeros((2, 3), BF16),
                 target="trn2")


def test_dma_transpose_priority_range():
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    np.testing.assert_array_equal(simulate(transpose_kernel((3, 2), priority=3), x, target="trn3"), x.T)
    with pytest.raises(NkiError, match=err("dma_transpose", "priority must be None or an int in 0..3, got 4")):
        simulate(transpose_kernel((3, 2), priority=4), x, target="trn3")
