"""Element-wise ops (tensor_tensor, tensor_scalar, scalar_tensor_tensor, reciprocal, exponential)
against their doc formulas computed in NumPy float32, rounded once with ml_dtypes."""
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, EngineError, MemorySpaceError, NkiError, ShapeError, UnsupportedError
from conftest import simulate, tile_out
from _tiles import ps, sb
from _events import line, record, roles

BF16 = ml_dtypes.bfloat16
LOC = r" \(test_elementwise\.py:\d+\)$"


def run(op, *arrays, dst_dtype=np.float32, dst_shape=None, target="trn2", **kw):
    """Load ``arrays`` into SBUF, call ``op(dst, *tiles, **kw)``, return dst."""
    def kernel(*xs):
        dst = nl.ndarray(dst_shape or xs[0].shape, dtype=dst_dtype, buffer=nl.sbuf)
        op(dst, *[sb(x) for x in xs], **kw)
        return tile_out(dst)
    return simulate(kernel, *arrays, target=target)


def randn(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


# ---- tensor_tensor ------------------------------------------------------------------------------

@pytest.mark.parametrize("op, ref", [
    (nl.add, np.add), (nl.subtract, np.subtract), (nl.multiply, np.multiply),
    (nl.divide, np.divide), (nl.maximum, np.maximum), (nl.minimum, np.minimum),
])
def test_tensor_tensor_fp32_matches_numpy(rng, op, ref):
    a, b = randn(rng, (4, 6)), randn(rng, (4, 6))
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, op), a, b)
    np.testing.assert_array_equal(got, ref(a, b))


def test_tensor_tensor_comparison_gives_one_zero():
    a = np.array([[1, 2, 3]], np.float32)
    b = np.array([[2, 2, 2]], np.float32)
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.greater_equal), a, b)
    np.testing.assert_array_equal(got, [[0, 1, 1]])


def test_tensor_tensor_bf16_inputs_and_dst_round_once(rng):
    a, b = randn(rng, (8, 16), BF16), randn(rng, (8, 16), BF16)
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.multiply), a, b, dst_dtype=BF16)
    want = (a.astype(np.float32) * b.astype(np.float32)).astype(BF16)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_tensor_tensor_free_shapes_may_differ(rng):
    a, b = randn(rng, (4, 2, 3)), randn(rng, (4, 6))
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add), a, b, dst_shape=(4, 3, 2))
    np.testing.assert_array_equal(got, (a.reshape(4, 6) + b).reshape(4, 3, 2))


def test_tensor_tensor_int32_is_exact_on_gpsimd():
    a = np.array([[16777217, 2**30, -7]], np.int32)
    b = np.array([[1, 3, 2]], np.int32)
    add = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add), a, b, dst_dtype=np.int32)
    mul = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.multiply), a, b, dst_dtype=np.int32)
    np.testing.assert_array_equal(add, [[16777218, 2**30 + 3, -5]])
    # 2**30 * 3 overflows int32: Decision, native 32-bit arithmetic wraps modulo 2**32.
    np.testing.assert_array_equal(mul, [[16777217, np.int64(3 * 2**30 - 2**32), -14]])
    big = np.array([[2**30, -2**31]], np.int32)
    wrap = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add), big, big, dst_dtype=np.int32)
    np.testing.assert_array_equal(wrap, [[-2**31, 0]])


def test_tensor_tensor_int32_on_vector_engine_goes_through_fp32():
    a = np.array([[16777217]], np.int32)
    b = np.array([[1]], np.int32)
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add, engine=nisa.engine.vector),
              a, b, dst_dtype=np.int32)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(np.int32)   # 16777216 + 1 in fp32
    np.testing.assert_array_equal(got, want)
    assert got[0, 0] == 16777216


@pytest.mark.parametrize("op, ref", [
    (nl.bitwise_and, lambda a, b: a & b), (nl.bitwise_or, lambda a, b: a | b),
    (nl.bitwise_xor, lambda a, b: a ^ b), (nl.left_shift, lambda a, b: a << b),
    (nl.right_shift, lambda a, b: (a.view(np.uint32) >> b.view(np.uint32)).view(np.int32)),
])
def test_tensor_tensor_bitvec_on_int32_bit_patterns(op, ref):
    a = np.array([[-8, 0x7FFF_0F0F, 5, -1]], np.int32)
    b = np.array([[1, 4, 3, 31]], np.int32)
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, op), a, b, dst_dtype=np.int32)
    np.testing.assert_array_equal(got, ref(a, b))


