"""nisa.tensor_copy, memset, iota, tensor_copy_predicated: values against NumPy, every rule."""
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, EngineError, MemorySpaceError, ShapeError
from conftest import simulate
from _events import line, record, roles

BF16 = ml_dtypes.bfloat16


def err(op, what):
    """Whole-message pattern: '<op>: <what> (test_copy.py:<line>)'."""
    return rf"^nisa\.{op}: {re.escape(what)} \(test_copy\.py:\d+\)$"


def load(x, buffer=nl.sbuf, dtype=None):
    t = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=buffer)
    if buffer is nl.psum:
        s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        nisa.tensor_copy(dst=t, src=s)
    else:
        nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    if t.buffer is nl.psum:
        s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def nan_payloads_f32(shape):
    bits = np.arange(np.prod(shape), dtype=np.uint32).reshape(shape) | np.uint32(0x7FC00000)
    return bits.view(np.float32)


# ---- tensor_copy -----------------------------------------------------------------------------

def test_tensor_copy_same_dtype_is_bit_exact_with_nan_payloads():
    x = nan_payloads_f32((4, 6))
    x[0, :3] = [1.5, -0.0, np.inf]

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x))
        return store(d)
    got = simulate(kernel, x, target="trn2")
    assert got.view(np.uint32).tolist() == x.view(np.uint32).tolist()


def test_tensor_copy_casts_once_and_free_shapes_may_differ(rng):
    x = rng.standard_normal((8, 12)).astype(np.float32)

    def kernel(x):
        d = nl.ndarray((8, 3, 4), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.tensor_copy(dst=d, src=load(x), engine=nisa.engine.vector)
        return store(d)
    got = simulate(kernel, x, target="trn2")
    np.testing.assert_array_equal(got.view(np.uint16), x.astype(BF16).reshape(8, 3, 4).view(np.uint16))


def test_tensor_copy_partition_mismatch():
    def kernel(x):
        d = nl.ndarray((4, 6), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x))
    with pytest.raises(ShapeError, match=err("tensor_copy", "dst partition dim 4 does not match src "
                                                           "partition dim 3")):
        simulate(kernel, np.zeros((3, 6), np.float32), target="trn2")


def test_tensor_copy_free_size_mismatch():
    def kernel(x):
        d = nl.ndarray((3, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x))
    with pytest.raises(ShapeError, match=err("tensor_copy", "dst has 5 elements per partition, src has "
                                                           "6 (shapes (3, 5) vs (3, 6))")):
        simulate(kernel, np.zeros((3, 6), np.float32), target="trn2")


def test_tensor_copy_gpsimd_cannot_touch_psum():
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x, nl.psum), engine=nisa.engine.gpsimd)
    with pytest.raises(MemorySpaceError, match=err("tensor_copy", "src is in psum, which the gpsimd "
                                                                 "engine cannot access")):
        simulate(kernel, np.zeros((2, 2), np.float32), target="trn2")


def test_tensor_copy_hbm_source_rejected():
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=x)
    with pytest.raises(MemorySpaceError, match=err("tensor_copy", "src is in shared_hbm (HBM); must be in psum "
                                                                 "or sbuf")):
        simulate(kernel, np.zeros((2, 2), np.float32), target="trn2")


@pytest.mark.parametrize("target", ["trn2", "trn3"])
@pytest.mark.parametrize("engine", [nisa.engine.vector, nisa.engine.scalar, nisa.engine.gpsimd,
                                    nisa.engine.unknown])
def test_tensor_copy_legal_engines(target, engine):
    x = nan_payloads_f32((3, 4))

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x), engine=engine)
        return store(d)
    got = simulate(kernel, x, target=target)
    assert got.view(np.uint32).tolist() == x.view(np.uint32).tolist()


@pytest.mark.parametrize("engine", [nisa.engine.tensor, nisa.engine.dma, nisa.engine.sync])
def test_tensor_copy_other_engines_rejected(engine):
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x), engine=engine)
    with pytest.raises(EngineError, match=err("tensor_copy", f"engine {engine.name} is not supported on trn2; "
                                                             f"expected vector, scalar, gpsimd or unknown")):
        simulate(kernel, np.zeros((2, 2), np.float32), target="trn2")


