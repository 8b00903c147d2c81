"""nisa.dma_copy and nisa.dma_transpose: values against NumPy, every rule."""
import re

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import (BoundsError, DtypeError, EngineError, MemorySpaceError, NkiError, ShapeError,
                           UnsupportedError)
from conftest import simulate
from _events import line, record, roles

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
    """nisa.dma_transpose "DMA Direct Transpose Constraints" (hwdge): 2-D src.shape[0] == 16,
    src.shape[-1] <= 128 (not a multiple of 128)."""
    bits = bf16_bits((16, 128), rng)
    got = simulate(transpose_kernel((128, 16), dge_mode=nisa.dge_mode.hwdge), bits.view(BF16), target="trn2")
    assert got.view(np.uint16).tolist() == bits.T.tolist()
    bits = bf16_bits((16, 64), rng)
    got = simulate(transpose_kernel((64, 16), dge_mode=nisa.dge_mode.hwdge), bits.view(BF16), target="trn2")
    assert got.view(np.uint16).tolist() == bits.T.tolist()
    with pytest.raises(ShapeError, match=err("dma_transpose", "dge_mode=hwdge needs src.shape[0] == 16 for a "
                                                              "2-D src, got 8 on trn2")):
        simulate(transpose_kernel((128, 8), dge_mode=nisa.dge_mode.hwdge), np.zeros((8, 128), BF16),
                 target="trn2")
    # (src.shape[-1] <= 128 is implied by dst's partition limit: dst.shape[0] == src.shape[-1])


def test_dma_transpose_hwdge_3d_rules(rng):
    """3-D/4-D: src.shape[0] in {1, 2, 4, 8, 16} and (src.shape[0] * src.shape[-2]) % 16 == 0."""
    hw = {"dge_mode": nisa.dge_mode.hwdge}
    for shape in [(4, 4, 8), (1, 16, 8), (2, 8, 128)]:
        bits = bf16_bits(shape, rng)
        got = simulate(transpose_kernel(shape[::-1], **hw), bits.view(BF16), target="trn2")
        assert got.view(np.uint16).tolist() == np.transpose(bits, (2, 1, 0)).tolist()
    b4 = bf16_bits((2, 3, 8, 4), rng)
    got = simulate(transpose_kernel((4, 3, 8, 2), **hw), b4.view(BF16), target="trn3")
    assert got.view(np.uint16).tolist() == np.transpose(b4, (3, 1, 2, 0)).tolist()
    with pytest.raises(ShapeError, match=err("dma_transpose", "dge_mode=hwdge needs src.shape[0] in "
                                                              "{1, 2, 4, 8, 16} for a 3-D src, got 3 on trn2")):
        simulate(transpose_kernel((8, 16, 3), **hw), np.zeros((3, 16, 8), BF16), target="trn2")
    with pytest.raises(ShapeError, match=err("dma_transpose", "dge_mode=hwdge needs src.shape[0] * "
                                                              "src.shape[-2] to be a multiple of 16, got "
                                                              "4 * 3 on trn2")):
        simulate(transpose_kernel((8, 3, 4), **hw), np.zeros((4, 3, 8), BF16), target="trn2")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int8])
def test_dma_transpose_any_dtype_without_hwdge(rng, dtype):
    """The 2-byte dtype rule is listed only under hwdge and the indirect transpose."""
    x = (rng.standard_normal((5, 7)) * 50).astype(dtype)
    got = simulate(transpose_kernel((7, 5)), x, target="trn2")
    np.testing.assert_array_equal(got, x.T)
    got = simulate(transpose_kernel((7, 5), via_sbuf=True), x, target="trn3")
    np.testing.assert_array_equal(got, x.T)


def test_dma_transpose_hwdge_needs_trn2():
    with pytest.raises(UnsupportedError, match=err("dma_transpose", "dge_mode=hwdge needs trn2 or newer, "
                                                                    "not trn1")):
        simulate(transpose_kernel((128, 16), dge_mode=nisa.dge_mode.hwdge), np.zeros((16, 128), BF16),
                 target="trn1")
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    np.testing.assert_array_equal(simulate(transpose_kernel((3, 2)), x, target="trn1"), x.T)


def test_dma_transpose_hwdge_needs_two_byte_dtype():
    with pytest.raises(DtypeError, match=err("dma_transpose", "src dtype float32 is 4 bytes; the "
                                                              "dge_mode=hwdge transpose needs a 2-byte dtype")):
        simulate(transpose_kernel((128, 16), dge_mode=nisa.dge_mode.hwdge), np.zeros((16, 128), np.float32),
                 target="trn2")


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


