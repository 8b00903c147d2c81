"""Numerics of the ScalarE activation functions against float64 references (math.erf/erfc) and the
documented ScalarE sin behaviour; ALU operator rules from the doc pages (generation-only
operators, bitvec dtypes, operands of unary and unused operators).

Sources: aws-neuron-sdk nki/api/nki.api.shared.rst (ALU operators, activation functions and the
note on sin, engine selection), nki/api/nki/isa/__init__.py (tensor_tensor, tensor_scalar,
scalar_tensor_tensor, tensor_tensor_scan, tensor_scalar_reduce), nki/api/nki/language/__init__.py
(abs_max, abs_min, sin).
"""
import math

import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import ArgumentError, DtypeError, UnsupportedError
from conftest import simulate, tile_out
from _tiles import sb

F32 = np.float32
LOC = r" \(test_numerics_docs\.py:\d+\)$"
SQRT2 = math.sqrt(2.0)


def act(x, op, target="trn2", **kw):
    """nisa.activation(op) of a (P, F) float32 array, into float32."""
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d, op, sb(x), **kw)
        return tile_out(d)
    return simulate(kernel, x, target=target)


def points():
    """float32 inputs over the whole range: tiny, moderate, large, both signs, and 0."""
    mag = np.concatenate([np.geomspace(1e-30, 1e-3, 200), np.linspace(1e-3, 10, 1400),
                          np.geomspace(10, 1e4, 47)])
    x = np.concatenate([-mag[::-1], mag, [0.0]]).astype(F32)
    return x[: (x.size // 128) * 128].reshape(128, -1)


def _v(f):
    return np.vectorize(f, otypes=[np.float64])


_erf, _erfc = _v(math.erf), _v(math.erfc)


def _sig(z):
    """1 / (1 + exp(-z)) in float64 (exp overflowing to inf gives 0)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(z, np.float64)))


# float64 references written from the definitions, in forms that stay accurate in relative terms
# in the tails (erfc, not 1 + erf; sigmoid(-z) for 1 - sigmoid(z)).
REF = {
    "erf": _erf,
    "gelu": lambda x: 0.5 * x * _erfc(-x / SQRT2),
    "gelu_dx": lambda x: 0.5 * _erfc(-x / SQRT2) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
    "gelu_apprx_tanh": lambda x: x * _sig(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)),
    "gelu_apprx_sigmoid": lambda x: x * _sig(1.702 * x),
    "gelu_apprx_sigmoid_dx": lambda x: _sig(1.702 * x) + 1.702 * x * _sig(1.702 * x) * _sig(-1.702 * x),
    "silu_dx": lambda x: _sig(x) * (1 + x * _sig(-x)),
    "erf_dx": lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x),
}


@pytest.mark.parametrize("fname", sorted(REF))
def test_activation_accurate_in_relative_terms_over_the_whole_range(fname):
    """Within 1 ulp of fp32 of the float64 value wherever it is a normal fp32 number (tails,
    tiny inputs, zero crossings included)."""
    x = points()
    got = act(x, getattr(nl, fname)).astype(np.float64)
    with np.errstate(all="ignore"):
        want = REF[fname](x.astype(np.float64))
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(F32).tiny) & (np.abs(want) < 3e38)
    ulp = np.spacing(np.abs(want[normal]).astype(F32)).astype(np.float64)
    assert np.max(np.abs(got[normal] - want[normal]) / ulp) <= 1.0


def test_erf_near_zero_has_the_right_sign_and_size():
    """Issue 11: erf(1e-8) came out negative, erf(1e-7) 27% low; erf(x) = 2x/sqrt(pi) there."""
    x = np.array([[1e-8, -1e-8, 1e-7, -1e-7, 1e-20, 3e-38, 0.0, -0.0]], F32)
    got = act(x, nl.erf)
    want = (2 / math.sqrt(math.pi) * x.astype(np.float64)).astype(F32)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[0, 1]) and got[0, 0] > 0


def test_gelu_negative_tail_matches_the_exact_value():
    """Issue 11: abs error up to 4.5e-7 where the exact value is 1e-8: now ~1e-7 relative."""
    x = np.array([[-5.0, -6.0, -7.0, -8.0, -9.0, -10.0, -12.0, -13.0]], F32)
    want = 0.5 * x.astype(np.float64) * _erfc(-x.astype(np.float64) / SQRT2)
    for op in (nl.gelu,):
        got = act(x, op).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1.2e-7, atol=0)


@pytest.mark.parametrize("fname, at_minus_inf, at_plus_inf", [
    ("erf", -1.0, 1.0), ("gelu", 0.0, np.inf), ("gelu_dx", 0.0, 1.0), ("gelu_apprx_tanh", 0.0, np.inf),
    ("gelu_apprx_sigmoid", 0.0, np.inf), ("gelu_apprx_sigmoid_dx", 0.0, 1.0), ("silu_dx", 0.0, 1.0),
    ("erf_dx", 0.0, 0.0)])
def test_activation_limits_at_infinity(fname, at_minus_inf, at_plus_inf):
    """The docs give these functions the valid input range [-inf, inf]: their limits, not NaN."""
    got = act(np.array([[-np.inf, np.inf, np.nan]], F32), getattr(nl, fname))
    np.testing.assert_array_equal(got[0, :2], np.array([at_minus_inf, at_plus_inf], F32))
    assert np.isnan(got[0, 2])


# ---- sin: no range reduction on ScalarE, range reduction in nl.sin ---------------------------

def _cubic(x):
    """Decision (isa.alu._sin): the cubic Taylor polynomial of sin at +-pi beyond +-pi."""
    d = x - math.pi if x > 0 else x + math.pi
    return -d + d ** 3 / 6


def test_activation_sin_extrapolates_a_cubic_outside_pi():
    """Docs: "nki.isa.activation(op=nl.sin) extrapolates a cubic outside [-PI, PI] and sin(9.0)
    returns ~27.65 (not ~0.41)"."""
    got = act(np.array([[9.0, -9.0]], F32), nl.sin)
    assert abs(got[0, 0] - 27.65) < 0.01 and abs(got[0, 1] + 27.65) < 0.01
    x = np.array([[3.5, 4.0, 6.0, 12.5, -3.5, -5.0, -20.0, 100.0]], F32)
    want = np.array([[_cubic(float(v)) for v in x[0]]]).astype(F32)
    np.testing.assert_allclose(act(x, nl.sin), want, rtol=1e-6)


def test_activation_sin_is_sin_inside_its_valid_range():
    """Valid input range [-PI, PI]: sin there (float64 sin rounded once), continuous at the ends."""
    x = np.linspace(-math.pi, math.pi, 128 * 8).astype(F32).reshape(128, 8)
    x = np.clip(x, -math.pi, math.pi).astype(F32)
    inside = np.abs(x.astype(np.float64)) <= math.pi
    got = act(x, nl.sin)
    np.testing.assert_array_equal(got[inside], np.sin(x.astype(np.float64)[inside]).astype(F32))
    edge = act(np.array([[np.nextafter(F32(math.pi), F32(4))]], F32), nl.sin)
    assert abs(edge[0, 0] - math.sin(float(np.nextafter(F32(math.pi), F32(4))))) < 1e-12


def test_nl_sin_reduces_the_range_first():
    """Docs: "nki.language.sin applies additional instructions to perform range reduction before
    the activation, so it stays accurate over the full input domain"."""
    x = np.array([[9.0, -9.0, 100.0, -1000.0, 12345.5, 0.5, 3.0, 1e-8]], F32)

    def kernel(h):
        t = nl.sin(nl.load(h))
        o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(o, t)
        return o
    got = simulate(kernel, x).astype(np.float64)
    want = np.sin(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-7)
    assert abs(got[0, 0] - 0.412) < 1e-3


# ---- ALU rules from the docs ----------------------------------------------------------------

def ints(shape, dtype=np.int32):
    return (np.arange(np.prod(shape)) % 7 - 3).reshape(shape).astype(dtype)


def _run(body, *arrays, target="trn2", dst_dtype=None):
    """body(dst, *tiles) on SBUF copies of ``arrays``; returns dst (dtype dst_dtype or arrays[0]'s)."""
    def kernel(*hbm):
        d = nl.ndarray(hbm[0].shape, dtype=dst_dtype or hbm[0].dtype, buffer=nl.sbuf)
        body(d, *[sb(h) for h in hbm])
        return tile_out(d)
    return simulate(kernel, *arrays, target=target)


GEN_ONLY = [
    ("nisa.tensor_tensor", "op", lambda d, a, op: nisa.tensor_tensor(d, a, a, op)),
    ("nisa.tensor_scalar", "op0", lambda d, a, op: nisa.tensor_scalar(d, a, op, 2.0)),
    ("nisa.tensor_scalar", "op1", lambda d, a, op: nisa.tensor_scalar(d, a, nl.add, 1.0, op1=op, operand1=2.0)),
    ("nisa.scalar_tensor_tensor", "op0",
     lambda d, a, op: nisa.scalar_tensor_tensor(d, a, op, 2.0, nl.add, a)),
    ("nisa.scalar_tensor_tensor", "op1",
     lambda d, a, op: nisa.scalar_tensor_tensor(d, a, nl.add, 2.0, op, a)),
    ("nisa.tensor_tensor_scan", "op0",
     lambda d, a, op: nisa.tensor_tensor_scan(d, a, a, 0.0, op, nl.add)),
]


@pytest.mark.parametrize("opn, param, body", GEN_ONLY, ids=[f"{o}-{p}" for o, p, _ in GEN_ONLY])
@pytest.mark.parametrize("op, name", [(nl.abs_max, "abs_max"), (nl.abs_min, "abs_min")])
@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_abs_max_abs_min_need_trn3(opn, param, body, op, name, target):
    """Docs (nl.abs_max, nl.abs_min): "Available only on NeuronCore-v4 (trn3) and newer"."""
    x = np.array([[1.0, -5.0, 2.0, -0.5]], F32)
    esc = opn.replace(".", r"\.")
    with pytest.raises(UnsupportedError, match=rf"^{esc}: {param} {name} needs trn3 or "
                                               rf"newer, not supported on {target}" + LOC):
        _run(lambda d, a: body(d, a, op), x, target=target)


def test_abs_max_runs_on_trn3():
    x = np.array([[1.0, -5.0, 2.0, -0.5]], F32)
    got = _run(lambda d, a: nisa.tensor_scalar(d, a, nl.abs_max, -3.0), x, target="trn3")
    np.testing.assert_array_equal(got, np.array([[-3.0, -5.0, -3.0, -3.0]], F32))
    got = _run(lambda d, a: nisa.tensor_scalar(d, a, nl.abs_min, -3.0), x, target="trn3")
    np.testing.assert_array_equal(got, np.array([[1.0, -3.0, 2.0, -0.5]], F32))


@pytest.mark.parametrize("op, name", [(nl.bitwise_and, "bitwise_and"), (nl.bitwise_or, "bitwise_or"),
                                      (nl.bitwise_xor, "bitwise_xor"), (nl.left_shift, "left_shift"),
                                      (nl.right_shift, "right_shift")])
def test_bitvec_needs_an_integer_dst(op, name):
    """Docs (tensor_tensor, tensor_scalar): for bitvec operators "the input/output data types must
    be integer types"."""
    a = ints((4, 8))
    with pytest.raises(DtypeError, match=rf"^nisa\.tensor_tensor: dst dtype float32 is not an integer dtype, "
                                         rf"which bitvec op {name} needs" + LOC):
        _run(lambda d, t: nisa.tensor_tensor(d, t, t, op), a, dst_dtype=nl.float32)
    with pytest.raises(DtypeError, match=rf"^nisa\.tensor_scalar: dst dtype bfloat16 is not an integer dtype, "
                                         rf"which bitvec op {name} needs" + LOC):
        _run(lambda d, t: nisa.tensor_scalar(d, t, op, 1), a, dst_dtype=nl.bfloat16)
    # integer dst: fine (bit patterns), into a narrower integer dtype too
    got = _run(lambda d, t: nisa.tensor_scalar(d, t, op, 1), a, dst_dtype=nl.int32)
    ref = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
           "left_shift": np.left_shift,
           "right_shift": lambda x, s: (x.view(np.uint32) >> np.uint32(s)).view(np.int32)}[name]
    np.testing.assert_array_equal(got, ref(a, 1))


def test_bitvec_tensor_scalar_operands_must_be_integers():
    """Decision (docs: bitvec "input elements are treated as bit patterns without any data type
    casting"): a float tensor operand or a float scalar operand raises DtypeError."""
    a = ints((4, 8))
    f = np.full((4, 1), 3.0, F32)
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_scalar: operand0 dtype float32 is not an integer "
                                         r"dtype, which bitvec op bitwise_and needs" + LOC):
        _run(lambda d, t, o: nisa.tensor_scalar(d, t, nl.bitwise_and, o), a, f)
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_scalar: operand0 3\.5 is a float; bitvec op "
                                         r"bitwise_and needs an integer scalar or tile" + LOC):
        _run(lambda d, t: nisa.tensor_scalar(d, t, nl.bitwise_and, 3.5), a)
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_scalar: operand1 2\.0 is a float; bitvec op "
                                         r"left_shift needs an integer scalar or tile" + LOC):
        _run(lambda d, t: nisa.tensor_scalar(d, t, nl.left_shift, 1, op1=nl.bitwise_or, operand1=2.0), a)
    i = np.full((4, 1), 6, np.int32)
    got = _run(lambda d, t, o: nisa.tensor_scalar(d, t, nl.bitwise_and, o), a, i)
    np.testing.assert_array_equal(got, a & 6)


