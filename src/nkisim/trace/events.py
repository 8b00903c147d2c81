"""The instruction event contract (``Instruction``, ``Operand``) and ``record()``.

A launch started inside ``with record() as events:`` gives every core an event list; each
instruction the dispatcher runs appends one ``Instruction``; when the launch ends (also when it
fails) the events are appended to ``events`` ordered by (core, seq): core 0's in issue order, then
core 1's. Fast-path firings are counted in ``events.fast_paths`` (names -> counts); they never
change an event. Imports nothing from nkisim.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True, unsafe_hash=True)
class Operand:
    """One tensor operand of an instruction (immutable by contract: events share operands, so
    never assign to one; not ``frozen`` only because a frozen dataclass costs four times as
    much to build, once per operand of every recorded instruction).

    ``role``: the parameter name (``dst``, ``data1``, ``stationary``, ...); ``buffer``: ``sbuf``,
    ``psum``, ``hbm``, ``shared_hbm`` or ``private_hbm``; ``shape``/``dtype`` (NKI name) of the
    view; ``nbytes``: bytes accessed (elements x item size); ``alloc``: the allocation's id, stable
    within a launch (``arg:<name>`` for kernel arguments, ``c<core>.<n>`` for a core's n-th
    allocation, ``shared<k>`` for the k-th shared_hbm allocation); ``partitions``: partitions
    touched (dim 0 of an on-chip view; 1 for HBM); ``contiguous_bytes``: bytes of the longest
    run of consecutive elements per partition (for DMA descriptors: the innermost dims whose
    strides are dense, not counting dim 0 of an on-chip view); ``view``: ``(offset, strides)`` of
    the view in elements of its allocation's storage, so two operands with equal ``alloc``,
    ``view``, ``shape`` and ``dtype`` access the same bytes (``()`` when not known: an indirect
    view, whose elements the index tile picks).

    Where the bytes are (for dependencies and PSUM banks): ``part_start``/``part_end`` the
    partitions ``[start, end)`` of an on-chip view (0, 1 for HBM); ``byte_start``/``byte_end``
    the bytes ``[start, end)`` the view spans within each partition (on chip) or within the whole
    allocation (HBM), strides' gaps included. ``byte_end == 0`` means unknown: the whole
    allocation (indirect and dynamic views)."""
    role: str
    buffer: str
    shape: tuple
    dtype: str
    nbytes: int
    alloc: str
    partitions: int
    contiguous_bytes: int
    view: tuple = ()
    part_start: int = 0
    part_end: int = 0
    byte_start: int = 0
    byte_end: int = 0


@dataclass(slots=True)
class Instruction:
    """One executed instruction (immutable by contract, like ``Operand``).

    ``op``: the ISA instruction (``nc_matmul``); ``api``: what the kernel called (``nisa.nc_matmul``,
    ``nl.load``); ``engine``: the concrete ``nisa.engine`` name that ran it (tensor, vector, scalar,
    gpsimd, dma, sync); ``core``: LNC core id; ``seq``: 1, 2, ... per core in issue order;
    ``location``: ``file.py:LINE`` in the kernel; ``reads``/``writes``: tensor operands;
    ``options``: the instruction's other arguments as plain values (enums and operator tokens
    by name) plus what the instruction decided (e.g. ``accumulate`` as applied); ``origin``: for
    an event loop replay synthesised (``runtime.replay``), the event of which it is a translation
    (equal op, api, engine, location, options and operand roles, buffers, shapes, dtypes and
    sizes, so the same ``trace.cost``; the schedule reuses that cost), else None (not compared,
    not shown)."""
    op: str
    api: str
    engine: str
    core: int
    seq: int
    location: str
    reads: tuple
    writes: tuple
    options: dict = field(default_factory=dict)
    origin: Instruction | None = field(default=None, compare=False, repr=False)


class Recording(list):
    """The events of every launch run inside ``record()``, plus ``fast_paths`` counts;
    ``timing_only``: the launches may skip TensorE arithmetic (``nkisim.profile(compute=False)``)."""

    def __init__(self, timing_only: bool = False):
        super().__init__()
        self.timing_only = timing_only
        self.replayed = 0           # loops whose iterations runtime.replay synthesised
        self.fast_paths: Counter = Counter()
        self._lock = threading.Lock()

    def add_launch(self, per_core: list, counts: Counter) -> None:
        """Append one launch's events (a list per core) in (core, seq) order."""
        with self._lock:
            for events in per_core:
                self.extend(events)
            self.fast_paths.update(counts)


_ACTIVE: contextvars.ContextVar[Recording | None] = contextvars.ContextVar("nkisim_recording",
                                                                           default=None)


def active() -> Recording | None:
    """The innermost recording of the calling context (read when a launch starts)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def record(timing_only: bool = False):
    """``with nkisim.trace.record() as events:`` collects one ``Instruction`` per instruction of
    every kernel launched inside the block (``events.fast_paths`` counts the fast paths taken).
    ``timing_only=True``: matmuls in those launches skip their arithmetic (see
    ``nkisim.profile(compute=False)``); the events are the same."""
    rec = Recording(timing_only)
    token = _ACTIVE.set(rec)
    try:
        yield rec
    finally:
        _ACTIVE.reset(token)


__all__ = ["Instruction", "Operand", "Recording", "record", "active"]
