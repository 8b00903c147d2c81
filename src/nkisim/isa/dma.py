"""DMA: ``dma_copy`` (flat element-order copy between HBM and SBUF, dtype cast via fp32).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (dma_copy). Imports memory, checks, state.
"""
from __future__ import annotations

from .. import trace
from ..checks import rules
from ..errors import DtypeError
from ..memory.access import read_f32, read_raw, write
from ..memory.buffers import HBM, sbuf
from .enums import NkiInstruction, as_enum, dge_mode as _dge_mode, engine as _engine, oob_mode as _oob
from .operands import target

_DMA_BUFFERS = HBM | {sbuf}


def dma_copy(dst, src, priority=None, oob_mode=_oob.error, dge_mode=_dge_mode.unknown,
             engine=_engine.unknown, name=None, **ignored):
    """dst = src, element by element in flat (row-major view) order.

    Shapes: any; ``dst`` and ``src`` must hold the same number of elements.
    Buffers: HBM (private/shared) or SBUF for both; PSUM is not accepted (evacuate with tensor_copy).
    Dtypes: same dtype copies bits exactly; otherwise src -> fp32 -> dst (rounded once);
    ``dge_mode=hwdge`` requires equal dtypes. ``oob_mode``/``dge_mode``/``engine`` accept raw ints.
    Raises: ShapeError, MemorySpaceError, DtypeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (dma_copy).
    """
    op = "nisa.dma_copy"
    t = target(op)
    rules.tensor(op, "dst", dst)
    rules.tensor(op, "src", src)
    rules.on_chip(op, "src", src, _DMA_BUFFERS)
    rules.on_chip(op, "dst", dst, _DMA_BUFFERS)
    rules.same_size(op, "dst", dst, "src", src)
    mode = as_enum(_dge_mode, dge_mode, op)
    as_enum(_oob, oob_mode, op)
    if mode is _dge_mode.hwdge and dst.dtype != src.dtype:
        raise DtypeError(op, f"dge_mode=hwdge copies bytes and needs equal dtypes, got src "
                             f"{src.dtype} and dst {dst.dtype}")
    if src.on_chip:
        rules.partitions(op, "src", src, t)
    if dst.on_chip:
        rules.partitions(op, "dst", dst, t)
    write(dst, read_raw(src) if src.dtype == dst.dtype else read_f32(src))
    trace.emit(op, dst=dst, src=src)
    return NkiInstruction(op, name)


__all__ = ["dma_copy"]
