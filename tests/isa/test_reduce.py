"""Reductions: tensor_reduce (free axes), tensor_partition_reduce (across partitions),
tensor_scalar_reduce (VectorE accumulator), against NumPy references from the doc formulas."""
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
from _tiles import ps, sb

BF16 = ml_dtypes.bfloat16
LOC = r" \(test_reduce\.py:\d+\)$"
RC = nisa.reduce_cmd


def reduce(x, op, axis, dst_shape, dst_dtype=np.float32, **kw):
    def kernel(x):
        d = nl.ndarray(dst_shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(d, op, sb(x), axis, **kw)
        return tile_out(d)
    return simulate(kernel, x, target="trn2")


# ---- tensor_reduce ------------------------------------------------------------------------------

@pytest.mark.parametrize("op, ref", [
    (nl.add, np.sum), (nl.sum, np.sum), (nl.maximum, np.max), (nl.max, np.max),
    (nl.minimum, np.min), (nl.multiply, np.prod),
])
def test_tensor_reduce_arith_last_axis(rng, op, ref):
    x = rng.integers(-3, 4, (8, 6)).astype(np.float32)     # small integers: every fp32 step is exact
    got = reduce(x, op, 1, (8, 1))
    np.testing.assert_array_equal(got[:, 0], ref(x, axis=1))


@pytest.mark.parametrize("axis, keepdims, dst_shape", [
    ((3,), False, (4, 2, 3)), ((3,), True, (4, 2, 3, 1)), ((2, 3), False, (4, 2)),
    ([2, 3], True, (4, 2, 1, 1)), ((1, 2, 3), False, (4, 1)), (-1, False, (4, 2, 3)),
    ((3, 2), False, (4, 2)),
])
def test_tensor_reduce_trailing_axes_of_4d_tile(rng, axis, keepdims, dst_shape):
    x = rng.standard_normal((4, 2, 3, 5)).astype(np.float32)
    got = reduce(x, nl.maximum, axis, dst_shape, keepdims=keepdims)
    ax = tuple(a % 4 for a in np.atleast_1d(axis))
    want = np.max(x, axis=ax, keepdims=keepdims).reshape(dst_shape)
    np.testing.assert_array_equal(got, want)


def test_tensor_reduce_sum_fp32_then_bf16_dst(rng):
    x = rng.standard_normal((8, 64)).astype(BF16)
    got = reduce(x, nl.add, 1, (8, 1), dst_dtype=BF16)
    want = x.astype(np.float64).sum(axis=1)
    # fp32 accumulation of 64 bf16 values is within ~1e-6 relative of the exact sum, so after one
    # rounding to bf16 (2^-8 relative) the result is the bf16 neighbour of the exact sum.
    np.testing.assert_allclose(got[:, 0].astype(np.float64), want, rtol=2 ** -8, atol=1e-6)
    assert got.dtype == BF16


def test_tensor_reduce_negate():
    x = np.array([[1, 2, 3], [-4, 5, 0]], np.float32)
    got = reduce(x, nl.add, 1, (2, 1), negate=True)
    np.testing.assert_array_equal(got[:, 0], [-6, -1])


def test_tensor_reduce_subtract_folds_left_to_right():
    # Decision: x0 - x1 - x2 (NumPy's subtract.reduce), not 0 - x0 - x1 - x2.
    x = np.array([[10, 1, 2]], np.float32)
    np.testing.assert_array_equal(reduce(x, nl.subtract, 1, (1, 1)), [[7]])


def test_tensor_reduce_logical_ops():
    x = np.array([[1, 2, 0], [3, 1, 1], [0, 0, 0]], np.float32)
    np.testing.assert_array_equal(reduce(x, nl.logical_and, 1, (3, 1))[:, 0], [0, 1, 0])
    np.testing.assert_array_equal(reduce(x, nl.logical_or, 1, (3, 1))[:, 0], [1, 1, 0])
    np.testing.assert_array_equal(reduce(x, nl.logical_xor, 1, (3, 1))[:, 0], [0, 1, 0])


@pytest.mark.parametrize("op, ref", [
    (nl.bitwise_or, np.bitwise_or.reduce), (nl.bitwise_and, np.bitwise_and.reduce),
    (nl.bitwise_xor, np.bitwise_xor.reduce),
])
def test_tensor_reduce_bitvec_on_int_bit_patterns(op, ref):
    x = np.array([[0x7F00_0001, -2, 0x0F0F_0F0F], [-1, 0x1234_5678, 0]], np.int32)
    got = reduce(x, op, 1, (2, 1), dst_dtype=np.int32)
    np.testing.assert_array_equal(got[:, 0], ref(x, axis=1))


def test_tensor_reduce_int32_arith_goes_through_fp32():
    x = np.array([[16777216, 1]], np.int32)
    got = reduce(x, nl.add, 1, (1, 1), dst_dtype=np.int32)
    assert got[0, 0] == 16777216          # fp32 math: 2^24 + 1 rounds to 2^24


def test_tensor_reduce_axis_0_illegal():
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_reduce: axis \(0, 1\) includes the partition dim 0, "
                                         r"which cannot be reduced" + LOC):
        reduce(np.ones((2, 3), np.float32), nl.add, [0, 1], (1, 1))


