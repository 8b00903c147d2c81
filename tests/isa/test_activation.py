"""ScalarE activation / activation_reduce against float64 formulas (math.erf for the exact GELU
family) and the accumulator semantics of reduce_cmd."""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, EngineError, MemorySpaceError, NkiError, ShapeError, UnsupportedError
from conftest import simulate, tile_out
from _tiles import ps, sb
from _events import line, record, roles

BF16 = ml_dtypes.bfloat16
LOC = r" \(test_activation\.py:\d+\)$"
RC = nisa.reduce_cmd


def act(x, op, dst_dtype=np.float32, target="trn2", **kw):
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.activation(d, op, sb(x), **kw)
        return tile_out(d)
    return simulate(kernel, x, target=target)


_erf = np.vectorize(math.erf)


def _sig(x):
    return 1 / (1 + np.exp(-x))


# Reference formulas (float64). gelu/gelu_dx/erf use math.erf; *_dx are the input derivatives.
FORMULAS = {
    "copy": lambda x: x, "square": np.square, "relu": lambda x: np.maximum(x, 0), "abs": np.abs,
    "sign": np.sign, "exp": np.exp, "tanh": np.tanh, "sigmoid": _sig,
    "softplus": lambda x: np.log1p(np.exp(x)), "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "erf": _erf, "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_dx": lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "gelu_apprx_sigmoid": lambda x: x * _sig(1.702 * x),
    "gelu_apprx_sigmoid_dx": lambda x: _sig(1.702 * x) + 1.702 * x * _sig(1.702 * x) * (1 - _sig(1.702 * x)),
    "silu": lambda x: x * _sig(x), "silu_dx": lambda x: _sig(x) * (1 + x * (1 - _sig(x))),
    "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x,
    "sin": np.sin, "cos": np.cos, "arctan": np.arctan,
}
# Inputs inside each function's documented valid range.
_DOMAIN = {"log": (0.01, 50), "sqrt": (0.01, 50), "rsqrt": (0.01, 50), "reciprocal": (0.01, 50),
           "sin": (-np.pi, np.pi), "cos": (-np.pi, np.pi), "arctan": (-np.pi / 2, np.pi / 2)}


@pytest.mark.parametrize("fname", sorted(FORMULAS))
def test_activation_function_matches_formula(fname):
    lo, hi = _DOMAIN.get(fname, (-6, 6))
    x = np.linspace(lo, hi, 128 * 4, dtype=np.float32).reshape(128, 4)
    got = act(x, getattr(nl, fname)).astype(np.float64)
    want = FORMULAS[fname](x.astype(np.float64))
    # Tolerance (nki-library maxAllClose style): |got - want| <= 1e-6 * max|want|. The simulator
    # evaluates simple formulas in fp32 (a handful of ops, each rounded to 2^-24 relative) and the
    # erf/gelu family in float64 rounded once (tests/isa/test_numerics_docs.py bounds those to 1
    # ulp); measured worst case is ~5e-7 of the tile's largest value. A wrong constant or formula
    # (e.g. 1.7 for 1.702) is off by ~1e-3.
    assert np.max(np.abs(got - want)) <= 1e-6 * np.max(np.abs(want))


