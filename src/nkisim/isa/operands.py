"""Operand helpers shared by the op families: the current target, per-partition operands as
broadcastable float32 arrays, and 2-D (partition, free) shapes. Imports memory and state only."""
from __future__ import annotations

import numpy as np

from .. import state
from ..memory.access import read_f32
from ..memory.tensor import NkiTensor

F32 = np.float32


def target(op: str):
    """The target of the calling core (NkiError when called outside a kernel)."""
    return state.core(op).target


def column_f32(x, ndim: int):
    """A scalar operand as np.float32, or a (P, 1) tensor as a float32 array shaped (P, 1, ..., 1)
    with ``ndim`` dims, ready to broadcast along the free dims."""
    if isinstance(x, NkiTensor):
        a = read_f32(x)
        return a.reshape((a.shape[0],) + (1,) * (ndim - 1))
    return F32(0 if x is None else x)


def pf(a: np.ndarray) -> np.ndarray:
    """View a (P, free...) array as (P, F)."""
    return a.reshape(a.shape[0], -1) if a.ndim != 2 else a


__all__ = ["target", "column_f32", "pf", "F32"]
