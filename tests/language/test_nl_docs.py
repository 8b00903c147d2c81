"""nl compute functions against their doc pages: the buffer and dtype of the result, exactness for
integer data, and the documented signatures (default arguments).

Source: aws-neuron-sdk nki/api/nki/language/__init__.py (each function's docstring); integer
exactness of the instructions they issue: nki/api/nki/isa/__init__.py (tensor_copy: "bit-accurate
copy when input and output data types are the same"; tensor_tensor: int32/uint32 "native integer
arithmetic ... exact results for all 32-bit integer values").
"""
import inspect

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.language import tile as _tile
from conftest import sbuf_copy, simulate

F32, BF16, I32 = np.float32, ml_dtypes.bfloat16, np.int32
LOC = r" \(test_nl_docs\.py:\d+\)$"
# int32 values fp32 cannot hold (beyond 2**24): any detour through fp32 changes them
BIG = np.array([[16777217, -16777219, 3, 2**30 + 1], [2**31 - 1, -2**31, 0, -5]], I32)


def run(fn, *arrays, target="trn3"):
    """fn applied to SBUF tiles of ``arrays``; returns (values, buffer, dtype) of its result."""
    info = {}

    def kernel(*hbm):
        out = fn(*[nl.load(h) for h in hbm])
        info.update(buffer=out.buffer, dtype=np.dtype(out.dtype))
        h = nl.ndarray(out.shape, dtype=out.dtype, buffer=nl.shared_hbm)
        nl.store(h, value=sbuf_copy(out))
        return h
    got = simulate(kernel, *arrays, target=target)
    return got, info["buffer"], info["dtype"]


def _psum(x):
    """x (SBUF) copied into a PSUM tile of its dtype."""
    p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=x)
    return p


# (name, function of the SBUF tiles, inputs, NumPy reference): results are bit-exact for integers.
EXACT_INT = [
    ("copy", lambda x: nl.copy(x), (BIG,), lambda x: x),
    ("copy from psum", lambda x: nl.copy(_psum(x)), (BIG,), lambda x: x),
    ("load", lambda x: x, (BIG,), lambda x: x),
    ("broadcast_to", lambda x: nl.broadcast_to(x[:, 0:1], (2, 4)), (BIG,), lambda x: np.repeat(x[:, 0:1], 4, 1)),
    ("where", lambda x: nl.where(nl.greater(x, 0.0, dtype=nl.float32), x, x), (BIG,), lambda x: x),
    ("where scalar", lambda x: nl.where(nl.greater(x, 0.0, dtype=nl.float32), x, 7), (BIG,),
     lambda x: np.where(x > 0, x, 7).astype(I32)),
    ("transpose", lambda x: nl.transpose(x), (BIG,), lambda x: x.T),
    ("expand_dims", lambda x: nl.copy(nl.expand_dims(x, 1)), (BIG,), lambda x: x[:, None, :]),
    ("ceil", nl.ceil, (BIG,), lambda x: x), ("floor", nl.floor, (BIG,), lambda x: x),
    ("trunc", nl.trunc, (BIG,), lambda x: x),
    ("add", nl.add, (BIG, BIG[::-1].copy()), lambda x, y: (x.astype(np.int64) + y).astype(I32)),
    ("subtract", nl.subtract, (BIG, BIG[::-1].copy()), lambda x, y: (x.astype(np.int64) - y).astype(I32)),
    ("multiply", nl.multiply, (BIG, BIG[::-1].copy()), lambda x, y: (x.astype(np.int64) * y).astype(I32)),
    ("maximum", nl.maximum, (BIG, BIG[::-1].copy()), np.maximum),
    ("minimum", nl.minimum, (BIG, BIG[::-1].copy()), np.minimum),
    ("bitwise_and", nl.bitwise_and, (BIG, BIG[::-1].copy()), np.bitwise_and),
    ("bitwise_or", nl.bitwise_or, (BIG, BIG[::-1].copy()), np.bitwise_or),
    ("bitwise_xor", nl.bitwise_xor, (BIG, BIG[::-1].copy()), np.bitwise_xor),
    ("invert", nl.invert, (BIG,), np.invert),
    ("left_shift", lambda x: nl.left_shift(x, 3), (BIG,), lambda x: x << 3),
    ("right_shift", lambda x: nl.right_shift(x, 3), (BIG,), lambda x: (x.view(np.uint32) >> 3).view(I32)),
]


@pytest.mark.parametrize("name, fn, inputs, ref", EXACT_INT, ids=[r[0] for r in EXACT_INT])
def test_integer_results_are_exact(name, fn, inputs, ref):
    got, buffer, dtype = run(fn, *inputs)
    want = ref(*inputs)
    assert dtype == np.dtype(I32)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


