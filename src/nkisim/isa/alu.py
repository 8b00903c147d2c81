"""The math of the engines as data: ALU operators (Vector/GpSimd/Scalar) and ScalarE activation
functions, each a NumPy function on float32 arrays (or exact integers for bitvec ops).

Tables hold math only; which engine takes which op per generation is a hardware fact in ``arch``.
Source: aws-neuron-sdk nki/api/nki.api.shared.rst (ALU operators, activation functions);
formulas for the *_dx derivatives and gelu variants: see shared/spec/nki-api.md section 4.0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from .. import arch as _arch
from ..errors import ArgumentError, UnsupportedError

F32 = np.float32


@dataclass(frozen=True)
class AluOp:
    name: str
    fn: Callable
    kind: Literal["arith", "bitvec", "compare", "logical"]
    unary: bool = False
    identity: float | None = None      # start value for reductions and accumulators

    def __call__(self, x, y=None):
        return self.fn(x) if self.unary else self.fn(x, y)


from .dispatch import register_token_type  # noqa: E402

register_token_type(AluOp)


def _cmp(f):
    return lambda x, y: f(x, y).astype(F32)


def _logical(f):
    return lambda x, y: f(x != 0, y != 0).astype(F32)


def _abs_max(x, y):
    return np.where(np.abs(x) > np.abs(y), x, y)


def _abs_min(x, y):
    return np.where(np.abs(x) < np.abs(y), x, y)


def _rsqrt(x, y=None):
    with np.errstate(divide="ignore", invalid="ignore"):
        return (F32(1) / np.sqrt(x)).astype(F32, copy=False)


def _reciprocal(x, y=None):
    with np.errstate(divide="ignore"):
        return (F32(1) / x).astype(F32, copy=False)


def _divide(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(x, y)


def _right_shift(x, y):
    x = np.asarray(x)
    u = x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "i" else x
    return np.right_shift(u, np.asarray(y).astype(u.dtype)).view(x.dtype)


ALU = {op.name: op for op in (
    AluOp("add", np.add, "arith", identity=0.0),
    AluOp("subtract", np.subtract, "arith", identity=0.0),
    AluOp("multiply", np.multiply, "arith", identity=1.0),
    AluOp("divide", _divide, "arith"),
    AluOp("maximum", np.maximum, "arith", identity=-np.inf),
    AluOp("minimum", np.minimum, "arith", identity=np.inf),
    AluOp("power", np.power, "arith"),
    AluOp("abs_max", _abs_max, "arith", identity=0.0),
    AluOp("abs_min", _abs_min, "arith", identity=np.inf),
    AluOp("mod", np.mod, "arith"),
    AluOp("fmod", np.fmod, "arith"),
    AluOp("equal", _cmp(np.equal), "compare"),
    AluOp("not_equal", _cmp(np.not_equal), "compare"),
    AluOp("greater", _cmp(np.greater), "compare"),
    AluOp("greater_equal", _cmp(np.greater_equal), "compare"),
    AluOp("less", _cmp(np.less), "compare"),
    AluOp("less_equal", _cmp(np.less_equal), "compare"),
    AluOp("logical_and", _logical(np.logical_and), "logical", identity=1.0),
    AluOp("logical_or", _logical(np.logical_or), "logical", identity=0.0),
    AluOp("logical_xor", _logical(np.logical_xor), "logical", identity=0.0),
    AluOp("logical_not", lambda x: (x == 0).astype(F32), "logical", unary=True),
    AluOp("bitwise_and", np.bitwise_and, "bitvec", identity=-1),
    AluOp("bitwise_or", np.bitwise_or, "bitvec", identity=0),
    AluOp("bitwise_xor", np.bitwise_xor, "bitvec", identity=0),
    AluOp("invert", np.invert, "bitvec", unary=True),
    AluOp("left_shift", lambda x, y: np.left_shift(x, np.asarray(y).astype(np.asarray(x).dtype)), "bitvec"),
    AluOp("right_shift", _right_shift, "bitvec"),
    AluOp("abs", np.abs, "arith", unary=True),
    AluOp("square", np.square, "arith", unary=True),
    AluOp("relu", lambda x: np.maximum(x, F32(0)), "arith", unary=True),
    AluOp("rsqrt", _rsqrt, "arith", unary=True),
    AluOp("reciprocal", _reciprocal, "arith", unary=True),
    AluOp("negative", np.negative, "arith", unary=True),
    AluOp("bypass", lambda x, y=None: x, "arith", unary=True),
)}

# Reduction functions kernels pass where an ALU op is expected (nl.max ~ nl.maximum, ...).
_ALIASES = {"max": "maximum", "min": "minimum", "sum": "add", "amax": "maximum", "amin": "minimum",
            "prod": "multiply", "copy": "bypass", "identity": "bypass", "true_divide": "divide",
            "bitwise_not": "invert", "absolute": "abs", "sub": "subtract", "mul": "multiply"}


# ---- activation functions (ScalarE), float32 in and out ----------------------------------------

def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (F32(1) / (F32(1) + np.exp(-x))).astype(F32, copy=False)


_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_ERF_SPLIT = 2.0       # |x| below: erf(x) = x P(x^2); above: erfc(x) = exp(-x^2) / x Q(1 / x)


def _erfc_scaled(s: float) -> float:
    """x exp(x^2) erfc(x) at x = 1/s (0 <= s <= 1/2), from math.erfc, or its asymptotic series
    where exp(x^2) would overflow; 1/sqrt(pi) at s = 0."""
    if s == 0.0:
        return _INV_SQRT_PI
    x = 1.0 / s
    if x < 26.0:
        return x * math.exp(x * x) * math.erfc(x)
    total, term = 1.0, 1.0
    for n in range(1, 12):
        term *= -(2 * n - 1) / (2.0 * x * x)
        total += term
    return total * _INV_SQRT_PI


def _interpolant(f, degree: int) -> tuple:
    """Monomial coefficients (highest first) of the polynomial interpolating ``f`` on [-1, 1] at
    degree + 1 Chebyshev nodes (near-minimax for smooth ``f``)."""
    k = np.arange(degree + 1)
    u = np.cos(np.pi * (k + 0.5) / (degree + 1))
    cheb = np.polynomial.chebyshev.chebfit(u, [f(float(v)) for v in u], degree)
    return tuple(np.polynomial.chebyshev.cheb2poly(cheb)[::-1])


# erf(x) / x as a polynomial of u = (x^2 - 2) / 2 on 0 <= x <= 2: < 4e-12 relative error (so
# erfc = 1 - erf, down to erfc(2) ~ 0.005, stays within ~1e-9).
_ERF_POLY = _interpolant(lambda u: (math.erf(math.sqrt(2 * u + 2)) / math.sqrt(2 * u + 2)
                                    if u > -1 else 2 * _INV_SQRT_PI), 12)
# x exp(x^2) erfc(x) as a polynomial of u = 4 / x - 1 on x >= 2: < 3e-11 relative error.
_ERFC_POLY = _interpolant(lambda u: _erfc_scaled((u + 1) / 4), 12)


def _horner(coefs, u):
    """sum c_k u^k (coefficients highest first), in a new array."""
    p = np.full_like(u, coefs[0])
    for c in coefs[1:]:
        p *= u
        p += c
    return p


# The float64 functions below work in place on fresh arrays: on large tiles NumPy's allocations,
# not the arithmetic, dominate their cost.

def _erf_or_erfc64(x, which: str):
    """erf(x) (``which="erf"``) or erfc(x) (``"erfc"``) in float64, within ~1e-9 relative over
    the whole range (erfc's tails included): erf = x P(x^2) for |x| < 2, erfc = exp(-x^2) / x
    Q(1/x) for x >= 2 (erfc(-x) = 2 - erfc(x)), P and Q polynomials interpolating math.erf /
    math.erfc at Chebyshev nodes. NumPy has no erf."""
    x = np.asarray(x, np.float64)
    tail = ~(np.abs(x) < _ERF_SPLIT)          # NaN included: it propagates through the tail formula

    def inner(v):
        t = v * v
        t -= 2.0
        t *= 0.5
        e = _horner(_ERF_POLY, t)
        e *= v
        if which == "erfc":
            np.subtract(1.0, e, out=e)
        return e

    def outer(v):
        c = np.abs(v)
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            inv = np.reciprocal(c)
            t = inv * 4.0
            t -= 1.0
            q = _horner(_ERFC_POLY, t)
            np.multiply(c, c, out=c)
            np.negative(c, out=c)
            np.exp(c, out=c)
            c *= inv
            c *= q
        if which == "erf":
            np.subtract(1.0, c, out=c)
            return np.copysign(c, v, out=c)
        np.subtract(2.0, c, out=c, where=v < 0)
        return c

    if not tail.any():
        return inner(x)
    if tail.all():
        return outer(x)
    out = np.empty_like(x)
    body = ~tail
    out[body] = inner(x[body])
    out[tail] = outer(x[tail])
    return out


def _limits(x, y, at_minus_inf, at_plus_inf):
    """``y`` (float64, from x) with its limits at x = -inf / +inf where the formula gives inf * 0."""
    if np.isinf(x).any():
        y[x == -np.inf] = at_minus_inf
        y[x == np.inf] = at_plus_inf
    return y


def _erf(x):
    """erf in float64 (see ``_erf_or_erfc64``), rounded once to fp32: relative error within 1 ulp
    of fp32 everywhere, erf(1e-8) = 2/sqrt(pi) * 1e-8 included."""
    return _erf_or_erfc64(x, "erf").astype(F32)


def _gelu(x):
    """x * Phi(x) = 0.5 x erfc(-x / sqrt 2) in float64, rounded once: accurate in relative terms in
    the negative tail, where 1 + erf(x / sqrt 2) would cancel."""
    x = np.asarray(x, np.float64)
    y = _erf_or_erfc64(x * -_INV_SQRT2, "erfc")
    with np.errstate(invalid="ignore"):
        y *= x
    y *= 0.5
    return _limits(x, y, -0.0, np.inf).astype(F32)


def _gelu_dx(x):
    """Phi(x) + x phi(x), in float64 (Phi = 0.5 erfc(-x / sqrt 2)), rounded once."""
    x = np.asarray(x, np.float64)
    y = _erf_or_erfc64(x * -_INV_SQRT2, "erfc")
    y *= 0.5
    with np.errstate(under="ignore", invalid="ignore"):
        phi = x * x
        phi *= -0.5
        np.exp(phi, out=phi)
        phi *= _INV_SQRT_2PI
        phi *= x
        y += phi
    return _limits(x, y, 0.0, 1.0).astype(F32)


def _sigmoid64(z):
    """1 / (1 + exp(-z)), in place on the float64 array ``z`` (relatively accurate in both tails)."""
    with np.errstate(over="ignore"):
        np.negative(z, out=z)
        np.exp(z, out=z)
        z += 1.0
        return np.reciprocal(z, out=z)


def _gelu_tanh(x):
    """0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), as x * sigmoid(2u) (the same value:
    1 + tanh(u) = 2 sigmoid(2u)) in float64, rounded once: no cancellation in the negative tail."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        u = x * x
        u *= x
        u *= 0.044715
        u += x
        u *= 2.0 * _SQRT_2_PI
        y = _sigmoid64(u)
        y *= x
    return _limits(x, y, -0.0, np.inf).astype(F32)


