"""nisa.affine_select, range_select, select_reduce: values against the doc formulas, the VectorE
accumulator, every rule."""
import re
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.trace
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, MemorySpaceError, NkiError, ShapeError, UnsupportedError
from conftest import simulate, tile_out
from _tiles import load

BF16 = ml_dtypes.bfloat16
FP32_MIN = np.float32(-3.4028235e38)


def err(op, what):
    return rf"^nisa\.{op}: {re.escape(what)} \(test_select\.py:\d+\)$"


def store(t):
    if t.buffer is nl.psum:
        s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ---- affine_select ---------------------------------------------------------------------------

def affine_ref(on_true, fill, pattern, offset, mult, cmp):
    """The doc's pseudo code with a flat free index (pattern padded to 4 dims)."""
    p = on_true.shape[0]
    pat = list(pattern) + [[0, 1]] * (4 - len(pattern))
    out = np.empty(on_true.shape, np.float32)
    flat_true = on_true.reshape(p, -1).astype(np.float32)
    flat_out = out.reshape(p, -1)
    for c in range(p):
        i = 0
        for w in range(pat[0][1]):
            for z in range(pat[1][1]):
                for y in range(pat[2][1]):
                    for x in range(pat[3][1]):
                        a = offset + c * mult + w * pat[0][0] + z * pat[1][0] + y * pat[2][0] + x * pat[3][0]
                        flat_out[c, i] = flat_true[c, i] if cmp(a, 0) else fill
                        i += 1
    return out


def run_affine(on_true, pattern, mult, fill, cmp_op=None, offset=0, dst_dtype=None, dst_buf=nl.sbuf):
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=dst_dtype or x.dtype, buffer=dst_buf)
        kw = {} if cmp_op is None else {"cmp_op": cmp_op}
        nisa.affine_select(dst=d, pattern=pattern, channel_multiplier=mult, on_true_tile=load(x),
                           on_false_value=fill, offset=offset, **kw)
        return store(d)
    return simulate(kernel, on_true, target="trn2")


@pytest.mark.parametrize("q0, k0", [(0, 0), (16, 0), (0, 8), (40, 24)])
def test_affine_select_causal_mask_idiom(rng, q0, k0):
    scores = rng.standard_normal((16, 24)).astype(np.float32)
    got = run_affine(scores, [[-1, 24]], 1, nl.fp32.min, nl.greater_equal, offset=q0 - k0)
    q = q0 + np.arange(16)[:, None]
    k = k0 + np.arange(24)[None, :]
    np.testing.assert_array_equal(got, np.where(k <= q, scores, FP32_MIN))


def test_affine_select_default_cmp_is_equal_and_four_dim_pattern(rng):
    x = rng.standard_normal((6, 2, 3, 4)).astype(np.float32)
    pattern = [[5, 2], [-2, 3], [0, 1], [1, 4]]
    got = run_affine(x, pattern, -1, 9.5, offset=2)
    np.testing.assert_array_equal(got, affine_ref(x, 9.5, pattern, 2, -1, np.equal))