def test_tensor_tensor_right_shift_is_logical():
    a = np.array([[-8]], np.int32)
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.right_shift), a,
              np.array([[1]], np.int32), dst_dtype=np.int32)
    assert got[0, 0] == 0x7FFFFFFC


def test_tensor_tensor_bitvec_rejects_floats():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_tensor: data1 dtype float32 is not an integer "
                                         r"dtype, which bitvec op bitwise_and needs" + LOC):
        run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.bitwise_and), a, a)


def test_tensor_tensor_element_count_mismatch():
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_tensor: data2 has 5 elements per partition, "
                                         r"data1 has 6 \(shapes \(4, 5\) vs \(4, 6\)\)" + LOC):
        run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add),
            np.ones((4, 6), np.float32), np.ones((4, 5), np.float32))


def test_tensor_tensor_partition_mismatch():
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_tensor: data2 partition dim 3 does not match "
                                         r"data1 partition dim 4" + LOC):
        run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add),
            np.ones((4, 6), np.float32), np.ones((3, 8), np.float32))


def test_tensor_tensor_inputs_not_both_psum():
    a = np.ones((2, 3), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(d, ps(x), ps(x), nl.add)
        return d
    with pytest.raises(MemorySpaceError, match=r"^nisa\.tensor_tensor: data1 and data2 are both in psum; "
                                               r"at most one may be" + LOC):
        simulate(kernel, a)


def test_tensor_tensor_one_psum_input_is_fine():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_tensor(d, ps(x), sb(x), nl.add)
        return tile_out(d)
    np.testing.assert_array_equal(simulate(kernel, a), 2 * a)


def test_tensor_tensor_hbm_operand_rejected():
    a = np.ones((2, 3), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(d, x, sb(x), nl.add)
        return d
    with pytest.raises(MemorySpaceError, match=r"^nisa\.tensor_tensor: data1 is in shared_hbm \(HBM\); "
                                               r"must be in psum or sbuf" + LOC):
        simulate(kernel, a)


def test_tensor_tensor_power_runs_on_gpsimd_only():
    a = np.array([[2, 3]], np.float32)
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.power), a, a)
    np.testing.assert_array_equal(got, np.power(a, a))
    with pytest.raises(EngineError, match=r"^nisa\.tensor_tensor: engine vector is not supported for op power "
                                          r"on trn2; expected gpsimd or unknown" + LOC):
        run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.power, engine=nisa.engine.vector), a, a)


def test_tensor_tensor_unknown_op():
    a = np.ones((1, 1), np.float32)
    with pytest.raises(NkiError, match=r"^nisa\.tensor_tensor: op exp is not an ALU operator; expected one of "
                                       r"abs, abs_max, .*, subtract" + LOC):
        run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.exp), a, a)


# ---- tensor_scalar ------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 128), f=st.integers(1, 64), c=st.floats(-8, 8, width=32),
       seed=st.integers(0, 2**16))
def test_tensor_scalar_mul_add_bf16_rounds_once(p, f, c, seed):
    x = randn(np.random.default_rng(seed), (p, f), BF16)
    got = run(lambda d, t: nisa.tensor_scalar(d, t, op0=nl.multiply, operand0=c, op1=nl.add, operand1=1.0),
              x, dst_dtype=BF16)
    want = (x.astype(np.float32) * np.float32(c) + np.float32(1)).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("reverse0, reverse1", [(False, False), (True, False), (False, True), (True, True)])
def test_tensor_scalar_reverse_flags(rng, reverse0, reverse1):
    x = randn(rng, (4, 5))
    c0, c1 = np.float32(3.0), np.float32(0.5)
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.subtract, c0, reverse0, nl.divide, c1, reverse1), x)
    t = (c0 - x) if reverse0 else (x - c0)
    want = (c1 / t) if reverse1 else (t / c1)
    np.testing.assert_array_equal(got, want)