def _gelu_sig(x):
    """x * sigmoid(1.702 x) in float64, rounded once."""
    x = np.asarray(x, np.float64)
    y = _sigmoid64(x * 1.702)
    with np.errstate(invalid="ignore"):
        y *= x
    return _limits(x, y, -0.0, np.inf).astype(F32)


def _gelu_sig_dx(x):
    """s + 1.702 x s (1 - s) = s (1 + 1.702 x (1 - s)), s = sigmoid(1.702 x), 1 - s =
    sigmoid(-1.702 x), in float64, rounded once."""
    x = np.asarray(x, np.float64)
    s = _sigmoid64(x * 1.702)
    r = _sigmoid64(x * -1.702)
    with np.errstate(invalid="ignore"):
        r *= x
        r *= 1.702
        r += 1.0
        r *= s
    return _limits(x, r, 0.0, 1.0).astype(F32)


def _silu(x):
    return (x * _sigmoid(x)).astype(F32, copy=False)


def _silu_dx(x):
    """s (1 + x (1 - s)), s = sigmoid(x), 1 - s = sigmoid(-x), in float64, rounded once (accurate
    near its root at x ~ -1.28, where the fp32 formula cancels)."""
    x = np.asarray(x, np.float64)
    s = _sigmoid64(x.copy())
    r = _sigmoid64(-x)
    with np.errstate(invalid="ignore"):
        r *= x
        r += 1.0
        r *= s
    return _limits(x, r, 0.0, 1.0).astype(F32)