def test_tensor_copy_scalar_engine_unsupported_on_trn1():
    """Decision: "On NeuronCore v2, tensor_copy is not supported on the Scalar Engine" wins over the
    paragraph describing the v2 Scalar engine copy; vector and gpsimd still copy on trn1."""
    def kernel(x, engine):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x), engine=engine)
        return store(d)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for engine in (nisa.engine.vector, nisa.engine.gpsimd, nisa.engine.unknown):
        np.testing.assert_array_equal(simulate(kernel, x, engine, target="trn1"), x)
    with pytest.raises(EngineError, match=err("tensor_copy", "engine scalar is not supported on trn1; expected "
                                                             "vector, gpsimd or unknown (use nisa.activation "
                                                             "with op=nl.copy)")):
        simulate(kernel, x, nisa.engine.scalar, target="trn1")


# ---- memset ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, value, want", [
    (np.float32, 0.1, np.float32(0.1)),
    (BF16, 0.1, np.float32(0.1).astype(BF16)),
    (np.int32, 7, np.int32(7)),
    (np.int8, -3.0, np.int8(-3)),
    (np.uint16, 65535, np.uint16(65535)),
])
def test_memset_fills_rounded_once(dtype, value, want):
    def kernel(x):
        d = nl.ndarray((3, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=d, value=value)
        return store(d)
    got = simulate(kernel, np.zeros((1, 1), dtype), target="trn2")
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.full((3, 5), want, dtype))


def test_memset_psum_vector_ok_gpsimd_rejected():
    def ok(x):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=d, value=2.5, engine=nisa.engine.vector)
        return store(d)
    np.testing.assert_array_equal(simulate(ok, np.zeros((1, 1), np.float32), target="trn2"),
                                  np.full((2, 4), 2.5, np.float32))

    def bad(x):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=d, value=0.0, engine=nisa.engine.gpsimd)
    with pytest.raises(MemorySpaceError, match=err("memset", "dst is in psum, which the gpsimd engine "
                                                            "cannot access")):
        simulate(bad, np.zeros((1, 1), np.float32), target="trn2")


@pytest.mark.parametrize("engine", [nisa.engine.scalar, nisa.engine.tensor])
def test_memset_engine_vector_or_gpsimd_only(engine):
    def kernel(x, engine):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=d, value=1.5, engine=engine)
        return store(d)
    for ok in (nisa.engine.vector, nisa.engine.gpsimd, nisa.engine.unknown):
        np.testing.assert_array_equal(simulate(kernel, np.zeros((1, 1), np.float32), ok, target="trn2"),
                                      np.full((2, 4), 1.5, np.float32))
    with pytest.raises(EngineError, match=err("memset", f"engine {engine.name} is not supported on trn2; "
                                                        f"expected vector, gpsimd or unknown")):
        simulate(kernel, np.zeros((1, 1), np.float32), engine, target="trn2")


def test_memset_fractional_value_into_int_rejected():
    def kernel(x):
        nisa.memset(dst=nl.ndarray((2, 2), dtype=nl.int32, buffer=nl.sbuf), value=0.5)
    with pytest.raises(DtypeError, match=err("memset", "value 0.5 is not an integer but dst dtype is int32")):
        simulate(kernel, np.zeros((1, 1), np.float32), target="trn2")


def test_memset_out_of_range_value_rejected():
    def kernel(x):
        nisa.memset(dst=nl.ndarray((2, 2), dtype=nl.uint8, buffer=nl.sbuf), value=256)
    with pytest.raises(DtypeError, match=err("memset", "value 256 is outside the range of uint8")):
        simulate(kernel, np.zeros((1, 1), np.float32), target="trn2")


# ---- iota ------------------------------------------------------------------------------------

def iota_ref(p, pattern, offset=0, channel_multiplier=0):
    """The doc's pseudo code, loop by loop."""
    pat = list(pattern) + [[0, 1]] * (4 - len(pattern))
    (sw, nw), (sz, nz), (sy, ny), (sx, nx) = pat
    out = []
    for c in range(p):
        row = [offset + c * channel_multiplier + w * sw + z * sz + y * sy + x * sx
               for w in range(nw) for z in range(nz) for y in range(ny) for x in range(nx)]
        out.append(row)
    return np.array(out, np.int64)


def run_iota(shape, dtype, pattern, offset=0, channel_multiplier=0, target="trn2"):
    def kernel(x):
        d = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
        nisa.iota(dst=d, pattern=pattern, offset=offset, channel_multiplier=channel_multiplier)
        return store(d)
    return simulate(kernel, np.zeros((1, 1), np.float32), target=target)


def test_iota_column_and_row_idioms():
    col = run_iota((8, 1), nl.int32, [[0, 1]], offset=5, channel_multiplier=3)
    np.testing.assert_array_equal(col, (5 + 3 * np.arange(8)).reshape(8, 1))
    row = run_iota((4, 6), nl.int32, [[1, 6]])
    np.testing.assert_array_equal(row, np.tile(np.arange(6), (4, 1)))