def test_tensor_reduce_axes_must_be_trailing():
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_reduce: axis \(1,\) must be trailing free dims ending at "
                                         r"the last dim 2 of data \(2, 3, 4\)" + LOC):
        reduce(np.ones((2, 3, 4), np.float32), nl.add, 1, (2, 4))
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_reduce: axis \(1, 3\) must be trailing free dims"):
        reduce(np.ones((2, 3, 4, 5), np.float32), nl.add, (1, 3), (2, 4))


def test_tensor_reduce_dst_size_must_match():
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_reduce: dst has 4 elements per partition, reducing axis "
                                         r"\(2,\) of data \(2, 3, 4\) gives 3 \(shape \(2, 3\)\)" + LOC):
        reduce(np.ones((2, 3, 4), np.float32), nl.add, 2, (2, 4))


def test_tensor_reduce_bitvec_needs_ints_and_no_negate():
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_reduce: data dtype float32 is not an integer dtype, "
                                         r"which bitvec op bitwise_or needs" + LOC):
        reduce(np.ones((2, 3), np.float32), nl.bitwise_or, 1, (2, 1), dst_dtype=np.int32)
    with pytest.raises(NkiError, match=r"^nisa\.tensor_reduce: negate=True needs an arithmetic op, got bitvec "
                                       r"op bitwise_or" + LOC):
        reduce(np.ones((2, 3), np.int32), nl.bitwise_or, 1, (2, 1), dst_dtype=np.int32, negate=True)


def test_tensor_reduce_op_must_be_a_reduction():
    with pytest.raises(NkiError, match=r"^nisa\.tensor_reduce: op divide is not a reduction operator; expected "
                                       r"one of add, .*" + LOC):
        reduce(np.ones((2, 3), np.float32), nl.divide, 1, (2, 1))


def test_tensor_reduce_psum_input():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def kernel(x):
        d = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_reduce(dst=d, op=nl.add, data=ps(x), axis=[1], keepdims=True)
        return tile_out(d)
    np.testing.assert_array_equal(simulate(kernel, x), [[3], [12]])


# ---- tensor_partition_reduce --------------------------------------------------------------------

def preduce(x, op, dst_dtype=np.float32, dst_p=1):
    def kernel(x):
        d = nl.ndarray((dst_p,) + x.shape[1:], dtype=dst_dtype, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, op, sb(x))
        return tile_out(d)
    return simulate(kernel, x, target="trn2")


@pytest.mark.parametrize("op, ref", [
    (nl.add, lambda x: x.sum(axis=0, keepdims=True)),
    (nl.average, lambda x: x.sum(axis=0, keepdims=True) / np.float32(x.shape[0])),
    (nl.maximum, lambda x: x.max(axis=0, keepdims=True)), (nl.max, lambda x: x.max(axis=0, keepdims=True)),
])
def test_tensor_partition_reduce_arith(rng, op, ref):
    x = rng.integers(-8, 8, (16, 2, 3)).astype(np.float32)
    np.testing.assert_array_equal(preduce(x, op), ref(x))