def test_tensor_scalar_column_operands_broadcast_along_free_dims(rng):
    x = randn(rng, (4, 2, 3))
    s = randn(rng, (4, 1))
    b = randn(rng, (4, 1))

    def kernel(x, s, b):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, sb(x), nl.multiply, sb(s), op1=nl.add, operand1=ps(b))
        return tile_out(d)
    want = x * s.reshape(4, 1, 1) + b.reshape(4, 1, 1)
    np.testing.assert_array_equal(simulate(kernel, x, s, b), want)


def test_tensor_scalar_unary_op0_ignores_operand():
    x = np.array([[-4.0, 0.25, 9.0]], np.float32)
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.abs, None, op1=nl.multiply, operand1=2.0), x)
    np.testing.assert_array_equal(got, np.abs(x) * np.float32(2))
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.reciprocal, 0), x)
    np.testing.assert_array_equal(got, np.float32(1) / x)


def test_tensor_scalar_bitvec_pair_on_ints():
    x = np.array([[0x0F0F, -1, 6]], np.int32)
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.bitwise_and, 0xFF, op1=nl.left_shift, operand1=4),
              x, dst_dtype=np.int32)
    np.testing.assert_array_equal(got, (x & 0xFF) << 4)


def test_tensor_scalar_mixed_bitvec_and_arith_rejected():
    x = np.ones((1, 2), np.int32)
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_scalar: op0 bitwise_and and op1 add must both be "
                                         r"bitvec or both arithmetic" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, nl.bitwise_and, 1, op1=nl.add, operand1=1), x,
            dst_dtype=np.int32)


def test_tensor_scalar_operand_must_be_column():
    x = np.ones((4, 3), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, sb(x), nl.add, sb(x)[:, 0:2])
        return d
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_scalar: operand0 must be a scalar or a \(4, 1\) "
                                         r"tensor, got shape \(4, 2\)" + LOC):
        simulate(kernel, x)


def test_tensor_scalar_gpsimd_cannot_touch_psum():
    x = np.ones((2, 2), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, ps(x), nl.rsqrt, None, engine=nisa.engine.gpsimd)
        return d
    with pytest.raises(MemorySpaceError, match=r"^nisa\.tensor_scalar: data is in psum, which the gpsimd "
                                               r"engine cannot access" + LOC):
        simulate(kernel, x)


# ---- scalar_tensor_tensor -----------------------------------------------------------------------

@pytest.mark.parametrize("reverse0, reverse1", [(False, False), (True, False), (False, True), (True, True)])
def test_scalar_tensor_tensor_formula(rng, reverse0, reverse1):
    x, y = randn(rng, (4, 6)), randn(rng, (4, 6))
    c = np.float32(1.5)
    got = run(lambda d, a, b: nisa.scalar_tensor_tensor(d, a, nl.subtract, c, nl.divide, b, reverse0, reverse1),
              x, y)
    t = (c - x) if reverse0 else (x - c)
    want = (y / t) if reverse1 else (t / y)
    np.testing.assert_array_equal(got, want)


def test_scalar_tensor_tensor_column_operand0_and_bf16_dst(rng):
    x, y, s = randn(rng, (8, 2, 4)), randn(rng, (8, 8)), randn(rng, (8, 1))

    def kernel(x, y, s):
        d = nl.ndarray((8, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=d, data=sb(x), op0=nl.multiply, operand0=sb(s), op1=nl.add,
                                  operand1=ps(y))
        return tile_out(d)
    want = (x.reshape(8, 8) * s + y).astype(BF16)
    np.testing.assert_array_equal(simulate(kernel, x, y, s).view(np.uint16), want.view(np.uint16))


def test_scalar_tensor_tensor_rejects_bitvec():
    x = np.ones((2, 2), np.int32)
    with pytest.raises(DtypeError, match=r"^nisa\.scalar_tensor_tensor: op1 bitwise_or is a bitvec operator; "
                                         r"only arithmetic operators are supported" + LOC):
        run(lambda d, a, b: nisa.scalar_tensor_tensor(d, a, nl.add, 1, nl.bitwise_or, b), x, x,
            dst_dtype=np.int32)


def test_scalar_tensor_tensor_op1_must_be_binary():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ShapeError, match=r"^nisa\.scalar_tensor_tensor: op1 abs is a unary operator; a binary "
                                       r"operator is required" + LOC):
        run(lambda d, a, b: nisa.scalar_tensor_tensor(d, a, nl.add, 1.0, nl.abs, b), x, x)


