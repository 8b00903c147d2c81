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

from ..errors import ArgumentError

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


def _erf(x):
    """erf in float64 via Abramowitz & Stegun 7.1.26 refined to |error| < 1.2e-7 (W. J. Cody's
    rational form is overkill for fp32 output); NumPy has no erf."""
    x = np.asarray(x, np.float64)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    # Numerical Recipes erfc Chebyshev fit, fractional error < 1.2e-7 everywhere.
    y = t * np.exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277)))))))))
    return (s * (1.0 - y)).astype(F32)


_SQRT_2_PI = math.sqrt(2.0 / math.pi)


def _gelu(x):
    return (x * F32(0.5) * (F32(1) + _erf(x * F32(1 / math.sqrt(2))))).astype(F32, copy=False)


def _gelu_dx(x):
    phi = np.exp(F32(-0.5) * x * x) * F32(1 / math.sqrt(2 * math.pi))
    return (F32(0.5) * (F32(1) + _erf(x * F32(1 / math.sqrt(2)))) + x * phi).astype(F32, copy=False)


def _gelu_tanh(x):
    return (F32(0.5) * x * (F32(1) + np.tanh(F32(_SQRT_2_PI) * (x + F32(0.044715) * x * x * x)))).astype(
        F32, copy=False)


def _gelu_sig(x):
    return (x * _sigmoid(F32(1.702) * x)).astype(F32, copy=False)


def _gelu_sig_dx(x):
    s = _sigmoid(F32(1.702) * x)
    return (s + F32(1.702) * x * s * (F32(1) - s)).astype(F32, copy=False)


def _silu(x):
    return (x * _sigmoid(x)).astype(F32, copy=False)


def _silu_dx(x):
    s = _sigmoid(x)
    return (s * (F32(1) + x * (F32(1) - s))).astype(F32, copy=False)


def _softplus(x):
    return np.logaddexp(F32(0), x).astype(F32, copy=False)


def _mish(x):
    return (x * np.tanh(_softplus(x))).astype(F32, copy=False)


def _erf_dx(x):
    return (F32(2 / math.sqrt(math.pi)) * np.exp(-x * x)).astype(F32, copy=False)


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
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan, "sqrt": _sqrt,
    "rsqrt": _rsqrt, "reciprocal": _reciprocal, "negative": np.negative,
}


def op_name(op, where: str = "nisa", param: str | None = None) -> str:
    """The canonical name of an op token: ``nl.add``, an AluOp, a NumPy ufunc/function or a string.
    ``where`` (the op) and ``param`` (its parameter name, e.g. "op0") only label the error."""
    name = op if isinstance(op, str) else getattr(op, "nki_name", None) or getattr(op, "name", None) \
        or getattr(op, "__name__", None)
    if not isinstance(name, str):
        raise ArgumentError(where, f"{param + ' ' if param else ''}{op!r} is not an NKI operator")
    return _ALIASES.get(name, name)


def lookup_alu(op, where: str = "nisa", param: str | None = None) -> AluOp:
    """The ALU row for ``op``; ArgumentError naming the op (and ``param``, the parameter that held it)
    if it is not an ALU operator."""
    name = op_name(op, where, param)
    row = ALU.get(name)
    if row is None:
        raise ArgumentError(where, f"{param + ' ' if param else ''}{name} is not an ALU operator; expected one "
                              f"of {', '.join(sorted(ALU))}")
    return row


def lookup_act(op, where: str = "nisa.activation", param: str | None = None) -> Callable:
    name = op_name(op, where, param)
    if name == "bypass":
        name = "copy"
    fn = ACT.get(name)
    if fn is None:
        raise ArgumentError(where, f"{param + ' ' if param else ''}{name} is not an activation function; "
                              f"expected one of {', '.join(sorted(ACT))}")
    return fn


__all__ = ["AluOp", "ALU", "ACT", "op_name", "lookup_alu", "lookup_act"]