# (name, function, inputs, documented buffer, documented dtype of the result)
X = np.linspace(-3, 3, 32, dtype=F32).reshape(4, 8)
XB = X.astype(BF16)
POS = np.linspace(0.5, 4, 32, dtype=F32).reshape(4, 8)
RESULTS = [
    # "a new tile with the same layout as x, allocated on SBUF"; dtype defaults to x's
    ("copy", nl.copy, (XB,), nl.sbuf, BF16),
    ("copy psum", lambda x: nl.copy(_psum(x)), (X,), nl.sbuf, F32),
    ("copy dtype", lambda x: nl.copy(x, dtype=nl.bfloat16), (X,), nl.sbuf, BF16),
    # element-wise: dtype "default to be the same as the data type of the input tile"
    ("exp", nl.exp, (XB,), nl.sbuf, BF16), ("sin", nl.sin, (XB,), nl.sbuf, BF16),
    ("gelu", nl.gelu, (XB,), nl.sbuf, BF16), ("abs", nl.abs, (XB,), nl.sbuf, BF16),
    ("rsqrt", nl.rsqrt, (POS.astype(BF16),), nl.sbuf, BF16), ("floor", nl.floor, (XB,), nl.sbuf, BF16),
    ("sqrt dtype", lambda x: nl.sqrt(x, dtype=nl.float32), (POS.astype(BF16),), nl.sbuf, F32),
    ("add", nl.add, (XB, XB), nl.sbuf, BF16), ("add scalar", lambda x: nl.add(x, 1.5), (XB,), nl.sbuf, BF16),
    # equal: "Defaults to the input tile dtype. Use dtype=nl.uint8 for a boolean-like result."
    ("equal", nl.equal, (XB, XB), nl.sbuf, BF16),
    ("equal uint8", lambda x, y: nl.equal(x, y, dtype=nl.uint8), (XB, XB), nl.sbuf, np.uint8),
    # reductions: dtype defaults to the input's
    ("sum", lambda x: nl.sum(x, axis=1), (XB,), nl.sbuf, BF16),
    ("max", lambda x: nl.max(x, axis=1, keepdims=True), (XB,), nl.sbuf, BF16),
    ("mean", lambda x: nl.mean(x, axis=1), (XB,), nl.sbuf, BF16),
    ("var", lambda x: nl.var(x, axis=1), (XB,), nl.sbuf, BF16),
    ("softmax", lambda x: nl.softmax(x, axis=1), (XB,), nl.sbuf, BF16),
    ("where", lambda x: nl.where(nl.greater(x, 0.0), x, 0.0), (XB,), nl.sbuf, BF16),
    ("broadcast_to", lambda x: nl.broadcast_to(x[:, 0:1], (4, 8)), (XB,), nl.sbuf, BF16),
    # matmul: the docs' example "result_psum = nl.matmul(x, y, transpose_x=True)  # x.T @ y, in PSUM"
    ("matmul", lambda x, y: nl.matmul(x, y, transpose_x=True), (X, X), nl.psum, F32),
    # transpose: the docs' example "result_psum = nl.transpose(x)"
    ("transpose", nl.transpose, (XB,), nl.psum, BF16),
    ("transpose dtype", lambda x: nl.transpose(x, dtype=nl.float32), (XB,), nl.psum, F32),
]


def test_load_transpose2d_is_an_exact_sbuf_tile():
    """load_transpose2d: "a new tile on SBUF with values from src 2D-transposed"."""
    info = {}

    def kernel(h):
        t = nl.load_transpose2d(h)
        info.update(buffer=t.buffer, dtype=np.dtype(t.dtype))
        o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(o, value=t)
        return o
    got = simulate(kernel, BIG)
    assert info == {"buffer": nl.sbuf, "dtype": np.dtype(I32)}
    np.testing.assert_array_equal(got, BIG.T)


@pytest.mark.parametrize("name, fn, inputs, buffer, dtype", RESULTS, ids=[r[0] for r in RESULTS])
def test_result_buffer_and_dtype(name, fn, inputs, buffer, dtype):
    _, got_buffer, got_dtype = run(fn, *inputs)
    assert got_buffer is buffer
    assert got_dtype == np.dtype(dtype)


def test_copy_changes_dtype_through_fp32_rounding_once():
    """copy with another dtype: "may result in precision loss" (values converted, rounded once)."""
    got, _, dtype = run(lambda x: nl.copy(x, dtype=nl.float32), BIG)
    assert dtype == np.dtype(F32)
    np.testing.assert_array_equal(got, BIG.astype(F32))
    x = np.array([[1.00390625, 3.14159, -2.5e-3, 65504.0]], F32)
    got, _, _ = run(lambda t: nl.copy(t, dtype=nl.bfloat16), x)
    np.testing.assert_array_equal(got.view(np.uint16), x.astype(BF16).view(np.uint16))


def test_copy_issues_one_instruction_and_float32_keeps_every_bit():
    x = np.array([[np.nan, -0.0, 1e-45, 3.4e38]], F32)
    got, _, _ = run(nl.copy, x)
    np.testing.assert_array_equal(got.view(np.uint32), x.view(np.uint32))


# Documented signatures (parameters and defaults), from the doc page of each function.
SIGNATURES = {
    "copy": "x, dtype=None", "sin": "x, dtype=None", "exp": "x, dtype=None", "gelu": "x, dtype=None",
    "rsqrt": "x, dtype=None", "ceil": "x, dtype=None", "add": "x, y, dtype=None",
    "abs_max": "x, y, dtype=None", "equal": "x, y, dtype=None", "power": "x, y, dtype=None",
    "sum": "x, axis, dtype=None, keepdims=False", "max": "x, axis, dtype=None, keepdims=False",
    "mean": "x, axis, dtype=None, keepdims=False", "var": "x, axis, dtype=None, keepdims=False",
    "all": "x, axis, dtype=None", "softmax": "x, axis=-1, dtype=None",
    "rms_norm": "x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None",
    "where": "condition, x, y, dtype=None", "dropout": "x, rate, dtype=None",
    "broadcast_to": "x, shape, dtype=None", "transpose": "x, dtype=None",
    "matmul": "x, y, transpose_x=False", "load_transpose2d": "src, dtype=None",
    "gather_flattened": "data, indices, axis=0, dtype=None", "expand_dims": "x, axis",
    "load": "src, dtype=None", "store": "dst, value", "random_seed": "seed",
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_matches_the_doc_page(name):
    fn = getattr(nl, name)
    fn = _tile._FUNCS.get(name, fn) if isinstance(fn, type(nl.add)) else fn
    assert str(inspect.signature(fn))[1:-1] == SIGNATURES[name]