@pytest.mark.parametrize("op, ref", [(nl.bitwise_or, np.bitwise_or), (nl.bitwise_and, np.bitwise_and)])
def test_tensor_partition_reduce_bitvec(rng, op, ref):
    x = rng.integers(-2**31, 2**31, (8, 5), dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(preduce(x, op, np.int32), ref.reduce(x, axis=0, keepdims=True))


def test_tensor_partition_reduce_int32_add_is_exact():
    # Decision: GpSimd integer math for int32 add/maximum (fp32 would round 2^24 + 1).
    x = np.array([[2**24], [1], [2]], np.int32)
    np.testing.assert_array_equal(preduce(x, nl.add, np.int32), [[2**24 + 3]])


def test_tensor_partition_reduce_sbuf_only():
    x = np.ones((4, 2), np.float32)

    def kernel(x):
        d = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(d, nl.add, ps(x))
    with pytest.raises(MemorySpaceError, match=r"^nisa\.tensor_partition_reduce: data is in psum; must be in "
                                               r"sbuf" + LOC):
        simulate(kernel, x)


def test_tensor_partition_reduce_dst_shape():
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_partition_reduce: dst partition dim 2 must be 1" + LOC):
        preduce(np.ones((4, 2), np.float32), nl.add, dst_p=2)


def test_tensor_partition_reduce_op_set():
    with pytest.raises(NkiError, match=r"^nisa\.tensor_partition_reduce: op minimum is not supported; expected "
                                       r"one of add, average, maximum, bitwise_or, bitwise_and" + LOC):
        preduce(np.ones((4, 2), np.float32), nl.minimum)


# ---- tensor_scalar_reduce -----------------------------------------------------------------------

@pytest.mark.parametrize("reduce_op, ref", [
    (nl.add, np.sum), (nl.sum, np.sum), (nl.multiply, np.prod), (nl.max, np.max), (nl.min, np.min),
])
def test_tensor_scalar_reduce_ops(rng, reduce_op, ref):
    x = rng.integers(-3, 4, (4, 2, 3)).astype(np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(d, sb(x), nl.subtract, 1.0, reduce_op, r)
        return tile_out(d, r)
    d, r = simulate(kernel, x)
    y = x - np.float32(1)
    np.testing.assert_array_equal(d, y)
    np.testing.assert_array_equal(r[:, 0], ref(y.reshape(4, 6), axis=1))


def test_tensor_scalar_reduce_chains_load_reduce_and_negate(rng):
    x = rng.integers(-4, 5, (3, 4)).astype(np.float32)
    init = np.array([[100], [200], [300]], np.float32)
    c = np.array([[1], [2], [3]], np.float32)

    def kernel(x, init, c):
        d = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        r1 = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.sbuf)
        r2 = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_scalar_reduce(d, sb(x), nl.multiply, sb(c), nl.add, reduce_cmd=RC.load_reduce,
                                  reduce_init=sb(init))
        nisa.tensor_scalar_reduce(d, sb(x), nl.multiply, sb(c), nl.add, r1, reduce_cmd=RC.reduce)
        nisa.tensor_scalar_reduce(dst=d, data=sb(x), op0=nl.add, operand0=0.0, reduce_op=nl.add,
                                  reduce_res=r2, reduce_cmd=RC.load_reduce, reduce_init=1.0,
                                  reduce_res_negate=True)
        return tile_out(r1, r2)
    r1, r2 = simulate(kernel, x, init, c)
    s = (x * c).sum(axis=1)
    np.testing.assert_array_equal(r1[:, 0], init[:, 0] + 2 * s)
    np.testing.assert_array_equal(r2[:, 0], -(1 + x.sum(axis=1)))


def test_tensor_scalar_reduce_max_resets_to_minus_inf():
    # Decision: reset_reduce resets to the identity of reduce_op (docs say 0).
    x = np.array([[-5, -3, -9]], np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(d, sb(x), nl.abs, None, nl.maximum, r)
        r2 = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(d, sb(x), nl.add, 0.0, nl.maximum, r2)
        return tile_out(r, r2)
    r, r2 = simulate(kernel, x)
    assert r[0, 0] == 9 and r2[0, 0] == -3


def test_tensor_scalar_reduce_shares_the_vector_accumulator_with_exponential():
    x = np.zeros((2, 3), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(d, sb(x), reduce_cmd=RC.reset_reduce)               # acc = 3 (exp(0) * 3)
        nisa.tensor_scalar_reduce(d, sb(x), nl.add, 2.0, nl.add, r, reduce_cmd=RC.reduce)
        return tile_out(r)
    np.testing.assert_array_equal(simulate(kernel, x, target="trn3"), [[9], [9]])


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(reverse0=True), UnsupportedError, r"reverse0=True is not supported yet \(per the NKI docs\)"),
    (dict(reduce_cmd=RC.idle), UnsupportedError,
     r"reduce_cmd idle is not supported; expected one of reset_reduce, reduce, load_reduce"),
    (dict(reduce_cmd=RC.load_reduce), NkiError, r"reduce_init is required when reduce_cmd is load_reduce"),
    (dict(reduce_init=1.0), NkiError,
     r"reduce_init must be None unless reduce_cmd is load_reduce, got reduce_cmd reset_reduce"),
    (dict(reduce_op=nl.subtract), NkiError,
     r"reduce_op subtract is not supported; expected one of add, multiply, maximum, minimum"),
    (dict(op0=nl.bitwise_and), DtypeError,
     r"op0 bitwise_and is a bitvec operator; only arithmetic operators are supported"),
])
def test_tensor_scalar_reduce_rules(kw, exc, msg):
    x = np.ones((2, 3), np.float32)
    args = dict(op0=nl.add, operand0=1.0, reduce_op=nl.add) | kw

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=sb(x), reduce_res=r, **args)
    with pytest.raises(exc, match=r"^nisa\.tensor_scalar_reduce: " + msg + LOC):
        simulate(kernel, x)