def test_scalar_tensor_tensor_data_and_operand1_not_both_psum():
    x = np.ones((2, 2), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(d, ps(x), nl.add, 1.0, nl.add, ps(x))
        return d
    with pytest.raises(MemorySpaceError, match=r"^nisa\.scalar_tensor_tensor: data and operand1 are both in "
                                               r"psum; at most one may be" + LOC):
        simulate(kernel, x)


def test_scalar_tensor_tensor_operand1_size():
    with pytest.raises(ShapeError, match=r"^nisa\.scalar_tensor_tensor: operand1 has 3 elements per partition, "
                                         r"data has 4 \(shapes \(2, 3\) vs \(2, 4\)\)" + LOC):
        run(lambda d, a, b: nisa.scalar_tensor_tensor(d, a, nl.add, 1.0, nl.add, b),
            np.ones((2, 4), np.float32), np.ones((2, 3), np.float32))


# ---- reciprocal ---------------------------------------------------------------------------------

def test_reciprocal_fp32_and_zero():
    x = np.array([[3.0, -0.5, 0.0, 7.0]], np.float32)
    got = run(nisa.reciprocal, x)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(got, np.float32(1) / x)
    assert np.isposinf(got[0, 2])


def test_reciprocal_bf16_dst_rounds_once(rng):
    x = randn(rng, (16, 8), BF16)
    got = run(nisa.reciprocal, x, dst_dtype=BF16)
    want = (np.float32(1) / x.astype(np.float32)).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_reciprocal_size_mismatch():
    with pytest.raises(ShapeError, match=r"^nisa\.reciprocal: dst has 2 elements per partition, data has 3 "
                                         r"\(shapes \(1, 2\) vs \(1, 3\)\)" + LOC):
        run(nisa.reciprocal, np.ones((1, 3), np.float32), dst_shape=(1, 2))


# ---- exponential (trn3) -------------------------------------------------------------------------

def test_exponential_needs_trn3():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(UnsupportedError, match=r"^nisa\.exponential: needs trn3 or newer, not supported on "
                                               r"trn2" + LOC):
        run(nisa.exponential, x, target="trn2")


def test_exponential_scalar_and_column_max_value(rng):
    x, m = randn(rng, (4, 6)), randn(rng, (4, 1))
    got = run(lambda d, t: nisa.exponential(d, t, max_value=1.25), x, target="trn3")
    np.testing.assert_array_equal(got, np.exp(x - np.float32(1.25)))

    def kernel(x, m):
        d = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.exponential(dst=d, src=sb(x), max_value=sb(m))
        return tile_out(d)
    want = np.exp(x - m).astype(BF16)
    np.testing.assert_array_equal(simulate(kernel, x, m, target="trn3").view(np.uint16), want.view(np.uint16))


def test_exponential_accumulates_across_calls(rng):
    x, y = randn(rng, (4, 6)), randn(rng, (4, 3))

    def kernel(x, y):
        d1 = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        d2 = nl.ndarray(y.shape, dtype=nl.float32, buffer=nl.sbuf)
        r1 = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        r2 = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.psum)
        nisa.exponential(d1, sb(x), reduce_res=r1, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.exponential(d2, sb(y), reduce_res=r2, reduce_cmd=nisa.reduce_cmd.reduce)
        return tile_out(r1, r2)
    r1, r2 = simulate(kernel, x, y, target="trn3")
    s1 = np.exp(x).sum(axis=1, dtype=np.float32)      # fp32 values before the bf16 rounding of dst
    np.testing.assert_allclose(r1[:, 0], s1, rtol=1e-6)
    np.testing.assert_allclose(r2[:, 0], s1 + np.exp(y).sum(axis=1, dtype=np.float32), rtol=1e-6)


def test_exponential_load_reduce_and_idle(rng):
    x = randn(rng, (3, 4))
    init = np.array([[1.0], [2.0], [3.0]], np.float32)

    def kernel(x, init):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r1 = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.sbuf)
        r2 = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.sbuf)
        r3 = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(d, sb(x), reduce_res=r1, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=sb(init))
        nisa.exponential(d, sb(x), reduce_res=r2)                       # idle: accumulator untouched
        nisa.exponential(d, sb(x), reduce_res=r3, reduce_cmd=4, reduce_init=-1.0)    # raw int enum
        return tile_out(r1, r2, r3)
    r1, r2, r3 = simulate(kernel, x, init, target="trn3")
    s = np.exp(x).sum(axis=1, dtype=np.float32)
    np.testing.assert_allclose(r1[:, 0], init[:, 0] + s, rtol=1e-6)
    np.testing.assert_array_equal(r2, r1)
    np.testing.assert_allclose(r3[:, 0], s - 1, rtol=1e-6)