@pytest.mark.parametrize("op, name", [(nl.abs, "abs"), (nl.square, "square"), (nl.relu, "relu"),
                                      (nl.rsqrt, "rsqrt"), (nl.reciprocal, "reciprocal")])
def test_unary_tensor_scalar_operand_must_be_none_or_zero(op, name):
    """Docs (tensor_scalar operand0): "Must be None or 0 when op0 is a unary operator"."""
    x = np.array([[4.0, 0.25, 9.0, 1.0]], F32)
    for bad, shown in ((1.0, r"1\.0"), (2, "2"), (-0.5, r"-0\.5")):
        with pytest.raises(ArgumentError, match=rf"^nisa\.tensor_scalar: operand0 must be None or 0 when op0 "
                                                rf"{name} is a unary operator, got {shown}" + LOC):
            _run(lambda d, t: nisa.tensor_scalar(d, t, op, bad), x)
    with pytest.raises(ArgumentError, match=rf"^nisa\.tensor_scalar: operand0 must be None or 0 when op0 "
                                            rf"{name} is a unary operator, got a tensor of shape \(1, 1\)" + LOC):
        _run(lambda d, t, o: nisa.tensor_scalar(d, t, op, o), x, np.ones((1, 1), F32))
    with pytest.raises(ArgumentError, match=rf"^nisa\.tensor_scalar: operand1 must be None or 0 when op1 "
                                            rf"{name} is a unary operator, got 3\.0" + LOC):
        _run(lambda d, t: nisa.tensor_scalar(d, t, nl.add, 1.0, op1=op, operand1=3.0), x)
    ref = {"abs": np.abs, "square": np.square, "relu": lambda v: np.maximum(v, 0),
           "rsqrt": lambda v: F32(1) / np.sqrt(v), "reciprocal": lambda v: F32(1) / v}[name]
    for ok in (None, 0, 0.0):
        np.testing.assert_array_equal(_run(lambda d, t: nisa.tensor_scalar(d, t, op, ok), x), ref(x))


