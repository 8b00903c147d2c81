"""Operator tokens: each ``nl.<name>`` is both an ``op=`` argument for ``nisa`` ops and the
tile-level function ``nl.<name>(x[, y], dtype=None)`` that returns a new tile (see ``tile``)."""
from __future__ import annotations


class Op:
    """An NKI operator token; calling it runs the tile-level function of the same name."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    @property
    def nki_name(self) -> str:
        return self.name

    def __call__(self, *args, **kwargs):
        from . import tile
        return tile.call(self.name, *args, **kwargs)

    def __repr__(self):
        return f"nl.{self.name}"

    def __reduce__(self):
        return (_token, (self.name,))


from ..isa.dispatch import register_token_type  # noqa: E402

register_token_type(Op)

NAMES = (
    # binary arithmetic / comparison / logical / bitwise
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "abs_max", "abs_min",
    "fmod", "mod", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "invert", "left_shift", "right_shift",
    # unary math and activations
    "abs", "square", "relu", "rsqrt", "reciprocal", "negative", "sqrt", "exp", "log", "sin", "cos",
    "tan", "arctan", "ceil", "floor", "trunc", "sign", "tanh", "sigmoid", "silu", "silu_dx", "gelu",
    "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid", "gelu_apprx_sigmoid_dx", "mish", "softplus",
    "erf", "erf_dx", "copy", "bypass", "prelu", "average",
    # reductions (as op tokens: max ~ maximum, min ~ minimum, sum ~ add)
    "sum", "max", "min", "prod", "mean", "var", "all",
)
TOKENS = {n: Op(n) for n in NAMES}


def _token(name):
    return TOKENS[name]


__all__ = ["Op", "TOKENS"] + list(NAMES)
globals().update(TOKENS)
