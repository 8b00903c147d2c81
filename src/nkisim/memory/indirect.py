"""IndirectTensor: the gather/scatter view ``t.ap(pattern, vector_offset=idx, indirect_dim=0)``.

Row ``w`` of the view is row ``idx[w]`` of the base tensor; rows are resolved when a DMA runs
(``rows``), so out-of-bounds indices are found then and handled per ``oob_mode``.
Source: aws-neuron-sdk NkiTensor.ap / nisa.dma_copy docs (digest §3.4, §3.7, §4.1).
Imports numpy, dtypes, errors, buffers, tensor only.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..errors import BoundsError, DtypeError, MemorySpaceError, ShapeError
from .buffers import HBM, sbuf
from .tensor import NkiTensor

_INDEX_DTYPES = ("int32", "uint32", "int16", "uint16", "int8", "uint8")


class IndirectTensor:
    """An HBM view whose dim-0 rows come from a runtime index tile (one index per partition).

    ``shape`` = the pattern's counts; element ``(w, i1, ...)`` lives at
    ``storage[offset + idx[w] * row_step + sum_k step_k * i_k]`` with ``row_step`` =
    prod(base.shape[1:]) (the step the pattern gives for dim 0 is ignored, as in NKI).
    """
    __slots__ = ("base", "index", "shape", "steps", "offset", "row_step", "rows_in_base")

    def __init__(self, base: NkiTensor, index: NkiTensor, counts, steps, offset):
        self.base = base
        self.index = index
        self.shape = tuple(counts)
        self.steps = tuple(steps)
        self.offset = offset
        self.row_step = math.prod(base.shape[1:])
        self.rows_in_base = base.shape[0]

    # the few attributes DMA rules read
    @property
    def dtype(self):
        return self.base.dtype

    @property
    def buffer(self):
        return self.base.buffer

    @property
    def alloc(self):
        return self.base.alloc

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def on_chip(self) -> bool:
        return False

    def is_indirect(self) -> bool:
        return True

    def __repr__(self):
        return f"IndirectTensor(shape={self.shape}, base={self.base!r})"

    def row_indices(self) -> np.ndarray:
        """The runtime row indices (int64), one per row of the view."""
        return self.index.np().reshape(-1)[: self.shape[0]].astype(np.int64)

    def restrict(self, ranges: tuple, op: str) -> "IndirectTensor":
        """The sub-view keeping positions ``ranges[d] = (lo, hi)`` of each dim (None: whole dim):
        a masked instruction's gathered / scattered operand. Rows ``lo:hi`` keep their index
        tile entries ``lo:hi`` (the masked-off rows' indices are never read, so their values,
        even out of bounds, do not matter); an inner dim's range moves the pattern's offset."""
        counts, offset, index = list(self.shape), self.offset, self.index
        for d, r in enumerate(ranges):
            if r is None:
                continue
            lo, hi = r
            counts[d] = hi - lo
            if d == 0:
                index = index._view((hi - lo,) + tuple(index.shape[1:]), index.strides,
                                    index.offset + lo * index.strides[0], op)
            else:
                offset += lo * self.steps[d]
        return IndirectTensor(self.base, index, counts, self.steps, offset)

    def row_view(self, row: int, op: str) -> NkiTensor:
        """Row ``row`` of the base as a strided view of the pattern's inner dims (bounds-checked)."""
        inner_counts = self.shape[1:] or (1,)
        inner_steps = self.steps[1:] or (1,)
        return self.base._view(inner_counts, inner_steps, self.offset + row * self.row_step, op)


def make(base: NkiTensor, pattern_counts, pattern_steps, offset, vector_offset, indirect_dim, op):
    """Validate an ``.ap(vector_offset=...)`` request and build the view."""
    if indirect_dim != 0:
        raise ShapeError(op, f"vector_offset supports indirect_dim=0 only, got {indirect_dim}")
    if base.buffer not in HBM:
        raise MemorySpaceError(op, f"vector_offset needs a tensor in HBM (DMA gather/scatter), got "
                                   f"{base.buffer}")
    if not isinstance(vector_offset, NkiTensor):
        raise ShapeError(op, f"vector_offset must be an SBUF integer tensor, got "
                             f"{type(vector_offset).__name__}")
    if vector_offset.buffer is not sbuf:
        raise MemorySpaceError(op, f"vector_offset is in {vector_offset.buffer}; must be in sbuf")
    if _dt.name(vector_offset.dtype) not in _INDEX_DTYPES:
        raise DtypeError(op, f"vector_offset dtype {_dt.name(vector_offset.dtype)} must be an integer dtype")
    if not pattern_counts:
        raise ShapeError(op, "pattern must have at least one [step, count] pair")
    rows = pattern_counts[0]
    if vector_offset.free_size != 1 or vector_offset.shape[0] != rows:
        raise ShapeError(op, f"vector_offset shape {vector_offset.shape} must be ({rows}, 1): one "
                             f"index per row of the pattern")
    if not base.is_contiguous():
        raise ShapeError(op, f"vector_offset needs a contiguous base tensor, got strides {base.strides}")
    return IndirectTensor(base, vector_offset, pattern_counts, pattern_steps, offset)


def valid_rows(view: IndirectTensor, op: str, skip: bool) -> np.ndarray:
    """Boolean mask of the rows whose index lies in ``0 .. rows_in_base - 1`` and whose elements lie
    inside the storage; with ``skip=False`` the first bad row raises BoundsError."""
    idx = view.row_indices()
    inner = list(zip(view.shape[1:], view.steps[1:]))
    start = view.offset + idx * view.row_step
    lo = start + sum((n - 1) * s for n, s in inner if s < 0)
    hi = start + sum((n - 1) * s for n, s in inner if s > 0)
    ok = (idx >= 0) & (idx < view.rows_in_base) & (lo >= 0) & (hi < view.base.storage.size)
    if not skip and not ok.all():
        w = int(np.flatnonzero(~ok)[0])
        err = BoundsError(op, f"vector_offset index {int(idx[w])} at partition {w} is outside 0:"
                              f"{view.rows_in_base} rows of {view.base._label()} (oob_mode=error)")
        # the first element of the bad row, as an element index of the flattened base tensor
        # (what the Beta-1 face reports as the documented IndexError, see runtime.beta1)
        inside = 0 <= idx[w] < view.rows_in_base
        err.element = int(start[w] if not inside else lo[w] if lo[w] < 0 else hi[w]) - view.base.offset
        err.elements = view.base.size
        raise err
    return ok


__all__ = ["IndirectTensor", "make", "valid_rows"]