def test_exponential_reduce_init_only_with_load_reduce():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(ShapeError, match=r"^nisa\.exponential: reduce_init 2\.0 must be unset or 0\.0 unless "
                                       r"reduce_cmd is load_reduce, got reduce_cmd reset_reduce" + LOC):
        run(lambda d, t: nisa.exponential(d, t, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_init=2.0),
            x, target="trn3")


def test_exponential_reset_cmd_unsupported():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(UnsupportedError, match=r"^nisa\.exponential: reduce_cmd reset is not supported; "
                                               r"expected one of idle, reset_reduce, reduce, load_reduce" + LOC):
        run(lambda d, t: nisa.exponential(d, t, reduce_cmd=nisa.reduce_cmd.reset), x, target="trn3")


def test_exponential_dtype_limits():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(DtypeError, match=r"^nisa\.exponential: dst dtype uint32 is not supported on trn3; "
                                         r"expected one of .*" + LOC):
        run(nisa.exponential, x, dst_dtype=np.uint32, target="trn3")

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.exponential(d, sb(x), reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return r
    with pytest.raises(DtypeError, match=r"^nisa\.exponential: reduce_res dtype int32 is not supported"):
        simulate(kernel, x, target="trn3")


def test_exponential_at_most_4d():
    x = np.zeros((2, 1, 1, 1, 2), np.float32)
    got = run(nisa.exponential, x[:, 0], target="trn3")
    np.testing.assert_array_equal(got, np.ones((2, 1, 1, 2), np.float32))
    with pytest.raises(ShapeError, match=r"^nisa\.exponential: src has 5 dims \(2, 1, 1, 1, 2\), exceeds 4" + LOC):
        run(nisa.exponential, x, target="trn3", dst_shape=(2, 2))


# ---- engine rules (tensor_tensor, tensor_scalar) -----------------------------------------------

E = nisa.engine


def col(x, dtype=None):
    """A (P, 1) operand tile loaded from ``x`` (cast to ``dtype`` by the DMA)."""
    return sb(x, dtype)


@pytest.mark.parametrize("engine", [E.vector, E.gpsimd, E.unknown])
def test_tensor_tensor_legal_engines(rng, engine):
    a, b = randn(rng, (4, 6)), randn(rng, (4, 6))
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.subtract, engine=engine), a, b)
    np.testing.assert_array_equal(got, a - b)


@pytest.mark.parametrize("engine", [E.scalar, E.tensor, E.sync])
def test_tensor_tensor_other_engines_rejected(engine):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(EngineError, match=rf"^nisa\.tensor_tensor: engine {engine.name} is not supported on "
                                          r"trn2; expected vector, gpsimd or unknown" + LOC):
        run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add, engine=engine), a, a)


def test_tensor_tensor_bitvec_runs_on_vector_only():
    a = np.array([[0b1100, -1]], np.int32)
    b = np.array([[0b1010, 7]], np.int32)
    got = run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.bitwise_xor, engine=E.vector), a, b,
              dst_dtype=np.int32)
    np.testing.assert_array_equal(got, a ^ b)
    with pytest.raises(EngineError, match=r"^nisa\.tensor_tensor: engine gpsimd is not supported for bitvec "
                                          r"op bitwise_xor on trn2; expected vector or unknown" + LOC):
        run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.bitwise_xor, engine=E.gpsimd), a, b,
            dst_dtype=np.int32)


def test_tensor_tensor_int32_with_a_psum_operand_falls_back_to_vector():
    """Docs: "the automatic GpSimd dispatch for int32/uint32 falls back to Vector Engine when any
    operand resides in PSUM" -- so the add goes through fp32 (16777217 is not an fp32 value)."""
    a = np.array([[16777217, 5]], np.int32)
    b = np.array([[1, 2]], np.int32)

    def kernel(a, b):
        d = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(d, ps(a), sb(b), nl.add)
        return tile_out(d)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(np.int32)
    got = simulate(kernel, a, b)
    np.testing.assert_array_equal(got, want)
    assert got[0, 0] == 16777216                 # the exact GpSimd sum would be 16777218


