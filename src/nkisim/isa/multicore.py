"""LNC2 synchronisation: ``core_barrier`` and ``sendrecv`` between the two cores of a launch.

A core that waits for a peer which finished the kernel, or which waits at a different sync point,
gets a DeadlockError (never a hang). Source: aws-neuron-sdk nki/api/nki/isa/__init__.py
(core_barrier, sendrecv). Imports memory, checks, state.
"""
from __future__ import annotations

from .. import state, trace
from ..checks import rules
from ..errors import DtypeError, ShapeError, UnsupportedError
from ..memory.access import read_raw, write
from .enums import NkiInstruction, engine as _engine, dma_engine as _dma_engine


def _sync_core(op):
    core = state.core(op)
    if core.target.nc_version < 3:
        raise UnsupportedError(op, f"needs trn2 or newer (LNC2), not {core.target.name}")
    return core


def core_barrier(data, cores=(0, 1), engine=_engine.gpsimd, name=None):
    """Every core in ``cores`` waits until all have reached this barrier (for ``data``).

    Only in an LNC2 launch (the docs allow it only with LNC enabled; under LNC1 it raises
    UnsupportedError). ``cores`` must be (0, 1). Raises DeadlockError when the other core finishes
    without reaching it or reaches a different sync point.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (core_barrier).
    """
    op = "nisa.core_barrier"
    core = _sync_core(op)
    if tuple(cores) != (0, 1):
        raise ShapeError(op, f"cores must be (0, 1), got {tuple(cores)}")
    if core.launch.lnc < 2:
        raise UnsupportedError(op, "core_barrier needs an LNC2 launch (kernel[2]); this launch has one core")
    core.launch.sync.exchange(core.core_id, op, ("core_barrier",))
    trace.emit(op, data=data)
    return NkiInstruction(op, name)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=_dma_engine.dma, name=None):
    """Send this core's SBUF ``src`` to core ``send_to_rank`` and receive core ``recv_from_rank``'s
    ``src`` into this core's ``dst``; calls with the same ``pipe_id`` meet.

    Shapes/dtypes: src and dst equal in shape and dtype, both in SBUF. Ranks are 0 or 1 and differ
    from this core's id. Raises ShapeError, DtypeError, DeadlockError, UnsupportedError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (sendrecv).
    """
    op = "nisa.sendrecv"
    core = _sync_core(op)
    rules.tensor(op, "src", src)
    rules.tensor(op, "dst", dst)
    rules.sbuf_only(op, "src", src)
    rules.sbuf_only(op, "dst", dst)
    if src.shape != dst.shape:
        raise ShapeError(op, f"dst shape {dst.shape} must equal src shape {src.shape}")
    if src.dtype != dst.dtype:
        raise DtypeError(op, f"dst dtype {dst.dtype} must equal src dtype {src.dtype}")
    if core.launch.lnc < 2:
        raise UnsupportedError(op, "sendrecv needs an LNC2 launch (kernel[2])")
    peer = 1 - core.core_id
    for nm, r in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if int(r) != peer:
            raise ShapeError(op, f"{nm} {int(r)} must be the other core's id {peer}")
    data = read_raw(src).copy()
    got = core.launch.sync.exchange(core.core_id, op, ("sendrecv", int(pipe_id)), data)
    if got.shape != dst.np().shape or got.dtype != dst.np().dtype:
        raise ShapeError(op, f"core {peer} sent src {got.shape} {got.dtype} but dst on core "
                             f"{core.core_id} is {dst.shape} {dst.dtype}; both cores must pass equal shapes")
    write(dst, got)
    trace.emit(op, src=src, dst=dst)
    return NkiInstruction(op, name)


__all__ = ["core_barrier", "sendrecv"]
