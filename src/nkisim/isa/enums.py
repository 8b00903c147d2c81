"""ISA enums with NKI Beta 2 values; raw ints are accepted wherever kernels pass them.

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (engine, dge_mode, oob_mode, reduce_cmd,
matmul_perf_mode, nc_version, dma_engine). Imports nothing from nkisim.
"""
from __future__ import annotations

import enum


class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class matmul_perf_mode(str, enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


# Deprecated module-level aliases still used by real kernels.
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


def as_enum(cls, value, op: str = "nisa"):
    """``value`` as a member of ``cls`` (accepts members, raw ints and names)."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        try:
            return cls[str(value)]
        except KeyError:
            from ..errors import ArgumentError
            raise ArgumentError(op, f"{value!r} is not a valid {cls.__name__}; expected one of "
                               f"{[m.name for m in cls]}") from None


class NkiInstruction:
    """The handle every ISA op returns; ``depends_on`` only orders scheduling (no effect here)."""
    __slots__ = ("op", "name")

    def __init__(self, op: str, name=None):
        self.op, self.name = op, name

    def depends_on(self, *producers) -> "NkiInstruction":
        return self

    def __repr__(self):
        return f"<NkiInstruction {self.op}{' ' + self.name if self.name else ''}>"


_SHARED: dict = {}


def instruction(op: str, name=None) -> NkiInstruction:
    """The handle an op returns: one shared, immutable handle per op when unnamed."""
    if name is not None:
        return NkiInstruction(op, name)
    h = _SHARED.get(op)
    if h is None:
        h = _SHARED[op] = NkiInstruction(op)
    return h


__all__ = ["engine", "dge_mode", "oob_mode", "reduce_cmd", "matmul_perf_mode", "nc_version",
           "dma_engine", "tensor_engine", "vector_engine", "scalar_engine", "gpsimd_engine",
           "unknown_engine", "NkiInstruction", "as_enum"]