def test_activation_scale_bias_bf16_rounds_once(rng):
    x = rng.standard_normal((8, 16)).astype(BF16)
    s = rng.standard_normal((8, 1)).astype(np.float32)
    b = rng.standard_normal((8, 1)).astype(np.float32)

    def kernel(x, s, b):
        d = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=d, op=nl.exp, data=sb(x), bias=ps(b), scale=sb(s))
        return tile_out(d)
    want = np.exp(x.astype(np.float32) * s + b).astype(BF16)
    got = simulate(kernel, x, s, b, target="trn2")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_activation_scalar_scale_and_bias_on_trn2(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    got = act(x, nl.copy, scale=2.5, bias=-1.0)
    np.testing.assert_array_equal(got, x * np.float32(2.5) + np.float32(-1))


def test_activation_scalar_bias_needs_trn2():
    x = np.ones((4, 5), np.float32)
    with pytest.raises(UnsupportedError, match=r"^nisa\.activation: a scalar bias needs trn2 or newer; on trn1 "
                                               r"pass a \(4, 1\) tensor" + LOC):
        act(x, nl.copy, bias=1.0, target="trn1")


def test_activation_bias_tensor_on_trn1(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    b = np.arange(4, dtype=np.float32).reshape(4, 1)

    def kernel(x, b):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.activation(d, nl.relu, ps(x), bias=sb(b))
        return tile_out(d)
    np.testing.assert_array_equal(simulate(kernel, x, b, target="trn1"), np.maximum(x + b, 0))


def test_activation_reduce_cmds_drive_the_scalar_accumulator(rng):
    x, y = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)

    def kernel(x, y):
        d1 = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        d2 = nl.ndarray(y.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = [nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
        nisa.activation(d1, nl.exp, sb(x), reduce_op=nl.add, reduce_res=r[0], reduce_cmd=RC.reset_reduce)
        nisa.activation(d2, nl.exp, sb(y), reduce_op=nl.add, reduce_res=r[1], reduce_cmd=RC.reduce)
        nisa.activation(d2, nl.exp, sb(y), reduce_res=r[2])                        # idle
        nisa.activation(d2, nl.exp, sb(y), reduce_res=r[3], reduce_cmd=RC.reset)   # reset only
        return tile_out(tuple(r))
    r0, r1, r2, r3 = simulate(kernel, x, y)
    sx = np.exp(x).sum(axis=1, dtype=np.float32)      # fp32 values, not the bf16-rounded dst
    sy = np.exp(y).sum(axis=1, dtype=np.float32)
    np.testing.assert_allclose(r0[:, 0], sx, rtol=1e-6)
    np.testing.assert_allclose(r1[:, 0], sx + sy, rtol=1e-6)
    np.testing.assert_array_equal(r2, r1)
    np.testing.assert_array_equal(r3, np.zeros((4, 1)))


def test_activation_reduce_res_aliasing_dst_keeps_the_reduction(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.square, sb(x), reduce_op=nl.add, reduce_res=d[:, 4:5],
                        reduce_cmd=RC.reset_reduce)
        col = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(col, nl.square, sb(x)[:, 0:1], reduce_res=col, reduce_cmd=RC.reduce)
        return tile_out(d, col)
    d, col = simulate(kernel, x)
    total = np.square(x).sum(axis=1, dtype=np.float32)
    np.testing.assert_array_equal(d[:, :4], np.square(x[:, :4]))
    np.testing.assert_allclose(d[:, 4], total, rtol=1e-6)
    np.testing.assert_allclose(col[:, 0], total + np.square(x[:, 0]), rtol=1e-6)


def test_activation_reduce_op_must_be_add():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(UnsupportedError, match=r"^nisa\.activation: reduce_op must be nl\.add, got maximum" + LOC):
        act(x, nl.exp, reduce_op=nl.max, reduce_cmd=RC.reset_reduce)


def test_activation_unknown_function():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(NkiError, match=r"^nisa\.activation: op bitwise_and is not an activation function; "
                                       r"expected one of .*" + LOC):
        act(x, nl.bitwise_and)


def test_activation_shape_rules():
    x = np.ones((2, 4), np.float32)

    def kernel(x):
        d = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.exp, sb(x))
    with pytest.raises(ShapeError, match=r"^nisa\.activation: dst has 3 elements per partition, data has 4 "
                                         r"\(shapes \(2, 3\) vs \(2, 4\)\)" + LOC):
        simulate(kernel, x)

    def kernel2(x):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.exp, sb(x), reduce_res=d[:, 0:2], reduce_cmd=RC.reset_reduce)
    with pytest.raises(ShapeError, match=r"^nisa\.activation: reduce_res must be a scalar or a \(2, 1\) tensor, "
                                         r"got shape \(2, 2\)" + LOC):
        simulate(kernel2, x)


def test_activation_data_in_hbm_rejected():
    x = np.ones((2, 4), np.float32)

    def kernel(x):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.exp, x)
    with pytest.raises(MemorySpaceError, match=r"^nisa\.activation: data is in shared_hbm \(HBM\); must be "
                                               r"in psum or sbuf" + LOC):
        simulate(kernel, x)


