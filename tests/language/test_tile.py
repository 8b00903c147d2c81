"""Tile-level nl functions (language/tile.py) against NumPy/ml_dtypes references from the doc formulas."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import (BoundsError, DtypeError, MemorySpaceError, NkiError, ShapeError,
                           UnsupportedError)
from conftest import sbuf_copy, simulate

BF16 = ml_dtypes.bfloat16
F32 = np.float32
LOC = r" \(test_tile\.py:\d+\)$"


def run(fn, *arrays, target="trn2"):
    """Load every array into SBUF, apply ``fn`` to the tiles, store the result; return (array, info)."""
    info = {}

    def kernel(*hbm):
        out = fn(*[nl.load(h) for h in hbm])
        info.update(shape=out.shape, dtype=out.dtype, buffer=out.buffer)
        h = nl.ndarray(out.shape, dtype=out.dtype, buffer=nl.shared_hbm)
        nl.store(h, value=sbuf_copy(out))
        return h
    return simulate(kernel, *arrays, target=target), info


def rand(shape, dtype=F32, lo=-4.0, hi=4.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(F32).astype(dtype)


def ints(shape, dtype=F32, lo=-8, hi=8, seed=0):
    """Small integer values: sums and products of them are exact in fp32."""
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def bits_equal(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}"))


# ---- element-wise binary -----------------------------------------------------------------------

BINARY_REF = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum,
    "abs_max": lambda a, b: np.where(np.abs(a) > np.abs(b), a, b),
    "abs_min": lambda a, b: np.where(np.abs(a) < np.abs(b), a, b),
    "fmod": np.fmod, "mod": np.mod,
    "equal": lambda a, b: (a == b).astype(F32), "not_equal": lambda a, b: (a != b).astype(F32),
    "less": lambda a, b: (a < b).astype(F32), "less_equal": lambda a, b: (a <= b).astype(F32),
    "greater": lambda a, b: (a > b).astype(F32), "greater_equal": lambda a, b: (a >= b).astype(F32),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(F32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(F32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(F32),
}


@pytest.mark.parametrize("name", sorted(BINARY_REF))
def test_binary_tile_tile_bf16_rounds_once(name):
    a, b = rand((8, 16), BF16, seed=1), rand((8, 16), BF16, seed=2)
    b[0, :4] = a[0, :4]                       # some equal elements for the comparisons
    b[b == 0] = 1
    got, info = run(lambda x, y: getattr(nl, name)(x, y), a, b, target="trn3")
    want = BINARY_REF[name](a.astype(F32), b.astype(F32)).astype(BF16)
    bits_equal(got, want)
    assert info["buffer"] is nl.sbuf


def test_abs_max_doc_example_tie_returns_y_and_column_broadcast():
    a = np.full((128, 512), 1.0, F32)
    b = np.full((128, 1), -1.0, F32)
    got, _ = run(nl.abs_max, a, b, target="trn3")
    np.testing.assert_array_equal(got, np.full((128, 512), -1.0, F32))
    got, _ = run(nl.abs_min, np.full((4, 8), 5.0, F32), np.full((4, 1), -3.0, F32), target="trn3")
    np.testing.assert_array_equal(got, np.full((4, 8), -3.0, F32))
    with pytest.raises(UnsupportedError, match=r"^nl\.abs_max: needs trn3 or newer, not trn2" + LOC):
        run(nl.abs_max, a, b, target="trn2")


def test_power_tile_tile_runs_on_gpsimd():
    a, b = rand((4, 8), lo=0.5, hi=3, seed=3), rand((4, 8), lo=-2, hi=2, seed=4)
    got, _ = run(nl.power, a, b)
    np.testing.assert_array_equal(got, np.power(a, b))


@pytest.mark.parametrize("name", ["subtract", "divide", "power", "mod", "less"])
def test_binary_tile_scalar_and_scalar_tile(name):
    a = rand((4, 8), lo=0.5, hi=4, seed=5)
    ref = BINARY_REF.get(name, np.power)
    got, _ = run(lambda x: getattr(nl, name)(x, 3.0), a)
    np.testing.assert_array_equal(got, ref(a, F32(3)).astype(F32))
    got, _ = run(lambda x: getattr(nl, name)(3.0, x), a)
    np.testing.assert_array_equal(got, ref(F32(3), a).astype(F32))


def test_column_broadcasts_on_either_side():
    a, c = rand((6, 10), seed=6), rand((6, 1), seed=7)
    got, info = run(nl.subtract, a, c)
    np.testing.assert_array_equal(got, a - c)
    got, info = run(nl.subtract, c, a)
    np.testing.assert_array_equal(got, c - a)
    assert info["shape"] == (6, 10)


def test_non_fp32_column_broadcasts_on_either_side():
    """nisa.tensor_scalar takes only fp32 tensor operands, so a bf16 (P, 1) column goes through a
    stride-0 tensor_tensor instead; the values are the same fp32 math, rounded once."""
    a, c = rand((6, 10), BF16, seed=6), rand((6, 1), BF16, seed=7)
    got, info = run(nl.subtract, a, c)
    bits_equal(got, (a.astype(F32) - c.astype(F32)).astype(BF16))
    got, info = run(nl.multiply, c, a)
    bits_equal(got, (c.astype(F32) * a.astype(F32)).astype(BF16))
    assert info["shape"] == (6, 10)


def test_free_dim_broadcast_3d():
    a, b = rand((4, 3, 5), seed=8), rand((4, 1, 5), seed=9)
    got, info = run(nl.multiply, b, a)
    np.testing.assert_array_equal(got, b * a)
    assert info["shape"] == (4, 3, 5)


@pytest.mark.parametrize("da, db, want", [
    (BF16, F32, F32), (np.float16, BF16, F32), (ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2, BF16),
    (np.int8, np.uint8, np.int16), (np.int8, np.uint16, np.int32), (np.int32, np.uint32, F32),
    (np.int32, np.float16, np.float16), (np.uint8, np.uint16, np.uint16), (np.bool_, np.int8, np.int8),
])
def test_tile_tile_dtype_promotion(da, db, want):
    a, b = ints((4, 4), da, 0, 3, seed=10), ints((4, 4), db, 0, 3, seed=11)
    got, info = run(nl.add, a, b)
    assert info["dtype"] == np.dtype(want)
    np.testing.assert_array_equal(got.astype(F32), a.astype(F32) + b.astype(F32))


def test_explicit_dtype_and_scalar_keeps_tile_dtype():
    a = rand((4, 4), BF16, seed=12)
    got, info = run(lambda x: nl.multiply(x, 1.1), a)
    assert info["dtype"] == np.dtype(BF16)
    bits_equal(got, (a.astype(F32) * F32(1.1)).astype(BF16))
    got, info = run(lambda x: nl.multiply(x, 1.1, dtype=nl.float32), a)
    bits_equal(got, a.astype(F32) * F32(1.1))


def test_comparison_defaults_to_input_dtype_and_takes_uint8():
    a, b = ints((4, 6), F32, seed=13), ints((4, 6), F32, seed=14)
    got, info = run(nl.greater_equal, a, b)
    assert info["dtype"] == np.dtype(F32)
    np.testing.assert_array_equal(got, (a >= b).astype(F32))
    got, _ = run(lambda x, y: nl.not_equal(x, y, dtype=nl.uint8), a, b)
    np.testing.assert_array_equal(got, (a != b).astype(np.uint8))


def test_bitwise_and_shifts_on_integers():
    a, b = ints((4, 8), np.int32, 0, 1 << 20, seed=15), ints((4, 8), np.int32, 0, 8, seed=16)
    np.testing.assert_array_equal(run(nl.bitwise_and, a, b)[0], a & b)
    np.testing.assert_array_equal(run(nl.bitwise_xor, a, b)[0], a ^ b)
    np.testing.assert_array_equal(run(nl.left_shift, a, b)[0], a << b)
    np.testing.assert_array_equal(run(nl.right_shift, a, b)[0], a >> b)
    np.testing.assert_array_equal(run(lambda x: nl.bitwise_or(x, 5), a)[0], a | 5)
    np.testing.assert_array_equal(run(nl.invert, a)[0], ~a)


def test_bitwise_on_floats_raises():
    a = rand((2, 2))
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_tensor: data1 dtype float32 is not an integer "
                                         r"dtype, which bitvec op bitwise_and needs" + LOC):
        run(lambda x: nl.bitwise_and(x, x), a)


def test_binary_rules():
    a = rand((4, 8))
    with pytest.raises(ShapeError, match=r"^nl\.add: x and y are both scalars; at least one must be a "
                                         r"tile" + LOC):
        run(lambda x: nl.add(1.0, 2.0), a)
    with pytest.raises(ShapeError, match=r"^nl\.add: x shape \(4, 8\) and y shape \(4, 4\) are not "
                                         r"broadcastable \(same rank, equal partition dims, free dims "
                                         r"equal or 1\)" + LOC):
        run(lambda x: nl.add(x, x[:, 0:4]), a)
    with pytest.raises(ShapeError, match=r"^nl\.add: x shape \(4, 8\) and y shape \(1, 8\) are not "
                                         r"broadcastable \(same rank, equal partition dims, free dims "
                                         r"equal or 1\)" + LOC):
        run(lambda x: nl.add(x, x[0:1, :]), a)
    with pytest.raises(ShapeError, match=r"^nl\.multiply: y must be a tile or a scalar, got list" + LOC):
        run(lambda x: nl.multiply(x, [1, 2]), a)


def test_binary_both_psum_follows_tensor_tensor_rule():
    def fn(x):
        p = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)      # two PSUM tiles
        nisa.tensor_copy(dst=p, src=nl.transpose(x))
        return nl.add(p, nl.transpose(x))
    with pytest.raises(MemorySpaceError, match=r"^nisa\.tensor_tensor: data1 and data2 are both in psum; "
                                               r"at most one may be" + LOC):
        run(fn, rand((4, 4)))


def test_hbm_operand_raises():
    def kernel(x):
        nl.exp(x)
    with pytest.raises(MemorySpaceError, match=r"^nl\.exp: x is in shared_hbm \(HBM\); must be in psum or "
                                               r"sbuf" + LOC):
        simulate(kernel, rand((2, 2)))


# ---- element-wise unary ------------------------------------------------------------------------

def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


def _sig(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


UNARY_EXACT = {
    "abs": np.abs, "square": np.square, "negative": np.negative, "relu": lambda x: np.maximum(x, 0),
    "exp": np.exp, "cos": np.cos, "tan": np.tan, "arctan": np.arctan, "sign": np.sign,
    "tanh": np.tanh, "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc,
    "reciprocal": lambda x: F32(1) / x,
}
UNARY_CLOSE = {
    "sin": lambda x: np.sin(x.astype(np.float64)), "sigmoid": _sig, "silu": lambda x: x * _sig(x), "softplus": lambda x: np.log1p(np.exp(x.astype(np.float64))),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x.astype(np.float64)))),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "gelu_apprx_sigmoid": lambda x: x * _sig(1.702 * x), "erf": _erf,
    "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x.astype(np.float64) ** 2),
    "silu_dx": lambda x: _sig(x) * (1 + x * (1 - _sig(x))),
    "gelu_dx": lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-x.astype(np.float64) ** 2 / 2) / np.sqrt(2 * np.pi),
    "gelu_apprx_sigmoid_dx": lambda x: _sig(1.702 * x) + 1.702 * x * _sig(1.702 * x) * (1 - _sig(1.702 * x)),
}


@pytest.mark.parametrize("name", sorted(UNARY_EXACT))
def test_unary_matches_formula_bit_exact(name):
    a = rand((8, 16), seed=17)
    a[0, 0] = 0.0
    got, info = run(getattr(nl, name), a)
    with np.errstate(divide="ignore"):
        bits_equal(got, np.asarray(UNARY_EXACT[name](a), F32))
    assert info["buffer"] is nl.sbuf


@pytest.mark.parametrize("name", sorted(UNARY_CLOSE))
def test_activation_functions_match_formula(name):
    a = rand((8, 16), seed=18)
    got, _ = run(getattr(nl, name), a)
    np.testing.assert_allclose(got, UNARY_CLOSE[name](a), rtol=2e-6, atol=2e-6)


def test_log_sqrt_rsqrt_on_positive_values():
    a = rand((4, 8), lo=0.1, hi=9, seed=19)
    bits_equal(run(nl.log, a)[0], np.log(a))
    bits_equal(run(nl.sqrt, a)[0], np.sqrt(a))
    bits_equal(run(nl.rsqrt, a)[0], F32(1) / np.sqrt(a))


def test_unary_bf16_and_int_outputs_round_once():
    a = rand((4, 8), BF16, seed=20)
    bits_equal(run(nl.exp, a)[0], np.exp(a.astype(F32)).astype(BF16))
    got, info = run(lambda x: nl.floor(x, dtype=nl.int32), rand((4, 8), seed=21))
    assert info["dtype"] == np.dtype(np.int32)
    np.testing.assert_array_equal(got, np.floor(rand((4, 8), seed=21)).astype(np.int32))


@pytest.mark.parametrize("fn, x, want", [
    (nl.ceil, 3.2, 4.0), (nl.ceil, -3.7, -3.0), (nl.floor, 3.7, 3.0), (nl.floor, -3.2, -4.0),
    (nl.trunc, 3.7, 3.0), (nl.trunc, -3.7, -3.0), (nl.negative, 5.0, -5.0), (nl.sign, -5.0, -1.0),
    (nl.reciprocal, 4.0, 0.25), (nl.rsqrt, 4.0, 0.5), (nl.square, 3.0, 9.0), (nl.abs, -1.0, 1.0),
])
def test_doc_examples(fn, x, want):
    got, _ = run(fn, np.full((128, 512), x, F32))
    np.testing.assert_array_equal(got, np.full((128, 512), want, F32))


def test_logical_not_and_unary_needs_a_tile():
    a = np.array([[0, 1, 1, 0]], F32)
    np.testing.assert_array_equal(run(nl.logical_not, a)[0], np.array([[1, 0, 0, 1]], F32))
    with pytest.raises(ShapeError, match=r"^nl\.exp: x must be a tensor, got float" + LOC):
        run(lambda x: nl.exp(1.0), a)


def test_rsqrt_runs_on_gpsimd_which_cannot_read_psum():
    with pytest.raises(MemorySpaceError, match=r"^nisa\.tensor_scalar: data is in psum, which the gpsimd "
                                               r"engine cannot access" + LOC):
        run(lambda x: nl.rsqrt(nl.transpose(x)), rand((4, 4), lo=1, hi=2))


def test_copy_is_sbuf_and_bit_exact():
    """Docs: "Create a copy of the input tile on SBUF"; a same-dtype copy keeps every bit (int32
    beyond 2**24 included), a PSUM source comes back in SBUF."""
    a = np.array([[16777217, 3]], np.int32)
    got, info = run(nl.copy, a)
    np.testing.assert_array_equal(got, a)
    assert info["buffer"] is nl.sbuf
    got, info = run(lambda x: nl.copy(nl.transpose(x), dtype=nl.bfloat16), rand((4, 6), seed=22))
    assert info["buffer"] is nl.sbuf and info["dtype"] == np.dtype(BF16)
    bits_equal(got, rand((4, 6), seed=22).T.astype(BF16))


def test_operator_only_token_is_not_callable():
    with pytest.raises(UnsupportedError, match=r"^nl\.prelu: is an operator token only \(pass it as "
                                               r"op=\.\.\.\), not a tile function" + LOC):
        run(lambda x: nl.prelu(x), rand((2, 2)))


# ---- load / store / transpose / matmul ---------------------------------------------------------

def test_load_casts_and_store_takes_sbuf_only():
    a = rand((4, 6), seed=23)

    def kernel(x, stage):
        t = nl.load(x, dtype=nl.bfloat16)
        assert t.buffer is nl.sbuf and t.dtype == np.dtype(BF16)
        out = nl.ndarray((6, 4), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        p = nl.transpose(t)
        nl.store(out, sbuf_copy(p) if stage else p)     # the docs: a value in SBUF
        return out
    bits_equal(simulate(kernel, a, True), a.astype(BF16).T.copy())
    with pytest.raises(MemorySpaceError, match=r"^nl\.store: value is in psum; must be in sbuf" + LOC):
        simulate(kernel, a, False)


def test_load_store_rules():
    a = rand((4, 6))

    def load_sbuf(x):
        nl.load(nl.load(x))
    with pytest.raises(MemorySpaceError, match=r"^nl\.load: src is in sbuf; must be in private_hbm or "
                                               r"shared_hbm" + LOC):
        simulate(load_sbuf, a)

    def store_to_sbuf(x):
        t = nl.load(x)
        nl.store(t, t)
    with pytest.raises(MemorySpaceError, match=r"^nl\.store: dst is in sbuf; must be in private_hbm or "
                                               r"shared_hbm" + LOC):
        simulate(store_to_sbuf, a)

    def store_hbm_value(x):
        nl.store(x, x)
    with pytest.raises(MemorySpaceError, match=r"^nl\.store: value is in shared_hbm \(HBM\); must be in psum or "
                                               r"sbuf" + LOC):
        simulate(store_hbm_value, a)

    def store_wrong_size(x):
        nl.store(x, nl.load(x[0:2]))
    with pytest.raises(ShapeError, match=r"^nisa\.dma_copy: src has 12 elements, dst has 24 \(shapes "
                                         r"\(2, 6\) vs \(4, 6\)\)" + LOC):
        simulate(store_wrong_size, a)

    with pytest.raises(ShapeError, match=r"^nl\.load: partition dim 129 of sbuf tensor \(129, 2\) exceeds "
                                         r"128 on trn2" + LOC):
        simulate(lambda x: nl.load(x), rand((129, 2)), target="trn2")


def test_load_transpose2d():
    a = rand((6, 4), BF16, seed=24)

    def kernel(x):
        t = nl.load_transpose2d(x, dtype=nl.float32)
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out
    bits_equal(simulate(kernel, a), a.astype(F32).T.copy())
    with pytest.raises(ShapeError, match=r"^nl\.load_transpose2d: src must be 2-D, got shape \(2, 2, 2\)" + LOC):
        simulate(lambda x: nl.load_transpose2d(x), rand((2, 2, 2)))


def test_transpose_to_psum_doc_example():
    def kernel():
        x = nl.shared_identity_matrix(n=128, dtype=nl.float32)
        result_psum = nl.transpose(x)
        assert result_psum.buffer is nl.psum
        result = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(result, result_psum)
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.equal(result, x))
        return out
    np.testing.assert_array_equal(simulate(kernel), np.ones((128, 128), F32))


@pytest.mark.parametrize("transpose_x", [True, False])
def test_matmul(transpose_x):
    x, y = ints((16, 8), BF16, seed=25), ints((16, 32) if transpose_x else (8, 32), BF16, seed=26)
    got, info = run(lambda a, b: nl.matmul(a, b, transpose_x=transpose_x), x, y)
    assert info["buffer"] is nl.psum and info["dtype"] == np.dtype(F32)
    xf = x.astype(F32)
    np.testing.assert_array_equal(got, (xf.T if transpose_x else xf) @ y.astype(F32))


def test_matmul_psum_accumulation_idiom():
    """affine_range docstring example 2: ``result_psum += nl.matmul(xT_sbuf, y_sbuf, transpose_x=True)``."""
    xT, y = ints((256, 64), F32, seed=27), ints((256, 32), F32, seed=28)

    def kernel(xT, y):
        result_psum = nl.zeros((64, 32), dtype=nl.float32, buffer=nl.psum)
        for i_K in nl.affine_range(xT.shape[0] // 128):
            offset = i_K * 128
            xT_sbuf = nl.load(xT[offset:offset + 128, 0:xT.shape[1]])
            y_sbuf = nl.load(y[offset:offset + 128, 0:y.shape[1]])
            result_psum += nl.matmul(xT_sbuf, y_sbuf, transpose_x=True)
        assert result_psum.buffer is nl.psum
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, sbuf_copy(result_psum))
        return out
    np.testing.assert_array_equal(simulate(kernel, xT, y), xT.T @ y)


def test_matmul_limits_come_from_nc_matmul():
    with pytest.raises(ShapeError, match=r"^nisa\.nc_matmul: moving free size 513 exceeds 512 on trn2" + LOC):
        run(lambda a, b: nl.matmul(a, b, transpose_x=True), rand((4, 8)), rand((4, 513)))
    with pytest.raises(MemorySpaceError, match=r"^nisa\.nc_matmul: moving is in psum; must be in sbuf" + LOC):
        run(lambda a: nl.matmul(a, nl.transpose(a), transpose_x=True), rand((4, 4)))


# ---- reductions, softmax, rms_norm -------------------------------------------------------------

REDUCE_REF = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod, "mean": np.mean}


@pytest.mark.parametrize("name", sorted(REDUCE_REF))
@pytest.mark.parametrize("shape, axis, keepdims", [((4, 5), 1, False), ((4, 5), [1], True),
                                                     ((4, 3, 5), (1, 2), False), ((4, 3, 5), -1, True),
                                                     ((4, 3, 5), 2, False), ((4, 3, 5), [-2, -1], True)])
def test_reductions(name, shape, axis, keepdims):
    a = ints(shape, F32, -3, 4, seed=29)
    got, info = run(lambda x: getattr(nl, name)(x, axis, keepdims=keepdims), a)
    ax = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    want = REDUCE_REF[name](a.astype(np.float64), axis=ax, keepdims=keepdims).astype(F32)
    assert info["shape"] == want.shape
    np.testing.assert_array_equal(got, want)


def test_reduce_result_dtype_and_mean_rounds_once():
    a = rand((4, 7), BF16, seed=30)
    got, info = run(lambda x: nl.mean(x, axis=1), a)
    assert info["dtype"] == np.dtype(BF16)
    s = np.sum(a.astype(F32), axis=1, dtype=F32)
    bits_equal(got, (s / F32(7)).astype(BF16))
    got, info = run(lambda x: nl.sum(x, axis=1, dtype=nl.float32), a)
    bits_equal(got, s)


def test_var_always_keeps_dims_and_all():
    a = ints((4, 6), F32, -3, 4, seed=31)
    got, info = run(lambda x: nl.var(x, axis=1, keepdims=False), a)
    assert info["shape"] == (4, 1)
    np.testing.assert_allclose(got, a.var(axis=1, keepdims=True), rtol=1e-6)
    b = np.array([[1, 2, 3], [1, 0, 3], [0, 0, 0]], F32)
    np.testing.assert_array_equal(run(lambda x: nl.all(x, axis=1), b)[0], np.array([1, 0, 0], F32))


@pytest.mark.parametrize("axis, msg", [
    (0, r"axis 0 includes the partition dim 0, which cannot be reduced"),
    ([0, 1, 2], r"axis \[0, 1, 2\] includes the partition dim 0, which cannot be reduced"),
    (1, r"axis 1 must be trailing free dims of a 3-D tile \(\[1, 2\] or \[2\]\)"),
    (3, r"axis 3 must be trailing free dims of a 3-D tile \(\[1, 2\] or \[2\]\)"),
])
def test_reduce_axis_rules(axis, msg):
    with pytest.raises(ShapeError, match=r"^nl\.sum: " + msg + LOC):
        run(lambda x: nl.sum(x, axis), rand((2, 3, 4)))


def test_softmax_matches_reference():
    a = rand((8, 33), seed=32)
    got, info = run(lambda x: nl.softmax(x, axis=1), a)
    e = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    got, _ = run(lambda x: nl.softmax(x, axis=1), np.full((128, 512), 1.0, F32))
    np.testing.assert_allclose(got, np.full((128, 512), 1 / 512), rtol=1e-6)
    got, _ = run(lambda x: nl.softmax(x, dtype=nl.bfloat16), rand((4, 2, 6), seed=33))
    assert got.dtype == np.dtype(BF16)


def test_rms_norm():
    got, _ = run(lambda x, w: nl.rms_norm(x, w, axis=1, n=512), np.full((128, 512), 2.0, F32),
                 np.full((128, 512), 1.0, F32))
    np.testing.assert_allclose(got, np.full((128, 512), 2 / np.sqrt(4 + 1e-6)), rtol=1e-6)
    x, w = rand((8, 16), seed=34), rand((8, 1), seed=35)
    got, _ = run(lambda a, b: nl.rms_norm(a, b, axis=1, n=16, epsilon=1e-3), x, w)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).sum(axis=1, keepdims=True) / 16 + 1e-3) * w
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---- where / broadcast_to / expand_dims / gather_flattened ------------------------------------

def test_where():
    c = np.array([[1, 0, 1, 0]], F32)
    x, y = np.array([[1, 2, 3, 4]], np.int32), np.array([[-1, -2, -3, -4]], np.int32)
    got, info = run(nl.where, c, x, y)
    np.testing.assert_array_equal(got, np.array([[1, -2, 3, -4]], np.int32))
    got, info = run(lambda cc, xx: nl.where(cc, xx, 0.5, dtype=nl.float32), c, x)
    np.testing.assert_array_equal(got, np.array([[1, 0.5, 3, 0.5]], F32))
    got, _ = run(lambda cc: nl.where(cc, 10.0, 5.0), np.array([[1.0], [0.0]], F32))
    np.testing.assert_array_equal(got, np.array([[10.0], [5.0]], F32))
    with pytest.raises(ShapeError, match=r"^nl\.where: x shape \(1, 4\) and y shape \(1, 3\) are not "
                                         r"broadcastable \(same rank, equal partition dims, free dims "
                                         r"equal or 1\)" + LOC):
        run(lambda cc, xx: nl.where(cc, xx, xx[:, 0:3]), c, x)


def test_broadcast_to():
    a = rand((1, 5), seed=36)
    got, info = run(lambda x: nl.broadcast_to(x, (4, 5)), a)
    np.testing.assert_array_equal(got, np.broadcast_to(a, (4, 5)))
    got, _ = run(lambda x: nl.broadcast_to(x[:, 0:1], (4, 3), dtype=nl.bfloat16), rand((4, 5), seed=37))
    bits_equal(got, np.broadcast_to(rand((4, 5), seed=37)[:, 0:1], (4, 3)).astype(BF16))

    def same(x):
        t = nl.load(x)
        assert nl.broadcast_to(t, (2, 3)) is t
    simulate(same, rand((2, 3)))
    with pytest.raises(ShapeError, match=r"^nl\.broadcast_to: cannot broadcast x shape \(2, 3\) to \(2, 6\) "
                                         r"\(same rank, dims equal or 1\)" + LOC):
        run(lambda x: nl.broadcast_to(x, (2, 6)), rand((2, 3)))


def test_expand_dims_is_a_view():
    def kernel(x):
        t = nl.load(x)
        v = nl.expand_dims(t, 1)
        assert v.shape == (2, 1, 3) and v.alloc is t.alloc
    simulate(kernel, rand((2, 3)))
    with pytest.raises(ShapeError, match=r"^NkiTensor\.expand_dim: cannot change the partition dim \(dim 0\) "
                                         r"of an on-chip tensor \(2, 3\) in sbuf" + LOC):
        run(lambda x: nl.expand_dims(x, 0), rand((2, 3)))


def test_gather_flattened():
    data = rand((3, 2, 4), seed=38)
    idx = np.array([[0, 7, 3], [1, 1, 2], [6, 5, 4]], np.int32)
    got, _ = run(nl.gather_flattened, data, idx)
    np.testing.assert_array_equal(got, np.take_along_axis(data.reshape(3, 8), idx, axis=1))
    with pytest.raises(BoundsError, match=r"^nl\.gather_flattened: index 8 is outside 0:8 \(data elements "
                                          r"per partition\)" + LOC):
        run(nl.gather_flattened, data, idx + 1)


# ---- Python operators on NkiTensor -------------------------------------------------------------

def test_python_operators():
    a, b = rand((4, 6), seed=39), rand((4, 6), lo=0.5, seed=40)
    got, _ = run(lambda x, y: (x + y) * 2 - 1, a, b)
    np.testing.assert_array_equal(got, (a + b) * F32(2) - F32(1))
    np.testing.assert_array_equal(run(lambda x, y: 2 - x / y, a, b)[0], F32(2) - a / b)
    np.testing.assert_array_equal(run(lambda x: -abs(x), a)[0], -np.abs(a))
    np.testing.assert_array_equal(run(lambda x, y: x < y, a, b)[0], (a < b).astype(F32))
    np.testing.assert_array_equal(run(lambda x, y: x == y, a, a)[0], np.ones_like(a))
    np.testing.assert_array_equal(run(lambda x: np.float32(3) * x, a)[0], F32(3) * a)
    np.testing.assert_array_equal(run(lambda x: x ** 2.0, np.abs(a) + 1)[0], (np.abs(a) + 1) ** 2)


def test_inplace_operators_write_into_the_tile():
    a = rand((4, 6), seed=41)

    def fn(x):
        y = x
        x += 1.0
        x *= x
        assert x is y
        return x
    np.testing.assert_array_equal(run(fn, a)[0], (a + F32(1)) * (a + F32(1)))


def test_tensor_stays_hashable_and_comparisons_outside_a_kernel_are_identity():
    seen = {}

    def kernel(x):
        t = nl.load(x)
        seen["t"] = t
        assert t in {t: 1}
        assert (t == None) is False  # noqa: E711 - identity fallback for non-operands
    simulate(kernel, rand((2, 2)))
    t = seen["t"]
    assert t == t and not (t != t) and hash(t) == object.__hash__(t)


def test_operator_outside_a_kernel_is_not_supported():
    seen = {}
    simulate(lambda x: (seen.setdefault("t", nl.load(x)), None)[1], rand((2, 2)))
    with pytest.raises(TypeError, match="unsupported operand"):
        seen["t"] + 1


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 128), f=st.integers(1, 64), c=st.floats(-8, 8, width=32),
       dt=st.sampled_from([F32, BF16, np.float16]))
def test_add_then_scale_rounds_once_per_call(p, f, c, dt):
    a, b = rand((p, f), dt, seed=p), rand((p, f), dt, seed=f + 1000)
    got, _ = run(lambda x, y: nl.multiply(nl.add(x, y), c), a, b)
    s = (a.astype(F32) + b.astype(F32)).astype(dt)
    bits_equal(got, (s.astype(F32) * F32(c)).astype(dt))


def test_errors_are_nki_errors():
    assert issubclass(ShapeError, NkiError)


def test_more_shape_rules():
    a = rand((4, 6))

    def bad_inplace(x):
        t = nl.load(x)
        t += t[:, 0:3]
    with pytest.raises(ShapeError, match=r"^nl\.add \(in place\): x shape \(4, 6\) and y shape \(4, 3\) are "
                                         r"not broadcastable \(same rank, equal partition dims, free dims "
                                         r"equal or 1\)" + LOC):
        simulate(bad_inplace, a)

    def bad_inplace_broadcast(x):
        t = nl.load(x)
        c = t[:, 0:1]
        c += t
    with pytest.raises(ShapeError, match=r"^nl\.add \(in place\): y shape \(4, 6\) does not broadcast to x "
                                         r"shape \(4, 1\)" + LOC):
        simulate(bad_inplace_broadcast, a)

    def column_inplace(x):
        t = nl.load(x)
        t -= t[:, 0:1]
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out
    np.testing.assert_array_equal(simulate(column_inplace, a), a - a[:, 0:1])

    with pytest.raises(ShapeError, match=r"^nl\.transpose: x must be a 2-D tile, got shape \(2, 2, 2\)" + LOC):
        run(nl.transpose, rand((2, 2, 2)))
    with pytest.raises(ShapeError, match=r"^nl\.broadcast_to: partition dim 256 exceeds 128 on trn2" + LOC):
        run(lambda x: nl.broadcast_to(x, (256, 6)), a[0:1])
    with pytest.raises(UnsupportedError, match=r"^nl\.gather_flattened: axis 1 is not supported; only "
                                               r"axis=0" + LOC):
        run(lambda x, i: nl.gather_flattened(x, i, axis=1), a, np.zeros((4, 2), np.int32))
    with pytest.raises(ShapeError, match=r"^nl\.gather_flattened: indices partition dim 2 does not match "
                                         r"data partition dim 4" + LOC):
        run(nl.gather_flattened, a, np.zeros((2, 2), np.int32))
    with pytest.raises(DtypeError, match=r"^nl\.gather_flattened: indices dtype float32 is not an integer "
                                         r"dtype, which gather_flattened needs" + LOC):
        run(nl.gather_flattened, a, np.zeros((4, 2), F32))


def test_where_rounds_float_scalars_once_into_int_dtype():
    c = np.array([[1, 0, 0]], F32)
    got, _ = run(lambda cc, xx: nl.where(cc, xx, 2.5), c, np.array([[7, 8, 9]], np.int32))
    np.testing.assert_array_equal(got, np.array([[7, 2, 2]], np.int32))     # rint(2.5) = 2 (half to even)


@pytest.mark.parametrize("y_shape", [(8, 16), (8, 1)])
@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
def test_inplace_add_is_one_fp32_rounding_of_x_plus_y(y_shape, buffer):
    """``x += y`` on float32 tiles: fl32(x + y) per element (y may be a (P, 1) column)."""
    a, b = rand((8, 16), seed=51, lo=-1e4, hi=1e4), rand(y_shape, seed=52, lo=-1e-3, hi=1e-3)

    def kernel(x, y):
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=getattr(nl, buffer))
        nisa.tensor_copy(dst=t, src=nl.load(x))
        t += nl.load(y)
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, sbuf_copy(t))
        return out
    want = (a.astype(np.float64) + b.astype(np.float64)).astype(F32)
    np.testing.assert_array_equal(simulate(kernel, a, b), want)


def test_inplace_add_onto_unwritten_psum_is_an_uninitialised_read_in_strict_mode():
    import nkisim.nki as nki
    from nkisim.errors import UninitializedReadError

    def kernel(x):
        acc = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum, name="acc")
        t = nl.load(x)
        acc += nl.matmul(t, t, transpose_x=True)
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, sbuf_copy(acc))
        return out
    with pytest.raises(UninitializedReadError, match=r"^nl\.add \(in place\): x reads 16 never-written "
                                                     r"element\(s\) of psum tensor 'acc'"):
        nki.simulate(kernel, uninitialized_reads="raise")(rand((4, 4)))
    assert np.isnan(nki.simulate(kernel)(rand((4, 4)))).all()      # default: the NaN sentinel


@pytest.mark.parametrize("dtype", [F32, BF16, np.int32])
def test_zeros_and_full_fill_every_element(dtype):
    def kernel(x):
        z = nl.full((4, 6), 3, dtype=dtype, buffer=nl.sbuf)
        out = nl.ndarray((4, 6), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, z)
        return out
    got = simulate(kernel, rand((1, 1)))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(F32), np.full((4, 6), 3, F32))


def test_fp32_copy_keeps_every_bit_and_its_own_values():
    """nl.copy fp32 -> fp32: the Scalar engine's fp32 pass with scale 1 keeps every bit (-0.0,
    NaN payloads, denormals); the copy keeps its values when x changes afterwards."""
    bits = np.array([[0x80000000, 0x7FC12345, 0xFF800001, 0x00000001, 0x3F800000, 0x7F7FFFFF]],
                    np.uint32)
    a = np.repeat(bits, 4, axis=0).view(F32)

    def kernel(x):
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, :], src=x)       # (a partial-view write: copied now)
        c = nl.copy(t)
        nisa.memset(dst=t, value=5.0)           # the source tile changes after the copy
        o1 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, c)
        nl.store(o2, t)
        return o1, o2
    c, t = simulate(kernel, a)
    np.testing.assert_array_equal(c.view(np.uint32), np.repeat(bits, 4, axis=0))
    np.testing.assert_array_equal(t, np.full((4, 6), 5, F32))