@pytest.mark.parametrize("engine", [E.scalar, E.gpsimd])
def test_tensor_scalar_bitvec_runs_on_vector_only(engine):
    x = np.array([[0x0F0F, -1]], np.int32)
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.bitwise_and, 0xFF, engine=E.vector), x,
              dst_dtype=np.int32)
    np.testing.assert_array_equal(got, x & 0xFF)
    with pytest.raises(EngineError, match=rf"^nisa\.tensor_scalar: engine {engine.name} is not supported for "
                                          r"bitvec op0 bitwise_and on trn2; expected vector or unknown" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, nl.bitwise_and, 0xFF, engine=engine), x, dst_dtype=np.int32)


def test_tensor_scalar_gpsimd_only_for_rsqrt():
    x = np.array([[4.0, 0.25, 9.0]], np.float32)
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.rsqrt, None, engine=E.gpsimd), x)
    np.testing.assert_array_equal(got, np.float32(1) / np.sqrt(x))
    with pytest.raises(EngineError, match=r"^nisa\.tensor_scalar: engine gpsimd is not supported for op0 add, "
                                          r"op1 None on trn2; expected vector, scalar or unknown" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, nl.add, 1.0, engine=E.gpsimd), x)
    with pytest.raises(EngineError, match=r"^nisa\.tensor_scalar: engine gpsimd is not supported for op0 "
                                          r"rsqrt, op1 multiply on trn2; expected vector or unknown" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, nl.rsqrt, None, op1=nl.multiply, operand1=2.0,
                                            engine=E.gpsimd), x)


_SCALAR_PAIRS_TRN2 = [(nl.multiply, nl.add), (nl.multiply, None), (nl.add, None), (nl.multiply, nl.bypass)]


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("op0, op1", _SCALAR_PAIRS_TRN2)
def test_tensor_scalar_scalar_engine_pairs(rng, target, op0, op1):
    """Docs (trn2): multiply+add, multiply, add. Decision: trn1 has the same list; op1=bypass = None."""
    x = randn(rng, (4, 5))
    operand1 = 0.5 if op1 is nl.add else None     # docs: None when op1 is unused (or unary)
    got = run(lambda d, t: nisa.tensor_scalar(d, t, op0, 3.0, op1=op1, operand1=operand1, engine=E.scalar),
              x, target=target)
    y = x * np.float32(3) if op0 is nl.multiply else x + np.float32(3)
    want = y + np.float32(0.5) if op1 is nl.add else y
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("op0, op1", [(nl.subtract, None), (nl.add, nl.multiply), (nl.maximum, None),
                                      (nl.multiply, nl.subtract)])
def test_tensor_scalar_scalar_engine_other_pairs_rejected(target, op0, op1):
    x = np.ones((2, 3), np.float32)
    n0, n1 = alu_name(op0), alu_name(op1)
    with pytest.raises(EngineError, match=rf"^nisa\.tensor_scalar: engine scalar is not supported for op0 {n0}, "
                                          rf"op1 {n1} on {target}; expected vector or unknown" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, op0, 2.0, op1=op1, operand1=None if op1 is None else 1.0,
                                            engine=E.scalar), x, target=target)


def alu_name(op):
    return {nl.subtract: "subtract", nl.add: "add", nl.multiply: "multiply", nl.maximum: "maximum",
            None: "None"}[op]


def test_tensor_scalar_scalar_engine_trn3_adds_the_activate2_pairs(rng):
    """Decision: trn3 takes the six tensor-scalar pairs of activate2 (ScalarE, NeuronCore-v4)."""
    x = randn(rng, (4, 5))
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.multiply, 2.0, op1=nl.subtract, operand1=1.0,
                                              engine=E.scalar), x, target="trn3")
    np.testing.assert_array_equal(got, x * np.float32(2) - np.float32(1))
    got = run(lambda d, t: nisa.tensor_scalar(d, t, nl.subtract, 0.5, engine=E.scalar), x, target="trn3")
    np.testing.assert_array_equal(got, x - np.float32(0.5))
    with pytest.raises(EngineError, match=r"^nisa\.tensor_scalar: engine scalar is not supported for op0 "
                                          r"maximum, op1 None on trn3; expected vector or unknown" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, nl.maximum, 0.0, engine=E.scalar), x, target="trn3")