@pytest.mark.parametrize("which", ["operand0", "reduce_init"])
def test_tensor_scalar_reduce_tensor_operands_must_be_fp32(rng, which):
    """Docs: reduce_init "Supported dtypes: float32"; Decision: operand0 as tensor_scalar's (fp32)."""
    x = rng.integers(-3, 4, (3, 4)).astype(np.float32)
    c = np.array([[1], [2], [3]], np.float32)

    def kernel(x, c, dtype):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.sbuf)
        if which == "operand0":
            nisa.tensor_scalar_reduce(d, sb(x), nl.multiply, sb(c, dtype), nl.add, r)
        else:
            nisa.tensor_scalar_reduce(d, sb(x), nl.multiply, 2.0, nl.add, r, reduce_cmd=RC.load_reduce,
                                      reduce_init=sb(c, dtype))
        return tile_out(r)
    y = x * c if which == "operand0" else x * np.float32(2)
    want = y.sum(axis=1, keepdims=True) + (c if which == "reduce_init" else 0)
    np.testing.assert_array_equal(simulate(kernel, x, c, nl.float32), want)
    what = "operand0 dtype bfloat16 must be float32 for arithmetic op0 multiply" if which == "operand0" \
        else "reduce_init dtype bfloat16 must be float32"
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_scalar_reduce: " + what + LOC):
        simulate(kernel, x, c, nl.bfloat16)


def test_unknown_ops_name_their_parameter():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(NkiError, match=r"^nisa\.tensor_reduce: op frobnicate is not an ALU operator; "
                                       r"expected one of abs, .*, subtract" + LOC):
        reduce(x, "frobnicate", 1, (2, 1))

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(d, sb(x), nl.add, 1.0, "frobnicate")
    with pytest.raises(NkiError, match=r"^nisa\.tensor_scalar_reduce: reduce_op frobnicate is not an ALU "
                                       r"operator; expected one of abs, .*, subtract" + LOC):
        simulate(kernel, x)


