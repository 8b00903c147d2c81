"""The estimated-device-time contract: ``Span`` (one instruction placed on a track) and ``Timeline``.

The cost model (``trace.cost``) gives each ``Instruction`` event a duration; the scheduler
(``trace.schedule.estimate``) places the events of one launch on tracks and returns a
``Timeline``; the profile layer (``trace.profile``) reads only this contract. Imports nothing
from nkisim but ``trace.events``.

Tracks name where an instruction runs: ``"core<c>.<engine>"`` for the compute engines (tensor,
vector, scalar, gpsimd, sync) and ``"core<c>.dma<q>"`` for DMA queue q of core c. Times are
nanoseconds of estimated device time from the launch's first instruction.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .events import Instruction


@dataclass(slots=True)
class Span:
    """One instruction placed on the timeline (immutable by contract; not ``frozen`` because a
    frozen dataclass costs several times as much to build, once per instruction).

    ``event``: the instruction; ``track``: where it ran (see the module docstring);
    ``start_ns``/``end_ns``: estimated device time; ``flops``: floating-point operations done on
    TensorE (2 per multiply-add; 0 elsewhere); ``hbm_bytes``: HBM bytes read plus written;
    ``waited_on``: index in ``Timeline.spans`` of the span whose end let this one start later than
    its track became free (its binding dependency; None when the track itself was the limit);
    ``why``: the cost rule applied, e.g. ``"matmul max(min(64, 128), 512) cycles x1 @ 2.4 GHz"``."""
    event: Instruction
    track: str
    start_ns: float
    end_ns: float
    flops: int = 0
    hbm_bytes: int = 0
    waited_on: int | None = None
    why: str = ""

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns


@dataclass
class Timeline:
    """Every span of one launch (all cores), in issue order per core, plus the launch's facts.

    ``target``: generation name; ``lnc``: cores; ``total_ns``: end of the last span;
    ``peak_flops_per_ns``: TensorE peak of the launch's cores for the dtypes used (for HFU);
    ``hbm_bytes_per_ns``: the generation's HBM bandwidth share of the launch's cores (for MBU)."""
    target: str
    lnc: int
    spans: list = field(default_factory=list)
    total_ns: float = 0.0
    peak_flops_per_ns: float = 0.0
    hbm_bytes_per_ns: float = 0.0


__all__ = ["Span", "Timeline"]