def test_dma_transpose_swdge_needs_an_indirect_src_and_other_modes_unsupported():
    with pytest.raises(UnsupportedError, match=err("dma_transpose", "dge_mode=swdge is the indirect (gather) "
                                                   "transpose: src must be src.ap(..., vector_offset=indices); "
                                                   "a direct transpose takes unknown or hwdge")):
        simulate(transpose_kernel((3, 2), dge_mode=nisa.dge_mode.swdge), np.zeros((2, 3), BF16),
                 target="trn2")
    got = simulate(transpose_kernel((3, 2), dge_mode=3), np.arange(6, dtype=np.float32).reshape(2, 3).astype(BF16),
                   target="trn2")                      # none: no DGE (nki-library passes it)
    np.testing.assert_array_equal(got.astype(np.float32), np.arange(6, dtype=np.float32).reshape(2, 3).T)
    with pytest.raises(UnsupportedError, match=err("dma_transpose", "oob_mode=skip is only valid for an "
                                                   "indirect src (src.ap(scalar_offset=...) or a dynamic "
                                                   "select)")):
        simulate(transpose_kernel((3, 2), oob_mode=nisa.oob_mode.skip), np.zeros((2, 3), BF16),
                 target="trn2")


def test_dma_transpose_priority_range():
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    np.testing.assert_array_equal(simulate(transpose_kernel((3, 2), priority=3), x, target="trn3"), x.T)
    with pytest.raises(ShapeError, match=err("dma_transpose", "priority must be None or an int in 0..3, got 4")):
        simulate(transpose_kernel((3, 2), priority=4), x, target="trn3")


# ---- the instruction: keywords and events ----------------------------------------------------

def test_dma_copy_misspelt_keyword_raises_type_error():
    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mod=nisa.dge_mode.hwdge)  # ev:kw
    want = ("nisa.dma_copy() got an unexpected keyword argument 'dge_mod'; did you mean "
            f"'dge_mode'? ({line(__file__, 'kw')})")
    with pytest.raises(TypeError, match="^" + re.escape(want) + "$"):
        simulate(kernel, np.zeros((4, 8), np.float32), target="trn2")


def test_dma_copy_beta1_mask_keyword_is_a_type_error():
    """Beta 1's ``mask=`` is no parameter of the Beta 2 dma_copy: it is reported, not dropped."""
    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, mask=None)
    with pytest.raises(TypeError, match=r"^nisa\.dma_copy\(\) got an unexpected keyword argument 'mask'"):
        simulate(kernel, np.zeros((4, 8), np.float32), target="trn2")


def test_dma_copy_events_are_dma_with_options_and_the_same_in_both_modes(rng):
    x = rng.standard_normal((4, 8), dtype=np.float32)
    kernel = copy_kernel((4, 8), nl.bfloat16, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.sync)
    kernel_cast = copy_kernel((4, 8), nl.bfloat16)
    for fast in (True, False):
        out, ev = record(kernel_cast, x, fast=fast, target="trn2")
        np.testing.assert_array_equal(out, x.astype(BF16))
        load, store = ev
        assert (load.op, load.api, load.engine) == ("dma_copy", "nisa.dma_copy", "dma")
        assert roles(load.reads) == [("src", "shared_hbm", (4, 8), "float32", 128)]
        assert roles(load.writes) == [("dst", "sbuf", (4, 8), "bfloat16", 64)]
        assert load.options == {"priority": None, "oob_mode": "error", "dge_mode": "unknown",
                                "engine": "unknown"}
        assert roles(store.writes) == [("dst", "shared_hbm", (4, 8), "bfloat16", 64)]
        assert store.reads[0].alloc == load.writes[0].alloc
    xb = x.astype(BF16)
    _, ev = record(kernel, xb, target="trn2")
    assert ev[0].engine == "dma" and (ev[0].options["dge_mode"], ev[0].options["engine"]) == ("hwdge", "sync")


def test_dma_copy_deferred_copy_fires_and_changes_nothing(rng):
    x = rng.standard_normal((4, 8), dtype=np.float32)

    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)                      # a whole tile: deferred
        u = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t)
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out
    out_f, ev_f = record(kernel, x, fast=True)
    out_s, ev_s = record(kernel, x, fast=False)
    assert out_f.tolist() == out_s.tolist() == x.tolist()
    assert list(ev_f) == list(ev_s)
    assert ev_f.fast_paths["deferred_copy"] >= 1 and not +ev_s.fast_paths


