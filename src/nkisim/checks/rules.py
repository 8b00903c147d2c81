"""Shared hardware-rule checks used by every ``nisa`` op: pure functions of operand metadata.

Each raises one NkiError subclass whose message names the op, the operand (by its public
parameter name), the value, the limit and the target. Imports errors, dtypes, memory types.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..errors import DtypeError, EngineError, MemorySpaceError, ShapeError
from ..memory.buffers import HBM, ON_CHIP, psum, sbuf
from ..memory.tensor import NkiTensor


def tensor(op: str, name: str, x) -> NkiTensor:
    """``x`` must be a tensor (not a scalar or array)."""
    if not isinstance(x, NkiTensor):
        raise ShapeError(op, f"{name} must be a tensor, got {type(x).__name__}", operand=name)
    return x


def tiles(op: str, target, **operands) -> None:
    """Each named operand is a tensor in SBUF or PSUM with at most ``target.pmax`` partitions,
    checked in the order given (the first broken rule raises)."""
    for name, x in operands.items():
        tensor(op, name, x)
        on_chip(op, name, x)
        partitions(op, name, x, target)


def at_most(op: str, what: str, value: int, limit: int, target, unit: str = "", note: str = "") -> None:
    """``value`` <= ``limit``; ``note`` (e.g. "(vector engine transpose)") ends the message."""
    if value > limit:
        raise ShapeError(op, f"{what} {value}{unit} exceeds {limit}{unit} on {target.name}"
                             f"{' ' + note if note else ''}", limit=limit)


def partitions(op: str, name: str, t: NkiTensor, target) -> int:
    """Partition count of an on-chip operand, at most ``target.pmax``."""
    p = t.shape[0]
    if p > target.pmax:
        raise ShapeError(op, f"{name} partition dim {p} exceeds {target.pmax} on {target.name}", operand=name,
                         limit=target.pmax)
    return p


def on_chip(op: str, name: str, t: NkiTensor, allowed=ON_CHIP) -> None:
    """``t`` must live in one of ``allowed`` buffers (default SBUF or PSUM)."""
    if t.buffer not in allowed:
        names = " or ".join(sorted(str(b) for b in allowed))
        where = f"{t.buffer} (HBM)" if t.buffer in HBM else str(t.buffer)
        raise MemorySpaceError(op, f"{name} is in {where}; must be in {names}", operand=name,
                               limit=sorted(str(b) for b in allowed))


def sbuf_only(op: str, name: str, t: NkiTensor) -> None:
    on_chip(op, name, t, frozenset((sbuf,)))


def psum_only(op: str, name: str, t: NkiTensor) -> None:
    on_chip(op, name, t, frozenset((psum,)))


def not_both_psum(op: str, a_name: str, a, b_name: str, b) -> None:
    if isinstance(a, NkiTensor) and isinstance(b, NkiTensor) and a.buffer is psum and b.buffer is psum:
        raise MemorySpaceError(op, f"{a_name} and {b_name} are both in psum; at most one may be", operand=b_name)


def same_tile(op: str, a_name: str, a: NkiTensor, b_name: str, b: NkiTensor) -> None:
    """Same partition count and same elements per partition (free shapes may differ)."""
    if a.shape[0] != b.shape[0]:
        raise ShapeError(op, f"{b_name} partition dim {b.shape[0]} does not match {a_name} partition "
                             f"dim {a.shape[0]}", operand=b_name, limit=a.shape[0])
    if a.free_size != b.free_size:
        raise ShapeError(op, f"{b_name} has {b.free_size} elements per partition, {a_name} has "
                             f"{a.free_size} (shapes {b.shape} vs {a.shape})", operand=b_name,
                         limit=a.free_size)


def same_size(op: str, a_name: str, a: NkiTensor, b_name: str, b: NkiTensor) -> None:
    if a.size != b.size:
        raise ShapeError(op, f"{b_name} has {b.size} elements, {a_name} has {a.size} "
                             f"(shapes {b.shape} vs {a.shape})", operand=b_name, limit=a.size)


def column(op: str, name: str, x, p: int, target) -> None:
    """A per-partition operand: a Python/NumPy scalar, or a ``(p, 1)`` tensor on chip."""
    if isinstance(x, NkiTensor):
        on_chip(op, name, x)
        if x.shape[0] != p or x.free_size != 1:
            raise ShapeError(op, f"{name} must be a scalar or a ({p}, 1) tensor, got shape {x.shape}",
                             operand=name, limit=[p, 1])
    elif x is not None and not np.isscalar(x) and np.ndim(x) != 0:
        raise ShapeError(op, f"{name} must be a scalar or a ({p}, 1) tensor, got {type(x).__name__}",
                         operand=name, limit=[p, 1])


def int_dtype(op: str, name: str, t: NkiTensor, what: str) -> None:
    if not (_dt.is_int(t.dtype) or t.dtype == _dt.bool_):
        raise DtypeError(op, f"{name} dtype {_dt.name(t.dtype)} is not an integer dtype, which {what} needs",
                         operand=name)


def dtype_in(op: str, name: str, t: NkiTensor, allowed, target) -> None:
    if _dt.name(t.dtype) not in allowed:
        raise DtypeError(op, f"{name} dtype {_dt.name(t.dtype)} is not supported on {target.name}; "
                             f"expected one of {', '.join(allowed)}", operand=name, limit=list(allowed))


def hbm_or_sbuf(op: str, name: str, t: NkiTensor) -> None:
    on_chip(op, name, t, HBM | {sbuf})


def float32_operand(op: str, name: str, x, what: str = "") -> None:
    """A tensor operand ``x`` (scalars are fp32 immediates) must be float32; ``what`` says why,
    e.g. "for arithmetic op0 add"."""
    if isinstance(x, NkiTensor) and x.dtype != _dt.float32:
        raise DtypeError(op, f"{name} dtype {_dt.name(x.dtype)} must be float32{' ' + what if what else ''}",
                         operand=name, limit=["float32"])


def engine_in(op: str, engine, allowed, target, what: str = "", hint: str = "") -> None:
    """``engine`` (an ``nisa.engine`` member) must be one of ``allowed`` (in the order given);
    ``what`` names the case, e.g. "for bitvec op bitwise_and"; ``hint`` ends the message.
    EngineError otherwise."""
    if engine not in allowed:
        names = [e.name for e in allowed]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        raise EngineError(op, f"engine {engine.name} is not supported{' ' + what if what else ''} on "
                              f"{target.name}; expected {listed}{' ' + hint if hint else ''}",
                          operand="engine", limit=names)


__all__ = ["tensor", "at_most", "partitions", "on_chip", "sbuf_only", "psum_only", "not_both_psum",
           "same_tile", "same_size", "column", "int_dtype", "dtype_in", "hbm_or_sbuf", "float32_operand",
           "engine_in"]