def test_unused_op1_takes_no_operand1():
    """Docs (tensor_scalar): "op1 and operand1 are optional, but must be None (default values)
    when unused"."""
    x = np.ones((2, 3), F32)
    with pytest.raises(ArgumentError, match=r"^nisa\.tensor_scalar: operand1 must be None when op1 is None "
                                            r"\(unused\), got 0\.5" + LOC):
        _run(lambda d, t: nisa.tensor_scalar(d, t, nl.add, 1.0, operand1=0.5), x)


@pytest.mark.parametrize("op, name", [(nl.abs, "abs"), (nl.rsqrt, "rsqrt"), (nl.logical_not, "logical_not")])
def test_tensor_tensor_needs_a_binary_operator(op, name):
    """Docs (tensor_tensor): op is "Any supported *binary* operator"."""
    x = np.ones((2, 3), F32)
    with pytest.raises(ArgumentError, match=rf"^nisa\.tensor_tensor: op {name} is a unary operator; a binary "
                                            rf"operator is required" + LOC):
        _run(lambda d, t: nisa.tensor_tensor(d, t, t, op), x)


def test_activation_reciprocal_takes_no_bias_on_trn1():
    """Docs (engine selection): "nki.isa.activation(op=nl.reciprocal) doesn't support setting bias
    on NeuronCore-v2"."""
    x = np.array([[2.0, 4.0, -0.5]], F32)
    b = np.ones((1, 1), F32)

    def body(d, t, bias):
        nisa.activation(d, nl.reciprocal, t, bias=bias)
    with pytest.raises(UnsupportedError, match=r"^nisa\.activation: op reciprocal does not support a bias on "
                                               r"trn1 \(NeuronCore-v2\)" + LOC):
        _run(body, x, b, target="trn1")
    np.testing.assert_array_equal(_run(body, x, b, target="trn2"), F32(1) / (x + F32(1)))
    got = _run(lambda d, t: nisa.activation(d, nl.reciprocal, t), x, target="trn1")
    np.testing.assert_array_equal(got, F32(1) / x)


def test_tensor_tensor_int32_dispatch_needs_every_tile_int32():
    """Docs (tensor_tensor): "When all input/output tiles are int32 or uint32, the operation
    defaults to GpSimd Engine, which uses native integer arithmetic"; with a float32 dst the
    default engine is vector, which computes in float32."""
    a = np.full((2, 4), 16777217, np.int32)
    b = np.full((2, 4), 2, np.int32)
    exact = _run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add), a, b)
    np.testing.assert_array_equal(exact, np.full((2, 4), 16777219, np.int32))
    via_fp32 = _run(lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add), a, b, dst_dtype=nl.float32)
    np.testing.assert_array_equal(via_fp32, np.full((2, 4), F32(16777216) + F32(2), F32))


def test_activation_prelu_is_documented_but_not_simulated():
    """The activation table lists nl.prelu, but nisa.activation takes no slope: Decision,
    UnsupportedError (not "not an activation function")."""
    with pytest.raises(UnsupportedError, match=r"^nisa\.activation: op prelu is a documented activation "
                                               r"function nkisim does not simulate: its slope is not a "
                                               r"parameter of nisa\.activation" + LOC):
        act(np.ones((2, 2), F32), nl.prelu)
