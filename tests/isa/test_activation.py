"""ScalarE activation / activation_reduce against float64 formulas (math.erf for the exact GELU
family) and the accumulator semantics of reduce_cmd."""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
import nkisim.trace
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


# ---- activate2 (trn3) -------------------------------------------------------------------------------

F32 = np.float32


def act2(x, op, imm0, imm1, op0, op1, dst_dtype=np.float32, target="trn3", tiles=(), **kw):
    """activate2 on x; imm0/imm1 (and relu_param) given as arrays go on chip as (P, 1) tiles."""
    named = {"imm0": imm0, "imm1": imm1, **{k: kw.pop(k) for k in tiles}}
    arrays = {k: v for k, v in named.items() if isinstance(v, np.ndarray)}

    def kernel(x, *cols):
        on_chip = dict(zip(arrays, (sb(c) for c in cols)))
        vals = {k: on_chip.get(k, v) for k, v in named.items()}
        d = nl.ndarray(x.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.activate2(dst=d, op=op, data=sb(x), op0=op0, op1=op1, **vals, **kw)
        return tile_out(d)
    return simulate(kernel, x, *arrays.values(), target=target)


# (op0, op1, reverse0, reverse1) -> the fp32 stage-1 formula from the docs' pseudocode
STAGE1 = {
    ("multiply", "add", False, False): lambda x, a, b: x * a + b,
    ("multiply", "add", True, True): lambda x, a, b: b + a * x,
    ("multiply", "subtract", False, False): lambda x, a, b: x * a - b,
    ("multiply", "subtract", False, True): lambda x, a, b: b - x * a,
    ("multiply", "bypass", False, False): lambda x, a, b: x * a,
    ("add", "bypass", False, False): lambda x, a, b: x + a,
    ("subtract", "bypass", False, False): lambda x, a, b: x - a,
    ("subtract", "bypass", True, False): lambda x, a, b: a - x,
    ("bypass", "bypass", False, False): lambda x, a, b: x,
}


@pytest.mark.parametrize("key", sorted(STAGE1), ids=lambda k: "-".join(map(str, k)))
@pytest.mark.parametrize("column", [False, True])
def test_activate2_tensor_scalar_stage_bit_for_bit(rng, key, column):
    op0, op1, rev0, rev1 = key
    x = (rng.standard_normal((8, 2, 5)) * 100).astype(F32)
    a = rng.standard_normal((8, 1)).astype(F32) if column else F32(1.7)
    b = rng.standard_normal((8, 1)).astype(F32) if column else F32(-0.3)
    got = act2(x, nl.copy, a, b, getattr(nl, op0), getattr(nl, op1), reverse0=rev0, reverse1=rev1)
    a3 = np.reshape(a, (-1, 1, 1)) if column else a
    b3 = np.reshape(b, (-1, 1, 1)) if column else b
    want = STAGE1[key](x, a3, b3).astype(F32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_activate2_doc_example_gelu_and_bf16(rng):
    x = rng.uniform(-3, 3, (128, 64)).astype(F32)
    got = act2(x, nl.gelu, 2.0, 0.5, nl.multiply, nl.add)
    z = (x * F32(2) + F32(0.5)).astype(np.float64)
    want = FORMULAS["gelu"](z)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    got16 = act2(x, nl.square, 2.0, 0.5, nl.multiply, nl.add, dst_dtype=BF16)
    np.testing.assert_array_equal(got16.view(np.uint16), np.square(x * F32(2) + F32(0.5)).astype(BF16).view(np.uint16))


def test_activate2_prelu_reads_relu_param(rng):
    x = rng.standard_normal((4, 16)).astype(F32)
    got = act2(x, nl.prelu, 1.0, 0.0, nl.multiply, nl.bypass, relu_param=0.25)
    np.testing.assert_array_equal(got, np.where(x < 0, F32(0.25) * x, x))
    alpha = np.array([[0.0], [0.5], [-1.0], [2.0]], F32)
    got = act2(x, nl.prelu, 1.0, 0.0, nl.bypass, nl.bypass, relu_param=alpha, tiles=("relu_param",))
    np.testing.assert_array_equal(got, np.where(x < 0, alpha * x, x))
    np.testing.assert_array_equal(act2(x, nl.relu, 1.0, 0.0, nl.bypass, nl.bypass, relu_param=0.25),
                                  np.maximum(x, 0))       # only prelu reads relu_param


def _seq(fn, acc, v):
    """The docs' loop: accumulator = reduce_op(accumulator, v[i]), in fp32, per partition."""
    out = []
    for row, a in zip(v, acc):
        a = F32(a)
        for e in row:
            a = F32(fn(a, F32(e)))
        out.append(a)
    return np.array(out, F32)


REDUCE2 = {"add": (nl.add, lambda a, e: a + e, 0.0), "maximum": (nl.maximum, max, -np.inf),
           "minimum": (nl.minimum, min, np.inf),
           "abs_max": (nl.abs_max, lambda a, e: a if abs(a) > abs(e) else e, 0.0),
           "abs_min": (nl.abs_min, lambda a, e: a if abs(a) < abs(e) else e, np.inf)}


@pytest.mark.parametrize("rname", sorted(REDUCE2))
def test_activate2_reduce_ops_and_chaining(rng, rname):
    tok, fn, ident = REDUCE2[rname]
    x = (rng.standard_normal((4, 37)) * 1e3).astype(F32)
    y = (rng.standard_normal((4, 11)) * 1e-3).astype(F32)

    def kernel(x, y):
        d1 = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        d2 = nl.ndarray(y.shape, dtype=nl.float32, buffer=nl.sbuf)
        r1 = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        r2 = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.psum)
        nisa.activate2(d1, nl.copy, sb(x), 1.0, 0.0, nl.bypass, nl.bypass, reduce_op=tok,
                       reduce_res=r1, reduce_cmd=RC.reset_reduce)
        nisa.activate2(d2, nl.copy, sb(y), -1.0, 0.0, nl.multiply, nl.bypass, reduce_op=tok,   # no reduce_res
                       reduce_cmd=RC.reduce)
        nisa.activation(d2, nl.copy, sb(y), reduce_res=r2)       # the shared accumulator, read out
        return tile_out(r1, r2)
    r1, r2 = simulate(kernel, x, y, target="trn3")
    want1 = _seq(fn, np.full(4, ident), x)             # fp32 results, not the bf16 dst
    np.testing.assert_array_equal(r1[:, 0], want1)
    np.testing.assert_array_equal(r2[:, 0], _seq(fn, want1, -y))


def test_activate2_reset_and_idle(rng):
    x = rng.standard_normal((4, 8)).astype(F32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = [nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf) for _ in range(3)]
        nisa.activate2(d, nl.copy, sb(x), 1.0, 0.0, nl.bypass, nl.bypass, reduce_op=nl.add, reduce_res=r[0],
                       reduce_cmd=RC.reset_reduce)
        nisa.activate2(d, nl.copy, sb(x), 1.0, 0.0, nl.bypass, nl.bypass, reduce_res=r[1])          # idle
        nisa.activate2(d, nl.copy, sb(x), 1.0, 0.0, nl.bypass, nl.bypass, reduce_op=nl.minimum,
                       reduce_res=r[2], reduce_cmd=RC.reset)
        return tile_out(tuple(r))
    r0, r1, r2 = simulate(kernel, x, target="trn3")
    np.testing.assert_array_equal(r0[:, 0], _seq(lambda a, e: a + e, np.zeros(4), x))
    np.testing.assert_array_equal(r1, r0)
    np.testing.assert_array_equal(r2, np.full((4, 1), np.inf, F32))


def test_activate2_rules():
    x = np.ones((2, 3), F32)
    a2 = r"^nisa\.activate2: "
    with pytest.raises(UnsupportedError, match=a2 + r"needs trn3 or newer, not supported on trn2" + LOC):
        act2(x, nl.copy, 1.0, 0.0, nl.multiply, nl.add, target="trn2")
    with pytest.raises(NkiError, match=a2 + r"\(op0, op1\) \(add, add\) is not supported; expected one of "
                                        r"\(multiply, add\), \(multiply, subtract\), \(multiply, bypass\), "
                                        r"\(add, bypass\), \(subtract, bypass\), \(bypass, bypass\)" + LOC):
        act2(x, nl.copy, 1.0, 0.0, nl.add, nl.add)
    with pytest.raises(NkiError, match=a2 + r"op1 add requires op0 to be set; op0 is bypass" + LOC):
        act2(x, nl.copy, 1.0, 0.0, nl.bypass, nl.add)
    with pytest.raises(NkiError, match=a2 + r"reverse0 requires op0 to be set; op0 is bypass" + LOC):
        act2(x, nl.copy, 1.0, 0.0, None, None, reverse0=True)
    with pytest.raises(NkiError, match=a2 + r"reverse1 requires op1 to be set; op1 is bypass" + LOC):
        act2(x, nl.copy, 1.0, 0.0, nl.multiply, nl.bypass, reverse1=True)
    with pytest.raises(UnsupportedError, match=a2 + r"reduce_cmd=load_reduce is not supported \(no initial "
                                                r"value\)" + LOC):
        act2(x, nl.copy, 1.0, 0.0, nl.bypass, nl.bypass, reduce_op=nl.add, reduce_cmd=RC.load_reduce)
    with pytest.raises(NkiError, match=a2 + r"reduce_cmd reduce needs a reduce_op" + LOC):
        act2(x, nl.copy, 1.0, 0.0, nl.bypass, nl.bypass, reduce_cmd=RC.reduce)
    with pytest.raises(NkiError, match=a2 + r"reduce_op subtract is not supported; expected one of add, maximum, "
                                        r"minimum, abs_max, abs_min" + LOC):
        act2(x, nl.copy, 1.0, 0.0, nl.bypass, nl.bypass, reduce_op=nl.subtract, reduce_cmd=RC.reset_reduce)
    with pytest.raises(NkiError, match=a2 + r"op frobnicate is not an activation function" ):
        act2(x, "frobnicate", 1.0, 0.0, nl.bypass, nl.bypass)
    with pytest.raises(ShapeError, match=a2 + r"imm0 must be a scalar or a \(2, 1\) tensor, got shape \(2, 3\)" + LOC):
        act2(x, nl.copy, x, 0.0, nl.multiply, nl.add)

    def kernel(x, a, b):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(d, nl.copy, sb(x), sb(a), sb(b, nl.bfloat16), nl.multiply, nl.add)
    col = np.ones((2, 1), F32)
    with pytest.raises(DtypeError, match=a2 + r"imm1 dtype bfloat16 does not match imm0 dtype float32; tensor "
                                          r"immediates must have the same dtype" + LOC):
        simulate(kernel, x, col, col, target="trn3")


def test_activate2_event():
    x = np.arange(6, dtype=F32).reshape(2, 3)

    def kernel(x, a):
        d = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        r = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(d, nl.exp, sb(x), sb(a), 0.5, nl.multiply, nl.add, reduce_op=nl.add,  # ev:act2
                       reduce_res=r, reduce_cmd=RC.reset_reduce)
        return tile_out(r)
    with nkisim.trace.record() as events:
        simulate(kernel, x, np.ones((2, 1), F32), target="trn3")
    (e,) = [e for e in events if e.op == "activate2"]
    assert (e.api, e.engine, e.location) == ("nisa.activate2", "scalar", line(__file__, "act2"))
    assert roles(e.reads) == [("data", "sbuf", (2, 3), "float32", 24), ("imm0", "sbuf", (2, 1), "float32", 8)]
    assert roles(e.writes) == [("dst", "sbuf", (2, 3), "bfloat16", 12), ("reduce_res", "sbuf", (2, 1), "float32", 8)]
    assert {k: e.options[k] for k in ("op", "imm1", "op0", "op1", "reduce_op", "reduce_cmd")} == \
        {"op": "exp", "imm1": 0.5, "op0": "multiply", "op1": "add", "reduce_op": "add", "reduce_cmd": "reset_reduce"}
