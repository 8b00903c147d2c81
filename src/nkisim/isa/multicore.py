"""LNC2 synchronisation: ``core_barrier`` and ``sendrecv`` between the two cores of a launch.

A core that waits for a peer which finished the kernel, or which waits at a sync point this core
will not reach, gets a DeadlockError (never a hang); see ``runtime.launch.Rendezvous``. Both ops are ``@instruction`` specs: their rules check only
the target and the operands' static signature; the launch's LNC degree, the core's id and the
rendezvous are runtime state, read by compute. Source: aws-neuron-sdk nki/api/nki/isa/__init__.py
(core_barrier, sendrecv). Imports memory, checks, dispatch.
"""
from __future__ import annotations

from ..checks import rules
from ..errors import DtypeError, MemorySpaceError, ShapeError, UnsupportedError
from ..memory.buffers import psum, sbuf, shared_hbm
from ..memory.access import read_raw, write
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine, dma_engine as _dma_engine


def _needs_trn2(op, t):
    if t.nc_version < 3:
        raise UnsupportedError(op, f"needs trn2 or newer (LNC2), not {t.name}")


def _barrier_rules(ins, data, cores, engine, name):
    """core_barrier's rules (see its docstring): the engine that runs it."""
    op = ins.op
    _needs_trn2(op, ins.target)
    if tuple(cores) != (0, 1):
        raise ShapeError(op, f"cores must be (0, 1), got {tuple(cores)}")
    eng = as_enum(_engine, engine, op)
    return Passed(_engine.gpsimd if eng is _engine.unknown else eng)


def _barrier_compute(ins, data, cores, engine, name):
    core = ins.core
    if core.launch.lnc < 2:
        raise UnsupportedError(ins.op, "core_barrier needs an LNC2 launch (kernel[2]); this launch has "
                                       "one core")
    if data.buffer is not shared_hbm and data.buffer not in (sbuf, psum):
        raise MemorySpaceError(ins.op, f"data is in {data.buffer}; must be in shared_hbm (the shared "
                                       f"data both cores synchronise on)")
    core.launch.sync.barrier(core.core_id, ins.op)


@instruction(reads=("data",), rules=_barrier_rules, compute=_barrier_compute)
def core_barrier(data, cores=(0, 1), engine=_engine.gpsimd, name=None):
    """Every core in ``cores`` waits until all have reached this barrier (for ``data``).

    Only in an LNC2 launch (the docs allow it only with LNC enabled; under LNC1 it raises
    UnsupportedError). ``cores`` must be (0, 1). Raises DeadlockError when the other core finishes
    without reaching it or reaches a different sync point.
    Engine: ``engine`` ("the engine to execute the barrier instruction on; defaults to GpSimd
    Engine"); Decision: ``engine.unknown`` runs it on GpSimd, the documented default. Decision:
    ``cores`` defaults to (0, 1), the only supported value (the documented signature has no
    default). Decision: the event lists ``data`` as a read: the barrier moves no bytes, but it
    orders the cores' accesses to ``data``, so a schedule must place it after earlier writes.
    ``data`` must be in shared HBM ("must be data in shared HBM"): a private_hbm tensor raises
    MemorySpaceError (checked after the LNC2 rule; kernel arguments of an LNC2 launch are in shared
    HBM). Decision: an SBUF or PSUM tile is accepted as the barrier's data, against the docs' wording:
    the barrier moves no bytes (``data`` only orders accesses), and AWS's own kernel library, which
    runs on hardware, passes one (nki-library bwmm_shard_on_I.py: ``core_barrier(block_idx, (0, 1))``
    on an SBUF counter), so the compiler accepts it; for private HBM there is no such evidence and
    the documented rule stands. Barriers are their own channel: the r-th barrier of a core meets
    the r-th of the other, whatever sendrecv calls lie between (see ``Rendezvous``).
    Raises: UnsupportedError (target, LNC1), MemorySpaceError (data), ShapeError (cores),
    DeadlockError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (core_barrier).
    """