def test_affine_select_bf16_dst_rounds_fill_to_minus_inf(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    got = run_affine(x, [[-1, 8]], 1, float(FP32_MIN), nl.greater_equal, dst_dtype=nl.bfloat16)
    want = affine_ref(x, FP32_MIN, [[-1, 8]], 0, 1, np.greater_equal).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert np.isneginf(got[0, 1].astype(np.float32))


def test_affine_select_same_int_dtype_is_exact():
    x = np.array([[2**31 - 1, -2**31 + 1, 123456789, 5]] * 3, np.int32)
    got = run_affine(x, [[1, 4]], 0, -1.0, nl.less, offset=-2)
    np.testing.assert_array_equal(got, np.where(np.arange(4) - 2 < 0, x, -1))


def test_affine_select_same_float_dtype_keeps_nan_payloads():
    bits = np.array([[0x7F81, 0xFFC3, 0x7F82, 0x3F80]] * 2, np.uint16)
    got = run_affine(bits.view(BF16), [[1, 4]], 0, 0.1, nl.less, offset=-3)
    want = np.where(np.arange(4) < 3, bits, np.float32(0.1).astype(BF16).view(np.uint16))
    assert got.view(np.uint16).tolist() == want.tolist()


def test_affine_select_offset_from_register(rng):
    class Reg:
        value = 3
    x = rng.standard_normal((4, 4)).astype(np.float32)
    got = run_affine(x, [[-1, 4]], 1, 0.0, nl.greater_equal, offset=Reg())
    np.testing.assert_array_equal(got, affine_ref(x, 0.0, [[-1, 4]], 3, 1, np.greater_equal))


def test_affine_select_cmp_op_must_compare():
    with pytest.raises(NkiError, match=err("affine_select", "cmp_op must be a comparison operator, got add")):
        run_affine(np.zeros((2, 2), np.float32), [[1, 2]], 0, 0.0, nl.add)


def test_affine_select_dst_must_be_sbuf():
    with pytest.raises(MemorySpaceError, match=err("affine_select", "dst is in psum; must be in sbuf")):
        run_affine(np.zeros((2, 2), np.float32), [[1, 2]], 0, 0.0, dst_buf=nl.psum)


def test_affine_select_pattern_must_cover_the_tile():
    with pytest.raises(ShapeError, match=err("affine_select", "pattern covers 3 elements per partition, "
                                                              "dst has 4")):
        run_affine(np.zeros((2, 4), np.float32), [[1, 3]], 0, 0.0)


def test_affine_select_on_false_must_be_scalar():
    def kernel(x):
        t = load(x)
        nisa.affine_select(dst=t, pattern=[[1, 2]], channel_multiplier=0, on_true_tile=t, on_false_value=t)
    with pytest.raises(ShapeError, match=err("affine_select", "on_false_value must be a scalar, got NkiTensor")):
        simulate(kernel, np.zeros((2, 2), np.float32), target="trn2")


def test_affine_select_tile_mismatch():
    def kernel(x):
        d = nl.ndarray((2, 3), dtype=x.dtype, buffer=nl.sbuf)
        nisa.affine_select(dst=d, pattern=[[1, 3]], channel_multiplier=0, on_true_tile=load(x),
                           on_false_value=0.0)
    with pytest.raises(ShapeError, match=err("affine_select", "on_true_tile has 4 elements per partition, "
                                                              "dst has 3 (shapes (2, 4) vs (2, 3))")):
        simulate(kernel, np.zeros((2, 4), np.float32), target="trn2")


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 8), n=st.integers(1, 12), step=st.integers(-3, 3), mult=st.integers(-3, 3),
       offset=st.integers(-10, 10), cmp=st.sampled_from(["equal", "not_equal", "less", "less_equal",
                                                         "greater", "greater_equal"]))
def test_affine_select_matches_doc_pseudo_code(p, n, step, mult, offset, cmp):
    x = np.arange(p * n, dtype=np.float32).reshape(p, n) + 1
    got = run_affine(x, [[step, n]], mult, -7.0, getattr(nl, cmp), offset)
    np.testing.assert_array_equal(got, affine_ref(x, -7.0, [[step, n]], offset, mult, getattr(np, cmp)))


# ---- range_select ----------------------------------------------------------------------------

def range_ref(x, b0, b1, op0, op1, start):
    idx = (start + np.arange(x.shape[1])).astype(np.float32)[None, :]
    mask = op0(idx, b0) & op1(idx, b1)
    return np.where(mask, x.astype(np.float32), FP32_MIN)