def _softplus(x):
    return np.logaddexp(F32(0), x).astype(F32, copy=False)


def _mish(x):
    return (x * np.tanh(_softplus(x))).astype(F32, copy=False)


def _erf_dx(x):
    """2/sqrt(pi) exp(-x^2) in float64, rounded once (in fp32 the rounding of x^2 alone costs up
    to ~60 ulp in the tails)."""
    x = np.asarray(x, np.float64)
    y = x * x
    np.negative(y, out=y)
    with np.errstate(under="ignore"):
        np.exp(y, out=y)
    y *= 2.0 * _INV_SQRT_PI
    return y.astype(F32)


def _sin(x):
    """ScalarE sin, with no argument range reduction: sin(x) on [-pi, pi]; outside, the cubic the
    engine's last polynomial piece extrapolates, -(x - pi) + (x - pi)^3 / 6 above pi (and the odd
    mirror -(x + pi) + (x + pi)^3 / 6 below -pi), in float64, rounded once.

    Docs: "the Scalar Engine performs no argument range reduction or clamping. It evaluates the
    fitting polynomial directly, so nki.isa.activation(op=nl.sin) extrapolates a cubic outside
    [-PI, PI] and sin(9.0) returns ~27.65 (not ~0.41)". Decision: the docs do not give the
    polynomial; the cubic Taylor polynomial of sin at +-pi is continuous with sin (value and slope)
    at +-pi and gives sin(9.0) = 27.6526, the documented ~27.65.
    Source: aws-neuron-sdk nki/api/nki.api.shared.rst (Supported Activation Functions, note).
    """
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.where(x > math.pi, x - math.pi, np.where(x < -math.pi, x + math.pi, x))
        inside = np.abs(x) <= math.pi
        y = np.where(inside, np.sin(np.where(inside, x, 0.0)), d * (d * d / 6.0 - 1.0))
    return y.astype(F32)