def test_tensor_scalar_other_engines_rejected():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(EngineError, match=r"^nisa\.tensor_scalar: engine tensor is not supported for op0 "
                                          r"multiply, op1 add on trn2; expected vector, scalar or unknown" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, nl.multiply, 2.0, op1=nl.add, operand1=1.0, engine=E.tensor),
            x)


def test_tensor_scalar_unknown_op_names_the_parameter():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(NkiError, match=r"^nisa\.tensor_scalar: op1 frobnicate is not an ALU operator; expected "
                                       r"one of abs, .*, subtract" + LOC):
        run(lambda d, t: nisa.tensor_scalar(d, t, nl.add, 1.0, op1="frobnicate", operand1=1.0), x)


# ---- operand dtypes (tensor_scalar, scalar_tensor_tensor, exponential) --------------------------

@pytest.mark.parametrize("which", ["operand0", "operand1"])
def test_tensor_scalar_tensor_operands_must_be_fp32(rng, which):
    x, c = randn(rng, (4, 5)), randn(rng, (4, 1))

    def kernel(x, c, dtype):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        o0, o1 = (col(c, dtype), 1.0) if which == "operand0" else (2.0, col(c, dtype))
        nisa.tensor_scalar(d, sb(x, nl.bfloat16), nl.multiply, o0, op1=nl.add, operand1=o1)
        return tile_out(d)
    xb = x.astype(BF16).astype(np.float32)
    want = xb * c + np.float32(1) if which == "operand0" else xb * np.float32(2) + c
    np.testing.assert_array_equal(simulate(kernel, x, c, nl.float32), want)   # bf16 data, fp32 operand
    op = "op0 multiply" if which == "operand0" else "op1 add"
    with pytest.raises(DtypeError, match=rf"^nisa\.tensor_scalar: {which} dtype bfloat16 must be float32 for "
                                         rf"arithmetic {op}" + LOC):
        simulate(kernel, x, c, nl.bfloat16)


def test_tensor_scalar_bitvec_operand_tile_may_be_an_integer():
    x = np.array([[0x0F0F, 0x00F0]], np.int32)
    m = np.array([[0xFF]], np.int32)

    def kernel(x, m):
        d = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, sb(x), nl.bitwise_and, sb(m))
        return tile_out(d)
    np.testing.assert_array_equal(simulate(kernel, x, m), x & 0xFF)


def test_scalar_tensor_tensor_operand0_may_be_any_dtype(rng):
    """Docs: "All input tiles can be any supported NKI data type" (no fp32 rule, unlike tensor_scalar)."""
    x, y, s = randn(rng, (4, 6)), randn(rng, (4, 6)), randn(rng, (4, 1))

    def kernel(x, y, s):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(d, sb(x), nl.multiply, sb(s, nl.bfloat16), nl.add, sb(y))
        return tile_out(d)
    want = x * s.astype(BF16).astype(np.float32) + y
    np.testing.assert_array_equal(simulate(kernel, x, y, s), want)


@pytest.mark.parametrize("param", ["max_value", "reduce_init"])
def test_exponential_tensor_operands_must_be_fp32(rng, param):
    x, m = randn(rng, (4, 6)), randn(rng, (4, 1))

    def kernel(x, m, dtype):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        if param == "max_value":
            nisa.exponential(d, sb(x), max_value=col(m, dtype))
        else:
            nisa.exponential(d, sb(x), reduce_res=r, reduce_cmd=nisa.reduce_cmd.load_reduce,
                             reduce_init=col(m, dtype))
        return tile_out(d)
    got = simulate(kernel, x, m, nl.float32, target="trn3")
    np.testing.assert_array_equal(got, np.exp(x - m) if param == "max_value" else np.exp(x))
    with pytest.raises(DtypeError, match=rf"^nisa\.exponential: {param} dtype float16 must be float32" + LOC):
        simulate(kernel, x, m, nl.float16, target="trn3")


# ---- the instruction: keywords and events ----------------------------------------------------

def test_tensor_scalar_misspelt_keyword_raises_type_error():
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, sb(x), nl.add, 1.0, opreand1=2.0)  # ev:kw
    want = ("nisa.tensor_scalar() got an unexpected keyword argument 'opreand1'; did you mean "
            f"'operand1'? ({line(__file__, 'kw')})")
    with pytest.raises(TypeError, match="^" + re.escape(want) + "$"):
        simulate(kernel, np.ones((2, 3), np.float32))