def run_range(x, b0, b1, op0=nl.greater_equal, op1=nl.less, range_start=0, dst_dtype=None,
              calls=None, target="trn2", **kw):
    """One range_select (or ``calls``: a list of kwargs for successive calls); returns (dst, res)."""
    def kernel(x, b0, b1):
        tb0, tb1, tx = load(b0), load(b1), load(x)
        d = nl.ndarray(x.shape, dtype=dst_dtype or x.dtype, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        for c in calls or [{}]:
            args = dict(dst=d, on_true_tile=tx, comp_op0=op0, comp_op1=op1, bound0=tb0, bound1=tb1,
                        reduce_res=r, range_start=range_start, **kw)
            args.update(c)
            nisa.range_select(**args)
        return store(d), store(r)
    return simulate(kernel, x, b0, b1, target=target)


def test_range_select_matches_numpy_reference(rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    b0 = rng.integers(0, 40, (8, 1)).astype(np.float32)
    b1 = b0 + rng.integers(0, 10, (8, 1)).astype(np.float32)
    dst, res = run_range(x, b0, b1, range_start=24)
    want = range_ref(x, b0, b1, np.greater_equal, np.less, 24)
    np.testing.assert_array_equal(dst, want)
    np.testing.assert_array_equal(res, want.max(axis=1, keepdims=True))


def test_range_select_bf16_dst_fill_is_minus_inf_but_reduce_keeps_fp32_min(rng):
    x = rng.standard_normal((2, 8)).astype(np.float32)
    b0 = np.array([[2], [100]], np.float32)          # row 1 selects nothing
    b1 = np.array([[5], [200]], np.float32)
    dst, res = run_range(x, b0, b1, nl.greater, nl.less_equal, dst_dtype=nl.bfloat16)
    want = range_ref(x, b0, b1, np.greater, np.less_equal, 0)
    np.testing.assert_array_equal(dst.view(np.uint16), want.astype(BF16).view(np.uint16))
    assert np.isneginf(dst[1].astype(np.float32)).all()
    assert res[1, 0] == FP32_MIN and res[0, 0] == want[0].max()


def test_range_select_accumulator_reduce_and_idle(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    b0 = np.zeros((4, 1), np.float32)
    b1 = np.full((4, 1), 8, np.float32)
    calls = [{}, {"range_start": 4, "reduce_cmd": nisa.reduce_cmd.reduce},
             {"reduce_cmd": nisa.reduce_cmd.idle, "range_start": 100}]
    _, res = run_range(x, b0, b1, calls=calls)
    first = range_ref(x, b0, b1, np.greater_equal, np.less, 0)
    second = range_ref(x, b0, b1, np.greater_equal, np.less, 4)
    np.testing.assert_array_equal(res, np.maximum(first.max(1), second.max(1)).reshape(4, 1))


def test_range_select_needs_trn2():
    z = np.zeros((2, 1), np.float32)
    with pytest.raises(UnsupportedError, match=err("range_select", "range_select needs trn2 or newer, not trn1")):
        run_range(np.zeros((2, 4), np.float32), z, z, target="trn1")


def test_range_select_comparison_set():
    z = np.zeros((2, 1), np.float32)
    with pytest.raises(NkiError, match=err("range_select", "comp_op1 must be one of equal, less, less_equal, "
                                                           "greater, greater_equal, got not_equal")):
        run_range(np.zeros((2, 4), np.float32), z, z, op1=nl.not_equal)


def test_range_select_unknown_comparison_names_the_parameter():
    z = np.zeros((2, 1), np.float32)
    with pytest.raises(NkiError, match=rf"^nisa\.range_select: comp_op1 frobnicate is not an ALU operator; "
                                       rf"expected one of abs, .*, subtract \(test_select\.py:\d+\)$"):
        run_range(np.zeros((2, 4), np.float32), z, z, op1="frobnicate")


def test_range_select_on_false_must_be_fp32_min():
    z = np.zeros((2, 1), np.float32)
    with pytest.raises(UnsupportedError, match=err("range_select", "on_false_value must be FP32_MIN "
                                                   "(-3.4028234663852886e+38), got 0.0")):
        run_range(np.zeros((2, 4), np.float32), z, z, on_false_value=0.0)


def test_range_select_dtype_rules():
    z = np.zeros((2, 1), np.float32)
    with pytest.raises(DtypeError, match=err("range_select", "bound1 dtype bfloat16 must be float32")):
        run_range(np.zeros((2, 4), np.float32), z, z.astype(BF16))
    with pytest.raises(DtypeError, match=err("range_select", "on_true_tile dtype int32 is not a float dtype")):
        run_range(np.zeros((2, 4), np.int32), z, z)


def test_range_select_reduce_op_and_cmd():
    z = np.zeros((2, 1), np.float32)
    with pytest.raises(NkiError, match=err("range_select", "reduce_op must be nl.maximum, got add")):
        run_range(np.zeros((2, 4), np.float32), z, z, reduce_op=nl.add)
    with pytest.raises(UnsupportedError, match=err("range_select", "reduce_cmd=load_reduce is not supported "
                                                                   "(no initial value)")):
        run_range(np.zeros((2, 4), np.float32), z, z, reduce_cmd=nisa.reduce_cmd.load_reduce)


# ---- select_reduce ---------------------------------------------------------------------------

def run_select(pred, on_true, on_false, calls=None, pred_buf=nl.sbuf, true_buf=nl.sbuf, res_dtype=nl.float32,
               dst_dtype=None, **kw):
    def kernel(pred, on_true, *rest):
        tp, tt = load(pred, pred_buf), load(on_true, true_buf)
        f = load(rest[0]) if rest else on_false
        d = nl.ndarray(on_true.shape, dtype=dst_dtype or on_true.dtype, buffer=nl.sbuf)
        r = nl.ndarray((on_true.shape[0], 1), dtype=res_dtype, buffer=nl.sbuf)
        for c in calls or [{}]:
            args = dict(dst=d, predicate=tp, on_true=tt, on_false=f, reduce_res=r, **kw)
            args.update(c)
            nisa.select_reduce(**args)
        return store(d), store(r)
    args = (pred, on_true) + ((on_false,) if isinstance(on_false, np.ndarray) else ())
    return simulate(kernel, *args, target="trn2")


@pytest.mark.parametrize("reverse", [False, True])
def test_select_reduce_scalar_on_false_and_row_max(rng, reverse):
    pred = rng.integers(0, 3, (6, 10)).astype(np.uint8)
    x = rng.standard_normal((6, 10)).astype(np.float32)
    dst, res = run_select(pred, x, -5.0, reverse_pred=reverse, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    want = np.where((pred != 0) ^ reverse, x, np.float32(-5.0))
    np.testing.assert_array_equal(dst, want)
    np.testing.assert_array_equal(res, want.max(1, keepdims=True))


def test_select_reduce_column_on_false_and_bf16(rng):
    pred = rng.integers(0, 2, (4, 8)).astype(np.int16)
    x = rng.standard_normal((4, 8)).astype(BF16)
    col = rng.standard_normal((4, 1)).astype(np.float32)
    dst, _ = run_select(pred, x, col)
    want = np.where(pred != 0, x.astype(np.float32), col).astype(BF16)
    np.testing.assert_array_equal(dst.view(np.uint16), want.view(np.uint16))


def test_select_reduce_accumulates_and_idle_leaves_it(rng):
    pred = np.ones((3, 4), np.uint8)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    calls = [{"reduce_cmd": nisa.reduce_cmd.reset_reduce},
             {"reduce_cmd": nisa.reduce_cmd.reduce, "reverse_pred": True},   # all on_false = 10
             {"reduce_cmd": nisa.reduce_cmd.idle, "on_false": 99.0}]
    dst, res = run_select(pred, x, 10.0, calls=calls)
    np.testing.assert_array_equal(res, np.full((3, 1), 10.0, np.float32))
    np.testing.assert_array_equal(dst, x)            # the idle call selected on_true everywhere


def test_select_reduce_shares_the_vector_accumulator_with_range_select(rng):
    x = rng.standard_normal((2, 4)).astype(np.float32)

    def kernel(x):
        t = load(x)
        b = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=b, value=4.0)
        nisa.range_select(dst=t, on_true_tile=t, comp_op0=nl.less, comp_op1=nl.less, bound0=b, bound1=b)
        pred = nl.ndarray((2, 4), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=pred, value=0)
        r = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=d, predicate=pred, on_true=t, on_false=-100.0, reduce_res=r,
                           reduce_cmd=nisa.reduce_cmd.reduce)
        return store(r)
    np.testing.assert_array_equal(simulate(kernel, x, target="trn2"), x.max(1, keepdims=True))


def test_select_reduce_predicate_dtype():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(DtypeError, match=err("select_reduce", "predicate dtype float32 is not supported on "
                                             "trn2; expected one of int8, uint8, int16, uint16, bool")):
        run_select(x, x, 0.0)


def test_select_reduce_on_true_dtype():
    with pytest.raises(DtypeError, match=err("select_reduce", "on_true dtype int32 is not supported; any "
                                             "dtype but tfloat32, int32, uint32")):
        run_select(np.ones((2, 2), np.uint8), np.zeros((2, 2), np.int32), 0.0)


def test_select_reduce_on_true_and_predicate_not_both_psum():
    p, x = np.ones((2, 2), np.uint8), np.zeros((2, 2), np.float32)
    dst, _ = run_select(p, x, 1.0, true_buf=nl.psum)
    np.testing.assert_array_equal(dst, x)
    with pytest.raises(MemorySpaceError, match=err("select_reduce", "on_true and predicate are both in psum; "
                                                                    "at most one may be")):
        run_select(p, x, 1.0, true_buf=nl.psum, pred_buf=nl.psum)


def test_select_reduce_reduce_res_must_be_float():
    with pytest.raises(DtypeError, match=err("select_reduce", "reduce_res dtype int32 is not a float dtype")):
        run_select(np.ones((2, 2), np.uint8), np.zeros((2, 2), np.float32), 0.0, res_dtype=nl.int32)


def test_select_reduce_shape_rules():
    with pytest.raises(ShapeError, match=err("select_reduce", "predicate has 3 elements per partition, "
                                             "on_true has 2 (shapes (2, 3) vs (2, 2))")):
        run_select(np.ones((2, 3), np.uint8), np.zeros((2, 2), np.float32), 0.0)
    with pytest.raises(ShapeError, match=err("select_reduce", "on_false must be a scalar or a (2, 1) tensor, "
                                             "got shape (2, 2)")):
        run_select(np.ones((2, 2), np.uint8), np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))


# ---- the instruction events and the documented signature ----------------------------------------

def _next_line():
    """The line after the caller's: where the instruction under test is called."""
    return sys._getframe(1).f_lineno + 1


def _operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def test_select_events_match_the_kernel_calls():
    lines = []

    def kernel(x, b, m):
        t = load(x)
        lo, hi, pred = load(b), load(b), load(m)
        d = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.affine_select(dst=d, pattern=[[-1, 8]], channel_multiplier=1, on_true_tile=t,
                           on_false_value=0.0, cmp_op=nl.greater_equal)
        r = nl.ndarray((4, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        acc = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.range_select(dst=r, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=lo, bound1=hi, reduce_cmd=3, reduce_res=acc)
        lines.append(_next_line())
        nisa.select_reduce(dst=d, predicate=pred, on_true=t, on_false=-1.0, reduce_res=acc)
        return tile_out(acc)
    with nkisim.trace.record() as events:
        simulate(kernel, np.ones((4, 8), np.float32), np.zeros((4, 1), np.float32),
                 np.ones((4, 8), np.uint8))
    ours = [e for e in events if e.op in ("affine_select", "range_select", "select_reduce")]
    assert [(e.op, e.api, e.engine, e.core, e.location) for e in ours] == [
        ("affine_select", "nisa.affine_select", "gpsimd", 0, f"test_select.py:{lines[0]}"),
        ("range_select", "nisa.range_select", "vector", 0, f"test_select.py:{lines[1]}"),
        ("select_reduce", "nisa.select_reduce", "vector", 0, f"test_select.py:{lines[2]}")]
    aff, rng_, sel = ours
    tile = ("sbuf", (4, 8), "float32", 128)
    column = ("sbuf", (4, 1), "float32", 16)
    assert _operands(aff.reads) == [("on_true_tile", *tile)]
    assert _operands(aff.writes) == [("dst", *tile)]
    assert aff.options["pattern"] == ((-1, 8),) and aff.options["cmp_op"] == "greater_equal"
    assert _operands(rng_.reads) == [("on_true_tile", *tile), ("bound0", *column), ("bound1", *column)]
    assert _operands(rng_.writes) == [("dst", "sbuf", (4, 8), "bfloat16", 64), ("reduce_res", *column)]
    assert rng_.options["reduce_cmd"] == "reset_reduce"          # passed as the raw value 3
    assert _operands(sel.reads) == [("predicate", "sbuf", (4, 8), "uint8", 32), ("on_true", *tile)]
    assert _operands(sel.writes) == [("dst", *tile), ("reduce_res", *column)]
    assert sel.options["reduce_cmd"] == "idle"


def test_select_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x, m):
        t, pred = load(x), load(m)
        d = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.select_reduce(dst=d, predicate=pred, on_true=t, on_false=0.0, reverse_predicate=True)
    with pytest.raises(TypeError) as info:
        simulate(kernel, np.ones((4, 8), np.float32), np.ones((4, 8), np.uint8))
    assert str(info.value) == (f"nisa.select_reduce() got an unexpected keyword argument "
                               f"'reverse_predicate'; did you mean 'reverse_pred'? "
                               f"(test_select.py:{lines[0]})")