def _sendrecv_rules(ins, src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine, name):
    """sendrecv's rules (see its docstring); ranks are checked by compute (they name the core)."""
    op = ins.op
    _needs_trn2(op, ins.target)
    rules.tensor(op, "src", src)
    rules.tensor(op, "dst", dst)
    rules.sbuf_only(op, "src", src)
    rules.sbuf_only(op, "dst", dst)
    if src.shape != dst.shape:
        raise ShapeError(op, f"dst shape {dst.shape} must equal src shape {src.shape}")
    if src.dtype != dst.dtype:
        raise DtypeError(op, f"dst dtype {dst.dtype} must equal src dtype {src.dtype}")
    mode = as_enum(_dma_engine, dma_engine, op)
    if mode is _dma_engine.gpsimd_dma:
        isz = src.dtype.itemsize
        limit = dict(ins.target.sendrecv_gpsimd_dma_partition_bytes).get(isz)
        if limit is not None:
            rules.at_most(op, f"src bytes per partition ({src.free_size} x {isz}-byte elements)",
                          src.free_size * isz, limit, ins.target, unit=" bytes",
                          note=f"with dma_engine=gpsimd_dma for {8 * isz}-bit types")
    return Passed(_engine.dma, mode)


def _sendrecv_compute(ins, src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine, name):
    op, core = ins.op, ins.core
    ins.note(dma_engine=ins.info.name)
    if core.launch.lnc < 2:
        raise UnsupportedError(op, "sendrecv needs an LNC2 launch (kernel[2])")
    peer = 1 - core.core_id
    for nm, r in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if int(r) != peer:
            raise ShapeError(op, f"{nm} {int(r)} must be the other core's id {peer}")
    data = read_raw(src).copy()
    me = core.core_id

    def receive(got, where=None):
        if got.shape != data.shape or got.dtype != data.dtype:
            # src and dst have one shape on each core, so the mismatch reads the same from both
            # cores; it is phrased for core 0's dst (Decision: the message does not depend on
            # which core noticed first)
            src1, dst0 = (got, data) if me == 0 else (data, got)
            raise ShapeError(op, f"core 1 sent src {src1.shape} {src1.dtype} but dst on core 0 is "
                                 f"{dst0.shape} {dst0.dtype}; both cores must pass equal shapes", where=where)
        write(dst, got)

    core.launch.sync.send(core, op, int(pipe_id), data, receive, dst)


@instruction(reads=("src",), writes=("dst",), rules=_sendrecv_rules, compute=_sendrecv_compute)
def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=_dma_engine.dma, name=None):
    """Send this core's SBUF ``src`` to core ``send_to_rank`` and receive core ``recv_from_rank``'s
    ``src`` into this core's ``dst``; calls with the same ``pipe_id`` meet.

    Shapes/dtypes: src and dst equal in shape and dtype, both in SBUF. Ranks are 0 or 1 and differ
    from this core's id. Engine: DMA ("using DMA engines"); the transfer mode ``dma_engine``
    (``dma``, or ``gpsimd_dma``: "GPSIMD's internal DMA engine", triggered by GpSimd) is an option
    of the event. With ``gpsimd_dma`` the data per partition is at most 1024 bytes for 32-bit
    types, 512 for 16-bit, 256 for 8-bit (``arch.Target.sendrecv_gpsimd_dma_partition_bytes``);
    more raises ShapeError. Pipes: "operations with different pipe_id values can progress
    independently without blocking each other": the r-th call of a core on a pipe meets the r-th
    call of the other core on that pipe. Decision: a call posts ``src`` (read when called) and
    returns; ``dst`` is written when the peer's matching call has been posted, at the latest before
    this core's next instruction that is not ``sendrecv``/``core_barrier``, or that is one and
    uses ``dst``'s allocation (or when its kernel returns), which waits for it, so calls on different pipes in a different order on the two
    cores do not deadlock. Raises ShapeError, DtypeError, DeadlockError, UnsupportedError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (sendrecv).
    """


__all__ = ["core_barrier", "sendrecv"]