@pytest.mark.parametrize("engine, want", [(nisa.engine.unknown, "vector"), (nisa.engine.scalar, "scalar")])
def test_tensor_scalar_event(rng, engine, want):
    x, c = randn(rng, (4, 6)), randn(rng, (4, 1))

    def kernel(x, c):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, sb(x), nl.multiply, sb(c), op1=nl.add, operand1=2.0, engine=engine)  # ev:ts
        return tile_out(d)
    for fast in (True, False):      # fp32 dst: the fast path computes straight into it
        out, ev = record(kernel, x, c, fast=fast, target="trn2")
        np.testing.assert_array_equal(out, x * c + np.float32(2))
        e = ev[2]
        assert (e.op, e.api, e.engine, e.location) == ("tensor_scalar", "nisa.tensor_scalar", want,
                                                       line(__file__, "ts"))
        assert roles(e.reads) == [("data", "sbuf", (4, 6), "float32", 96), ("operand0", "sbuf", (4, 1), "float32", 16)]
        assert roles(e.writes) == [("dst", "sbuf", (4, 6), "float32", 96)]
        assert {k: e.options[k] for k in ("op0", "op1", "operand1", "reverse0", "engine")} == \
            {"op0": "multiply", "op1": "add", "operand1": 2.0, "reverse0": False, "engine": engine.name}
        assert "operand0" not in e.options
        assert (ev.fast_paths["out_f32"] == 1) is fast


def test_scalar_tensor_tensor_and_reciprocal_events(rng):
    x, y = randn(rng, (4, 6)), randn(rng, (4, 6))

    def kernel(x, y):
        d = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(d, sb(x), nl.multiply, 3.0, nl.add, sb(y))
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(r, sb(y))
        return tile_out(d, r)
    (d, r), ev = record(kernel, x, y)
    np.testing.assert_array_equal(d, (x * np.float32(3) + y).astype(BF16))
    np.testing.assert_array_equal(r, np.float32(1) / y)
    stt, rec = ev[2], ev[4]
    assert (stt.op, stt.engine, stt.options["operand0"], stt.options["op1"]) == \
        ("scalar_tensor_tensor", "vector", 3.0, "add")
    assert roles(stt.reads) == [("data", "sbuf", (4, 6), "float32", 96), ("operand1", "sbuf", (4, 6), "float32", 96)]
    assert roles(stt.writes) == [("dst", "sbuf", (4, 6), "bfloat16", 48)]
    assert (rec.op, rec.engine) == ("reciprocal", "vector")
    assert roles(rec.reads) == [("data", "sbuf", (4, 6), "float32", 96)]


def test_exponential_event_and_the_accumulator_across_memoised_calls(rng):
    x = randn(rng, (3, 4))

    def kernel(x):
        s = sb(x)
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r0 = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(d, s, reduce_res=r0, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        outs = [r0]
        for _ in range(2):
            r = nl.ndarray((3, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.exponential(d, s, max_value=1.0, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce)
            outs.append(r)
        return tile_out(tuple(outs))
    for fast in (True, False):
        (r0, r1, r2), ev = record(kernel, x, fast=fast, target="trn3")
        s0 = np.exp(x).sum(axis=1, dtype=np.float32)
        s1 = np.exp(x - np.float32(1)).sum(axis=1, dtype=np.float32)
        np.testing.assert_allclose(r0[:, 0], s0, rtol=1e-6)
        np.testing.assert_allclose(r1[:, 0], s0 + s1, rtol=1e-6)
        np.testing.assert_allclose(r2[:, 0], s0 + 2 * s1, rtol=1e-6)
        exps = [e for e in ev if e.op == "exponential"]
        assert [e.engine for e in exps] == ["vector"] * 3
        assert [e.options["reduce_cmd"] for e in exps] == ["reset_reduce", "reduce", "reduce"]
        assert [e.options["max_value"] for e in exps] == [0.0, 1.0, 1.0]
        assert roles(exps[1].writes) == [("dst", "sbuf", (3, 4), "float32", 48),
                                         ("reduce_res", "sbuf", (3, 1), "float32", 12)]