def test_iota_four_dim_pattern_negative_and_zero_steps():
    pattern = [[100, 2], [-7, 3], [0, 2], [1, 2]]
    got = run_iota((5, 2, 12), nl.int32, pattern, offset=-4, channel_multiplier=-1000)
    np.testing.assert_array_equal(got.reshape(5, 24), iota_ref(5, pattern, -4, -1000))


def test_iota_step_zero_fills_a_constant():
    np.testing.assert_array_equal(run_iota((3, 4), nl.float32, [[0, 4]], offset=9), np.full((3, 4), 9.0))


def test_iota_float_dst_rounds_once_via_int32():
    got = run_iota((2, 4), nl.bfloat16, [[257, 4]], offset=1)
    want = (1 + 257 * np.arange(4, dtype=np.float32)).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), np.tile(want, (2, 1)).view(np.uint16))


def test_iota_int32_arithmetic_wraps():
    got = run_iota((1, 2), nl.int32, [[1, 2]], offset=2**31 - 1)
    np.testing.assert_array_equal(got, [[2**31 - 1, -2**31]])


def test_iota_narrow_int_dst_saturates():
    got = run_iota((1, 3), nl.int8, [[100, 3]], offset=-100)
    np.testing.assert_array_equal(got, [[-100, 0, 100]])
    got = run_iota((1, 2), nl.int8, [[200, 2]], offset=-200)
    np.testing.assert_array_equal(got, [[-128, 0]])


class Register:
    def __init__(self, value):
        self.value = value


def test_iota_offset_from_register_and_1x1_tensor():
    got = run_iota((2, 3), nl.int32, [[1, 3]], offset=Register(10), channel_multiplier=100)
    np.testing.assert_array_equal(got, [[10, 11, 12], [110, 111, 112]])

    def kernel(off):
        reg = load(off)
        d = nl.ndarray((2, 3), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=d, pattern=[[1, 3]], offset=reg)
        return store(d)
    got = simulate(kernel, np.array([[-3]], np.int32), target="trn2")
    np.testing.assert_array_equal(got, [[-3, -2, -1], [-3, -2, -1]])


def test_iota_element_count_mismatch():
    with pytest.raises(ShapeError, match=err("iota", "pattern covers 6 elements per partition, dst has 8")):
        run_iota((2, 8), nl.int32, [[1, 2], [1, 3]])


def test_iota_pattern_more_than_four_dims():
    with pytest.raises(ShapeError, match=err("iota", "pattern has 5 dims, at most 4")):
        run_iota((2, 1), nl.int32, [[1, 1]] * 5)


def test_iota_malformed_pattern():
    with pytest.raises(ShapeError, match=err("iota", "pattern must be a list of [step, count] pairs, got [1, 4]")):
        run_iota((2, 4), nl.int32, [1, 4])


def test_iota_fractional_offset_rejected():
    with pytest.raises(DtypeError, match=err("iota", "offset must be an int32 value, got 0.5")):
        run_iota((2, 4), nl.int32, [[1, 4]], offset=0.5)


def test_iota_dst_in_psum_rejected():
    def kernel(x):
        nisa.iota(dst=nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.psum), pattern=[[1, 4]])
    with pytest.raises(MemorySpaceError, match=err("iota", "dst is in psum; must be in sbuf")):
        simulate(kernel, np.zeros((1, 1), np.float32), target="trn2")


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 16),
       pattern=st.lists(st.tuples(st.integers(-50, 50), st.integers(1, 4)), min_size=1, max_size=4),
       offset=st.integers(-1000, 1000), mult=st.integers(-64, 64))
def test_iota_matches_doc_pseudo_code(p, pattern, offset, mult):
    pattern = [list(e) for e in pattern]
    n = int(np.prod([c for _, c in pattern]))
    got = run_iota((p, n), nl.int32, pattern, offset, mult)
    np.testing.assert_array_equal(got, iota_ref(p, pattern, offset, mult))


# ---- tensor_copy_predicated ------------------------------------------------------------------

def run_predicated(x, pred, src, reverse_pred=False, pred_buffer=nl.sbuf, src_buffer=nl.sbuf):
    def kernel(x, pred, *rest):
        d = load(x)
        s = load(rest[0], src_buffer) if rest else src
        nisa.tensor_copy_predicated(dst=d, src=s, predicate=load(pred, pred_buffer),
                                    reverse_pred=reverse_pred)
        return store(d)
    args = (x, pred) + ((src,) if isinstance(src, np.ndarray) else ())
    return simulate(kernel, *args, target="trn2")