def _indirect(idx_rows, scatter=False, oob=nisa.oob_mode.skip):
    def kernel(table, idx):
        rows, f = idx.shape[0], table.shape[1]
        it = nl.ndarray((rows, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=it, src=idx)
        t = nl.ndarray((rows, f), dtype=table.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-7.0)
        view = table.ap([[f, rows], [1, f]], vector_offset=it, indirect_dim=0)
        if scatter:
            nisa.dma_copy(dst=view, src=t, oob_mode=oob)        # ev:scatter
            return table
        nisa.dma_copy(dst=t, src=view, oob_mode=oob)            # ev:gather
        out = nl.ndarray((rows, f), dtype=table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


@pytest.mark.parametrize("fast", [True, False])
def test_indirect_gather_event_notes_the_rows_copied(rng, fast):
    table = rng.standard_normal((10, 6), dtype=np.float32)
    idx = np.array([[3], [12], [9], [-1], [5]], np.int32)       # two rows out of bounds: skipped
    out, ev = record(_indirect(5), table, idx, fast=fast)
    want = np.full((5, 6), -7.0, np.float32)
    want[[0, 2, 4]] = table[[3, 9, 5]]
    np.testing.assert_array_equal(out, want)
    g = ev[2]
    assert (g.op, g.engine, g.location) == ("dma_copy", "dma", line(__file__, "gather"))
    assert g.options["indirect"] is True and g.options["rows"] == 3 and g.options["oob_mode"] == "skip"
    # the gathered elements (the access pattern's shape) and the index tile the rows came from
    assert roles(g.reads) == [("src", "shared_hbm", (5, 6), "float32", 120),
                              ("src.index", "sbuf", (5, 1), "int32", 20)]
    assert g.reads[0].alloc == "arg:table" and g.reads[0].contiguous_bytes == 24   # one row
    assert roles(g.writes) == [("dst", "sbuf", (5, 6), "float32", 120)]


def test_indirect_scatter_event_names_the_scattered_elements_and_the_index(rng):
    table = np.zeros((6, 4), np.float32)
    idx = np.array([[4], [1]], np.int32)
    out, ev = record(_indirect(2, scatter=True), table, idx)
    want = np.zeros((6, 4), np.float32)
    want[[4, 1]] = -7.0
    np.testing.assert_array_equal(out, want)
    s = ev[-1]
    assert s.location == line(__file__, "scatter") and s.options["rows"] == 2
    assert roles(s.writes) == [("dst", "shared_hbm", (2, 4), "float32", 32)]
    assert s.writes[0].alloc == "arg:table"
    assert roles(s.reads) == [("src", "sbuf", (2, 4), "float32", 32),
                              ("dst.index", "sbuf", (2, 1), "int32", 8)]


def test_indirect_index_values_are_checked_on_every_call(rng):
    """Same static signature twice; only the second call's index values are out of bounds."""
    table = rng.standard_normal((4, 3), dtype=np.float32)

    def kernel(table, idx):
        it = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.sbuf)
        t = nl.ndarray((2, 3), dtype=table.dtype, buffer=nl.sbuf)
        for r in range(2):
            nisa.dma_copy(dst=it, src=idx[r])
            nisa.dma_copy(dst=t, src=table.ap([[3, 2], [1, 3]], vector_offset=it, indirect_dim=0))
    idx = np.array([[[1], [2]], [[0], [7]]], np.int32)
    with pytest.raises(BoundsError, match=err("dma_copy", "vector_offset index 7 at partition 1 is outside "
                                                          "0:4 rows of tensor 'argument 0' (4, 3) "
                                                          "(oob_mode=error)")):
        simulate(kernel, table, idx)


def test_indirect_static_rules_still_raise(rng):
    table = np.zeros((4, 3), np.float32)
    with pytest.raises(UnsupportedError, match=err("dma_copy", "indirect (vector_offset) DMA needs the "
                                                               "software DGE, not dge_mode=hwdge")):
        def kernel(table, idx):
            it = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=it, src=idx)
            t = nl.ndarray((2, 3), dtype=table.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=table.ap([[3, 2], [1, 3]], vector_offset=it, indirect_dim=0),
                          dge_mode=nisa.dge_mode.hwdge)
        simulate(kernel, table, np.zeros((2, 1), np.int32), target="trn2")


def test_dma_transpose_event(rng):
    x = rng.standard_normal((4, 8)).astype(BF16)

    def kernel(x):
        d = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=x)
        out = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=d)
        return out
    for fast in (True, False):
        out, ev = record(kernel, x, fast=fast, target="trn2")
        assert out.view(np.uint16).tolist() == x.T.view(np.uint16).tolist()
        e = ev[0]
        assert (e.op, e.engine, e.options["axes"], e.options["dge_mode"]) == ("dma_transpose", "dma", None,
                                                                               "unknown")
        assert roles(e.reads) == [("src", "shared_hbm", (4, 8), "bfloat16", 64)]
        assert roles(e.writes) == [("dst", "sbuf", (8, 4), "bfloat16", 64)]
