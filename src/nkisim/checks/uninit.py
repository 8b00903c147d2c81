"""Strict uninitialised reads (``uninitialized_reads="raise"``, env NKISIM_STRICT_UNINIT=1): every
SBUF/PSUM/HBM allocation made by the kernel carries an "initialised" mask; the first instruction
that reads an element never written raises UninitializedReadError naming the op, the operand, the
tensor, how many elements and the first one, and the kernel line. Caller arguments and
``shared_constant``/``full``-style creations count as written. Decision: views that reinterpret
the dtype (``.view``) are not checked. Operands are named by the running instruction
(``memory.hooks.accessor``); registered with memory by ``checks/__init__``."""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..errors import UninitializedReadError
from ..memory.hooks import accessor


def mask_view(t) -> np.ndarray | None:
    m = t.alloc.init
    if m is None or t.storage is not t.alloc.storage:
        return None
    return np.ndarray(t.shape, np.bool_, buffer=m, offset=t.offset, strides=t.strides)


def mark_written(t) -> None:
    v = mask_view(t)
    if v is not None:
        v[...] = True


def check_read(t) -> None:
    v = mask_view(t)
    if v is None or v.all():
        return
    missing = ~v
    first = tuple(int(i) for i in np.argwhere(missing)[0])
    op, operand = accessor(t, "r")
    name = f"'{t.alloc.name}' " if t.alloc.name else ""
    raise UninitializedReadError(op, f"{operand} reads {int(missing.sum())} never-written element(s) of "
                                     f"{t.buffer} tensor {name}{t.alloc.shape} {_dt.name(t.dtype)}, first at "
                                     f"view index {first} (allocated at {t.alloc.where})")


__all__ = ["mask_view", "mark_written", "check_read"]