@pytest.mark.parametrize("pdtype", [np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("reverse", [False, True])
def test_tensor_copy_predicated_tensor_src_bit_exact(rng, pdtype, reverse):
    x = nan_payloads_f32((4, 8))
    src = (x.view(np.uint32) ^ np.uint32(0x00200000)).view(np.float32)
    pred = rng.integers(0, 3, (4, 8)).astype(pdtype)
    got = run_predicated(x, pred, src, reverse)
    mask = (pred != 0) ^ reverse
    want = np.where(mask, src.view(np.uint32), x.view(np.uint32))
    assert got.view(np.uint32).tolist() == want.tolist()


def test_tensor_copy_predicated_scalar_src_and_int_dst(rng):
    x = rng.integers(-2**31, 2**31 - 1, (3, 5)).astype(np.int32)
    pred = rng.integers(0, 2, (3, 5)).astype(np.uint8)
    got = run_predicated(x, pred, 7)
    np.testing.assert_array_equal(got, np.where(pred != 0, 7, x))


def test_tensor_copy_predicated_scalar_into_bf16_rounds_once(rng):
    x = rng.standard_normal((2, 6)).astype(BF16)
    pred = np.array([[1, 0, 1, 0, 1, 0]] * 2, np.uint16)
    got = run_predicated(x, pred, 0.1)
    want = np.where(pred != 0, np.float32(0.1).astype(BF16), x)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_tensor_copy_predicated_scalar_keeps_unselected_bits_exactly():
    bits = np.array([[0x7F81, 0xFFC3, 0x8000, 0x3F80]], np.uint16)      # bf16 NaN payloads, -0.0
    pred = np.array([[0, 0, 0, 1]], np.uint8)
    got = run_predicated(bits.view(BF16), pred, 2.0)
    assert got.view(np.uint16).tolist() == [[0x7F81, 0xFFC3, 0x8000, 0x4000]]


def test_tensor_copy_predicated_float_predicate_rejected():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(DtypeError, match=err("tensor_copy_predicated", "predicate dtype float32 is not "
                                             "supported on trn2; expected one of uint8, uint16, uint32")):
        run_predicated(x, x, x)


def test_tensor_copy_predicated_src_dtype_must_match_dst():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(DtypeError, match=err("tensor_copy_predicated", "src dtype bfloat16 must equal dst "
                                                                       "dtype float32")):
        run_predicated(x, np.ones((2, 2), np.uint8), np.zeros((2, 2), BF16))


def test_tensor_copy_predicated_src_and_predicate_not_both_psum():
    x = np.zeros((2, 2), np.float32)
    ok = run_predicated(x, np.ones((2, 2), np.uint8), np.ones((2, 2), np.float32), src_buffer=nl.psum)
    np.testing.assert_array_equal(ok, np.ones((2, 2)))
    with pytest.raises(MemorySpaceError, match=err("tensor_copy_predicated", "src and predicate are both "
                                                   "in psum; at most one may be")):
        run_predicated(x, np.ones((2, 2), np.uint8), np.ones((2, 2), np.float32), pred_buffer=nl.psum,
                       src_buffer=nl.psum)


def test_tensor_copy_predicated_shape_mismatch():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(ShapeError, match=err("tensor_copy_predicated", "predicate has 3 elements per "
                                             "partition, dst has 4 (shapes (2, 3) vs (2, 4))")):
        run_predicated(x, np.ones((2, 3), np.uint8), 1.0)


# ---- the instruction: keywords and events ----------------------------------------------------

@pytest.mark.parametrize("value, shown", [("a", "str 'a'"), (None, "NoneType None"), (1 + 2j, "complex (1+2j)")])
def test_memset_value_that_is_not_a_number_raises_dtype_error(value, shown):
    def kernel():
        d = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=d, value=value)
    with pytest.raises(DtypeError, match="^nisa\\.memset: value must be a numeric scalar constant, got "
                                         + re.escape(shown)):
        simulate(kernel, target="trn2")


def test_memset_misspelt_keyword_raises_type_error():
    def kernel():
        d = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=d, value=0.0, egnine=nisa.engine.vector)  # ev:kw
    want = ("nisa.memset() got an unexpected keyword argument 'egnine'; did you mean 'engine'? "
            f"({line(__file__, 'kw')})")
    with pytest.raises(TypeError, match="^" + re.escape(want) + "$"):
        simulate(kernel, target="trn2")


def test_tensor_copy_keeps_the_old_dtype_keyword():
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=load(x), dtype=nl.float32)
        return store(d)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(simulate(kernel, x, target="trn2"), x)


