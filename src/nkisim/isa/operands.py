"""Operand helpers shared by the op families: the current target, per-partition operands as
broadcastable float32 arrays, 2-D (partition, free) shapes, and the rules every instruction's
tensor operands obey (``check``, run by the dispatcher before an op's own rules).
Imports errors, memory and state only."""
from __future__ import annotations

import math

import numpy as np

from .. import state
from ..errors import BoundsError, ShapeError
from ..memory.access import read_f32
from ..memory.buffers import ON_CHIP
from ..memory.tensor import NkiTensor
from .enums import oob_mode as _oob_mode


def check(spec, args) -> None:
    """Rules for every tensor operand of every instruction, in parameter order:

    - no partition striding: an SBUF/PSUM operand spanning more than one partition must step
      from one partition to the next by its allocation's elements per partition ("hardware does
      not allow P dimension striding when accessing data from a single SBUF/PSUM tensor.
      Therefore, a valid src/dst tensor of an instruction must occupy a continuous number of
      partitions", nki/guides/architecture/trainium_inferentia2_arch.rst; the same rule as
      ``.ap``'s, nki/deep-dives/nki-aps.rst). Decision: the view ``t[0:128:2]`` itself is
      legal (the NkiTensor view docs allow any step >= 1); using it as an operand is the error;
    - at most ``target.engine_free_dims`` (4) free dims in an SBUF/PSUM operand of a compute
      engine instruction, counted after dropping size-1 dims and merging dims contiguous with
      each other ("the src/dst tensor of an engine instruction can support up to
      four-dimensional tensorized access pattern with a stride in each dimension within each
      partition", same page; DMA operands are descriptor lists, not limited so). Decision: not
      in a Beta-1 (``neuronxcc.nki``) kernel, whose tiles may have any number of free dims (the
      Beta-1 compiler splits such an instruction over its outer dims; nki-samples' trilinear
      interpolation reads 6-dim index-expression views): there it runs as one instruction;
    - a dynamic-offset view out of bounds raises BoundsError, except for an op with
      ``oob_mode=skip`` (the DMA skips the transfer; see ``isa.dma``).
    Raises: ShapeError, BoundsError (naming the op and the operand)."""
    skip = None
    for name, a in zip(spec.names, args):
        if type(a) is not NkiTensor:
            continue
        if a.oob is not None:
            if skip is None:
                mode = args[spec.index["oob_mode"]] if "oob_mode" in spec.index else None
                skip = isinstance(mode, int) and mode == _oob_mode.skip     # an IntEnum (1 works too)
            if not skip:
                raise BoundsError(spec.api, f"{name} {a.oob}")
        if a.shape and a.shape[0] > 1 and a.alloc.buffer in ON_CHIP:
            alloc = a.alloc
            per_part = math.prod(alloc.shape[1:]) * alloc.dtype.itemsize // a.dtype.itemsize
            if a.strides[0] != per_part:
                raise ShapeError(spec.api, f"{name} {a.shape} in {alloc.buffer} has partition stride "
                                           f"{a.strides[0]} elements; it must be {per_part} (the elements "
                                           f"per partition): no partition striding, an operand occupies "
                                           f"consecutive partitions")
            if spec.op not in _DMA_OPS:
                n = free_dims(a.shape, a.strides)
                core = state.core(spec.api)
                limit = core.target.engine_free_dims
                if n > limit and core.extras.get("beta1_program") is None:
                    raise ShapeError(spec.api, f"{name} {a.shape} with strides {a.strides} needs {n} free-dim "
                                               f"access-pattern dims (after merging contiguous dims); an engine "
                                               f"instruction takes at most {limit}")


_DMA_OPS = frozenset(("dma_copy", "dma_transpose", "dma_compute", "sendrecv", "core_barrier"))


def free_dims(shape, strides) -> int:
    """Free dims of an on-chip view's access pattern: dims after the partition dim, size-1 dims
    dropped, each dim merged into the one outside it when they are contiguous together."""
    dims = []
    for n, s in zip(shape[1:], strides[1:]):
        if n == 1:
            continue
        if dims and dims[-1][1] == n * s:
            dims[-1] = (dims[-1][0] * n, s)
        else:
            dims.append((n, s))
    return len(dims)

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


__all__ = ["check", "free_dims", "target", "column_f32", "pf", "F32"]