def _scale_bias_kernel(scale_dtype, bias_dtype):
    def kernel(x, s, b):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.copy, sb(x), bias=sb(b, bias_dtype), scale=sb(s, scale_dtype))
        return tile_out(d)
    return kernel


def test_activation_scale_tile_must_be_fp32(rng):
    """Docs: "The scale parameter must have a float32 data type"."""
    x, s, b = (rng.standard_normal(sh).astype(np.float32) for sh in ((4, 6), (4, 1), (4, 1)))
    got = simulate(_scale_bias_kernel(nl.float32, nl.float32), x, s, b)
    np.testing.assert_array_equal(got, x * s + b)
    with pytest.raises(DtypeError, match=r"^nisa\.activation: scale dtype bfloat16 must be float32" + LOC):
        simulate(_scale_bias_kernel(nl.bfloat16, nl.float32), x, s, b)


def test_activation_bias_tile_any_dtype_but_tfloat32(rng):
    """Docs: "the bias parameter can be any supported dtype except tfloat32"."""
    x, s, b = (rng.standard_normal(sh).astype(np.float32) for sh in ((4, 6), (4, 1), (4, 1)))
    got = simulate(_scale_bias_kernel(nl.float32, nl.bfloat16), x, s, b)
    np.testing.assert_array_equal(got, x * s + b.astype(BF16).astype(np.float32))

    def kernel(x):
        bias = nl.ndarray((4, 1), dtype=nl.tfloat32, buffer=nl.sbuf)
        nisa.memset(dst=bias, value=1.0)
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.copy, sb(x), bias=bias)
    with pytest.raises(DtypeError, match=r"^nisa\.activation: bias dtype tfloat32 is not supported; any dtype "
                                         r"but tfloat32" + LOC):
        simulate(kernel, x)


def test_activation_engine_keyword_must_be_scalar():
    """Decision: the docs list no engine parameter; a keyword-only engine= must be scalar or unknown."""
    x = np.array([[0.5, -1.0]], np.float32)
    for engine in (nisa.engine.scalar, nisa.engine.unknown):
        np.testing.assert_array_equal(act(x, nl.exp, engine=engine), np.exp(x))
    with pytest.raises(EngineError, match=r"^nisa\.activation: engine vector is not supported on trn2; "
                                          r"expected scalar or unknown" + LOC):
        act(x, nl.exp, engine=nisa.engine.vector)


# ---- activation_reduce --------------------------------------------------------------------------

def _act_reduce(x, op, reduce_op, target="trn2", **kw):
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        # Leave garbage in the accumulator: activation_reduce must reset it first.
        nisa.activation(d, nl.exp, sb(x), reduce_cmd=RC.reset_reduce)
        nisa.activation_reduce(d, op, sb(x), reduce_op, r, **kw)
        return tile_out(d, r)
    return simulate(kernel, x, target=target)


def test_activation_reduce_sums_free_dims(rng):
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    d, r = _act_reduce(x, nl.copy, nl.add, scale=2.0, bias=1.5)
    y = x * np.float32(2) + np.float32(1.5)
    np.testing.assert_array_equal(d, y)
    np.testing.assert_allclose(r[:, 0], y.reshape(4, 6).sum(axis=1), rtol=1e-6)


@pytest.mark.parametrize("reduce_op, ref", [(nl.maximum, np.max), (nl.max, np.max), (nl.minimum, np.min)])
def test_activation_reduce_max_min_on_trn2(rng, reduce_op, ref):
    x = -np.abs(rng.standard_normal((4, 6)).astype(np.float32)) - 1   # all negative: reset must be -inf
    d, r = _act_reduce(x, nl.copy, reduce_op)
    np.testing.assert_array_equal(r[:, 0], ref(x, axis=1))


def test_activation_reduce_trn1_only_add():
    x = np.ones((2, 3), np.float32)
    d, r = _act_reduce(x, nl.copy, nl.add, target="trn1")
    np.testing.assert_array_equal(r, [[3], [3]])
    with pytest.raises(UnsupportedError, match=r"^nisa\.activation_reduce: reduce_op maximum is not supported on trn1; "
                                       r"expected one of add" + LOC):
        _act_reduce(x, nl.copy, nl.maximum, target="trn1")