@pytest.mark.parametrize("engine, want", [(nisa.engine.unknown, "vector"), (nisa.engine.gpsimd, "gpsimd"),
                                          (nisa.engine.scalar, "scalar")])
def test_tensor_copy_event_names_the_engine_that_ran(engine, want):
    def kernel(x):
        s = load(x)
        d = nl.ndarray((2, 3), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=s, engine=engine)  # ev:copy
        return store(d)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for fast in (True, False):
        out, ev = record(kernel, x, fast=fast, target="trn2")
        np.testing.assert_array_equal(out, x.astype(BF16))
        e = ev[1]
        assert (e.op, e.api, e.engine, e.location) == ("tensor_copy", "nisa.tensor_copy", want,
                                                       line(__file__, "copy"))
        assert e.options["engine"] == engine.name and e.options["dtype"] is None
        assert roles(e.reads) == [("src", "sbuf", (2, 3), "float32", 24)]
        assert roles(e.writes) == [("dst", "sbuf", (2, 3), "bfloat16", 12)]
        assert e.reads[0].alloc == ev[0].writes[0].alloc


def test_memset_event_and_engine():
    def kernel():
        d = nl.ndarray((2, 3), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=d, value=5)
        nisa.memset(dst=d[:, 0:1], value=-1, engine=nisa.engine.gpsimd)
        return store(d)
    out, ev = record(kernel, target="trn2")
    np.testing.assert_array_equal(out, [[-1, 5, 5], [-1, 5, 5]])
    assert [(e.op, e.engine, e.options["value"]) for e in ev[:2]] == [("memset", "vector", 5),
                                                                       ("memset", "gpsimd", -1)]
    assert roles(ev[0].writes) == [("dst", "sbuf", (2, 3), "int32", 24)]
    assert roles(ev[1].writes) == [("dst", "sbuf", (2, 1), "int32", 8)]
    assert ev[0].reads == ()


def test_iota_event_and_a_runtime_offset_read_on_every_call():
    """A (1, 1) offset tensor keys the rule memo by its static signature; its value is read when
    the instruction runs, so the same call with a new value gives new results."""
    def kernel(offs):
        reg = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        outs = []
        for r in range(2):
            nisa.dma_copy(dst=reg, src=offs[r:r + 1, :])
            d = nl.ndarray((2, 3), dtype=nl.int32, buffer=nl.sbuf)
            nisa.iota(dst=d, pattern=((1, 3),), offset=reg, channel_multiplier=10)
            outs.append(store(d))
        return tuple(outs)
    for fast in (True, False):
        (a, b), ev = record(kernel, np.array([[0], [100]], np.int32), fast=fast, target="trn2")
        np.testing.assert_array_equal(a, [[0, 1, 2], [10, 11, 12]])
        np.testing.assert_array_equal(b, [[100, 101, 102], [110, 111, 112]])
        iotas = [e for e in ev if e.op == "iota"]
        assert [e.engine for e in iotas] == ["gpsimd"] * 2
        assert roles(iotas[0].reads) == [("offset", "sbuf", (1, 1), "int32", 4)]
        assert roles(iotas[0].writes) == [("dst", "sbuf", (2, 3), "int32", 24)]
        assert iotas[0].options["pattern"] == ((1, 3),) and iotas[0].options["channel_multiplier"] == 10


def test_tensor_copy_predicated_event():
    def kernel(x, p):
        d = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=d, value=0.0)
        nisa.tensor_copy_predicated(dst=d, src=load(x), predicate=load(p))
        nisa.tensor_copy_predicated(dst=d, src=9.0, predicate=load(p), reverse_pred=True)
        return store(d)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = np.array([[1, 0, 1], [0, 0, 1]], np.uint8)
    out, ev = record(kernel, x, p, target="trn2")
    np.testing.assert_array_equal(out, np.where(p != 0, x, 9.0))
    tcp = [e for e in ev if e.op == "tensor_copy_predicated"]
    assert [e.engine for e in tcp] == ["vector", "vector"]
    assert roles(tcp[0].reads) == [("src", "sbuf", (2, 3), "float32", 24), ("predicate", "sbuf", (2, 3), "uint8", 6)]
    assert roles(tcp[1].reads) == [("predicate", "sbuf", (2, 3), "uint8", 6)]
    assert tcp[1].options["src"] == 9.0 and tcp[1].options["reverse_pred"] is True
    assert roles(tcp[0].writes) == [("dst", "sbuf", (2, 3), "float32", 24)]