def test_tensor_scalar_reduce_reduce_res_shape():
    x = np.ones((2, 3), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(d, sb(x), nl.add, 1.0, nl.add, d)
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_scalar_reduce: reduce_res must be a scalar or a "
                                         r"\(2, 1\) tensor, got shape \(2, 3\)" + LOC):
        simulate(kernel, x)


@settings(max_examples=20, deadline=None)
@given(p=st.integers(1, 128), f=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_tensor_reduce_max_matches_numpy_for_any_tile(p, f, seed):
    x = np.random.default_rng(seed).standard_normal((p, f)).astype(BF16)
    got = reduce(x, nl.maximum, 1, (p, 1), dst_dtype=BF16)
    np.testing.assert_array_equal(got[:, 0].view(np.uint16), x.max(axis=1).view(np.uint16))


# ---- the instruction events and the documented signature ----------------------------------------

def _next_line():
    """The line after the caller's: where the instruction under test is called."""
    return sys._getframe(1).f_lineno + 1


def _operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def test_reduce_family_events_match_the_kernel_calls():
    lines = []

    def kernel(x):
        t = sb(x)
        d = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_reduce(dst=d, op=nl.add, data=t, axis=1)
        col = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_partition_reduce(dst=col, op=nl.maximum, data=t)
        y = nl.ndarray((4, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        acc = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_scalar_reduce(dst=y, data=t, op0=nl.multiply, operand0=d, reduce_op=nl.add,
                                  reduce_res=acc)
        return tile_out(acc)
    with nkisim.trace.record() as events:
        simulate(kernel, np.ones((4, 8), np.float32))
    ours = [e for e in events if e.op in ("tensor_reduce", "tensor_partition_reduce", "tensor_scalar_reduce")]
    assert [(e.op, e.api, e.engine, e.core, e.location) for e in ours] == [
        ("tensor_reduce", "nisa.tensor_reduce", "vector", 0, f"test_reduce.py:{lines[0]}"),
        ("tensor_partition_reduce", "nisa.tensor_partition_reduce", "gpsimd", 0, f"test_reduce.py:{lines[1]}"),
        ("tensor_scalar_reduce", "nisa.tensor_scalar_reduce", "vector", 0, f"test_reduce.py:{lines[2]}"),
    ]
    assert ours[0].seq < ours[1].seq < ours[2].seq
    tr, tpr, tsr = ours
    assert _operands(tr.reads) == [("data", "sbuf", (4, 8), "float32", 128)]
    assert _operands(tr.writes) == [("dst", "sbuf", (4, 1), "float32", 16)]
    assert tr.options == {"op": "add", "axis": 1, "negate": False, "keepdims": False}
    assert _operands(tpr.reads) == [("data", "sbuf", (4, 8), "float32", 128)]
    assert _operands(tpr.writes) == [("dst", "sbuf", (1, 8), "float32", 32)]
    assert _operands(tsr.reads) == [("data", "sbuf", (4, 8), "float32", 128),
                                    ("operand0", "sbuf", (4, 1), "float32", 16)]
    assert _operands(tsr.writes) == [("dst", "sbuf", (4, 8), "bfloat16", 64),
                                     ("reduce_res", "sbuf", (4, 1), "float32", 16)]
    assert tsr.options["reduce_cmd"] == "reset_reduce" and tsr.options["reduce_op"] == "add"


def test_reduce_family_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x):
        d = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_reduce(dst=d, op=nl.add, data=sb(x), axis=1, negat=True)
    with pytest.raises(TypeError) as info:
        simulate(kernel, np.ones((4, 8), np.float32))
    assert str(info.value) == (f"nisa.tensor_reduce() got an unexpected keyword argument 'negat'; did you "
                               f"mean 'negate'? (test_reduce.py:{lines[0]})")

    def kernel2(x):
        d = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_scalar_reduce(d, sb(x), nl.add, 1.0, nl.add, reduce_comd=RC.reduce)
    with pytest.raises(TypeError) as info:
        simulate(kernel2, np.ones((4, 8), np.float32))
    assert str(info.value) == (f"nisa.tensor_scalar_reduce() got an unexpected keyword argument "
                               f"'reduce_comd'; did you mean 'reduce_cmd'? (test_reduce.py:{lines[1]})")