def test_activation_reduce_requires_reduce_res_tensor():
    x = np.ones((2, 3), np.float32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(d, nl.copy, sb(x), nl.add, None)
    with pytest.raises(ShapeError, match=r"^nisa\.activation_reduce: reduce_res must be a tensor, got "
                                         r"NoneType" + LOC):
        simulate(kernel, x)


# ---- the instruction: keywords and events ----------------------------------------------------

def test_activation_engine_is_keyword_only_and_misspellings_raise():
    import inspect
    sig = inspect.signature(nisa.activation)
    assert list(sig.parameters)[:9] == ["dst", "op", "data", "bias", "scale", "reduce_op", "reduce_res",
                                        "reduce_cmd", "name"]
    assert sig.parameters["engine"].kind is inspect.Parameter.KEYWORD_ONLY

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.exp, sb(x), scael=2.0)  # ev:kw
    want = ("nisa.activation() got an unexpected keyword argument 'scael'; did you mean 'scale'? "
            f"({line(__file__, 'kw')})")
    with pytest.raises(TypeError, match="^" + re.escape(want) + "$"):
        simulate(kernel, np.ones((2, 3), np.float32))


@pytest.mark.parametrize("fast", [True, False])
def test_activation_event(rng, fast):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((4, 1)).astype(BF16)

    def kernel(x, b):
        d = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        r = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.exp, sb(x), bias=sb(b), scale=0.5, reduce_op=nl.add,  # ev:act
                        reduce_res=r, reduce_cmd=RC.reset_reduce)
        return tile_out(d, r)
    (d, r), ev = record(kernel, x, b, fast=fast)
    y = np.exp(x * np.float32(0.5) + b.astype(np.float32))
    np.testing.assert_array_equal(d, y.astype(BF16))
    e = ev[2]
    assert (e.op, e.api, e.engine, e.location) == ("activation", "nisa.activation", "scalar", line(__file__, "act"))
    assert roles(e.reads) == [("data", "sbuf", (4, 6), "float32", 96), ("bias", "sbuf", (4, 1), "bfloat16", 8)]
    assert roles(e.writes) == [("dst", "sbuf", (4, 6), "bfloat16", 48), ("reduce_res", "sbuf", (4, 1), "float32", 16)]
    assert {k: e.options[k] for k in ("op", "scale", "reduce_op", "reduce_cmd", "engine")} == \
        {"op": "exp", "scale": 0.5, "reduce_op": "add", "reduce_cmd": "reset_reduce", "engine": "unknown"}


def test_activation_accumulator_is_read_on_every_call(rng):
    """The ScalarE accumulator is core state: identical (memoised) calls keep adding to it."""
    x = rng.standard_normal((4, 3)).astype(np.float32)

    def kernel(x):
        s = sb(x)
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.copy, s, reduce_cmd=RC.reset)
        outs = []
        for _ in range(3):
            r = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(d, nl.copy, s, reduce_op=nl.add, reduce_res=r, reduce_cmd=RC.reduce)
            outs.append(r)
        return tile_out(tuple(outs))
    for fast in (True, False):
        out, _ = record(kernel, x, fast=fast)
        total = np.float32(0)
        for k, r in enumerate(out, 1):
            total = total + x.sum(axis=1, dtype=np.float32)
            np.testing.assert_array_equal(r[:, 0], total)


def test_activation_reduce_event():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(d, nl.copy, sb(x), nl.maximum, r)
        return tile_out(r)
    r, ev = record(kernel, x, target="trn2")
    np.testing.assert_array_equal(r, x.max(axis=1, keepdims=True))
    e = ev[1]
    assert (e.op, e.engine, e.options["reduce_op"]) == ("activation_reduce", "scalar", "maximum")
    assert roles(e.writes) == [("dst", "sbuf", (2, 3), "float32", 24), ("reduce_res", "sbuf", (2, 1), "float32", 8)]