def _log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x)


def _sqrt(x):
    with np.errstate(invalid="ignore"):
        return np.sqrt(x)


def _exp(x):
    with np.errstate(over="ignore"):
        return np.exp(x)


ACT: dict[str, Callable] = {
    "copy": lambda x: x, "bypass": lambda x: x, "identity": lambda x: x,
    "square": np.square, "sigmoid": _sigmoid, "relu": lambda x: np.maximum(x, F32(0)),
    "tanh": np.tanh, "softplus": _softplus, "mish": _mish, "erf": _erf, "erf_dx": _erf_dx,
    "exp": _exp, "sign": np.sign, "abs": np.abs, "gelu": _gelu, "gelu_dx": _gelu_dx,
    "gelu_apprx_tanh": _gelu_tanh, "gelu_apprx_sigmoid": _gelu_sig,
    "gelu_apprx_sigmoid_dx": _gelu_sig_dx, "silu": _silu, "silu_dx": _silu_dx, "log": _log,
    "sin": _sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan, "sqrt": _sqrt,
    "rsqrt": _rsqrt, "reciprocal": _reciprocal, "negative": np.negative,
}


# Activation functions the docs list (nki.api.shared.rst, Supported Activation Functions) that
# nkisim does not simulate, and why.
_ACT_NOT_SIMULATED = {"prelu": "its slope is not a parameter of nisa.activation"}


def op_name(op, where: str = "nisa", param: str | None = None) -> str:
    """The canonical name of an op token: ``nl.add``, an AluOp, a NumPy ufunc/function or a string.
    ``where`` (the op) and ``param`` (its parameter name, e.g. "op0") only label the error."""
    name = op if isinstance(op, str) else getattr(op, "nki_name", None) or getattr(op, "name", None) \
        or getattr(op, "__name__", None)
    if not isinstance(name, str):
        raise ArgumentError(where, f"{param + ' ' if param else ''}{op!r} is not an NKI operator")
    return _ALIASES.get(name, name)


def lookup_alu(op, where: str = "nisa", param: str | None = None, target=None) -> AluOp:
    """The ALU row for ``op``; ArgumentError naming the op (and ``param``, the parameter that held it)
    if it is not an ALU operator; with ``target`` (an ``arch.Target``), UnsupportedError if that
    generation lacks the operator (``arch.alu_ops_excluded``: abs_max/abs_min before trn3)."""
    name = op_name(op, where, param)
    row = ALU.get(name)
    if row is None:
        raise ArgumentError(where, f"{param + ' ' if param else ''}{name} is not an ALU operator; expected one "
                              f"of {', '.join(sorted(ALU))}")
    if target is not None and name in target.alu_ops_excluded:
        first = min((t for t in _arch.TARGETS.values() if name not in t.alu_ops_excluded),
                    key=lambda t: t.nc_version)
        raise UnsupportedError(where, f"{param + ' ' if param else ''}{name} needs {first.name} or newer, "
                                      f"not supported on {target.name}")
    return row


def lookup_act(op, where: str = "nisa.activation", param: str | None = None) -> Callable:
    """The ScalarE function for ``op``: ArgumentError if it is not one, UnsupportedError for a
    documented one nkisim does not simulate (prelu). Decision: cos, tan, negative, identity (not in
    the docs' activation table) are accepted; the nl functions of the same names lower to them."""
    name = op_name(op, where, param)
    if name == "bypass":
        name = "copy"
    if name in _ACT_NOT_SIMULATED:
        raise UnsupportedError(where, f"{param + ' ' if param else ''}{name} is a documented activation "
                                      f"function nkisim does not simulate: {_ACT_NOT_SIMULATED[name]}")
    fn = ACT.get(name)
    if fn is None:
        raise ArgumentError(where, f"{param + ' ' if param else ''}{name} is not an activation function; "
                              f"expected one of {', '.join(sorted(ACT))}")
    return fn


__all__ = ["AluOp", "ALU", "ACT", "op_name", "lookup_alu", "lookup_act"]
