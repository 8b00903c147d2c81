"""``Profile``: one launch's estimated device time read off its ``Timeline`` — figures, per-line
table, critical path, warnings, and the Perfetto / PNG outputs (``trace.export``).

Reads only the ``trace.timeline`` contract (and ``arch`` through ``trace.advice``); never runs a
kernel (``runtime.profiling`` does, then builds a Profile from ``schedule.estimate``).
Source: the figures neuron-profile shows for a kernel (aws-neuron-sdk nki/guides/use-neuron-profile.rst,
tools/neuron-explorer/overview-device-profiles.rst, nki/deep-dives/nki_perf_guide.rst).
"""
from __future__ import annotations

import functools

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from . import advice
from .timeline import Timeline

# Decision: lines shown in summary()'s per-line table and critical path (the rest is counted)
SUMMARY_LINES = 10


@dataclass(frozen=True, slots=True)
class InstructionRecord:
    """One instruction on the estimated timeline: ``start_us``/``end_us`` (µs from the launch's
    first instruction), ``engine`` (the nisa engine that ran it), ``track`` (``core<c>.<engine>`` or
    ``core<c>.dma<q>``), ``op`` (ISA instruction), ``api`` (what the kernel called), ``location``
    (``file.py:LINE``), ``core``, ``seq``, ``flops`` (TensorE), ``hbm_bytes``, ``why`` (the cost rule),
    ``duration_us`` (from the span's nanoseconds, so equal durations compare equal)."""
    start_us: float
    end_us: float
    engine: str
    track: str
    op: str
    api: str
    location: str
    core: int
    seq: int
    flops: int = 0
    hbm_bytes: int = 0
    why: str = ""
    duration_us: float = 0.0


def _busy_ns(intervals: list) -> float:
    """Length of the union of ``(start, end)`` intervals (ns)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def critical_path(timeline: Timeline) -> list:
    """Indices into ``timeline.spans`` of the critical path, first to last: from the span that ends
    last, follow ``waited_on`` (the binding dependency); where it is None the track was the limit,
    so the path goes on through the span before it on the same track (the one ending last before
    it, when it ends by its start; else the path begins there). Across an LNC2 ``core_barrier``
    the path goes on from the barrier to the span that made the last core arrive (its latest
    ending one), and an instruction held by a barrier's release waits on that barrier, so the path
    crosses cores. Empty for an empty timeline.
    Decision: ties for the last span go to the first one in ``spans`` order."""
    spans = timeline.spans
    if not spans:
        return []
    prev_on_track: list = [None] * len(spans)    # the span before each one on its track
    last_on: dict = {}
    for j in sorted(range(len(spans)), key=lambda j: (spans[j].end_ns, j)):
        t = spans[j].track
        prev_on_track[j] = last_on.get(t)
        last_on[t] = j
    last = max(range(len(spans)), key=lambda i: (spans[i].end_ns, -i))
    path, seen, i = [], set(), last
    while i is not None and i not in seen:
        seen.add(i)
        path.append(i)
        s = spans[i]
        if s.waited_on is not None:
            i = s.waited_on
            continue
        j = prev_on_track[i]
        i = j if j is not None and spans[j].end_ns <= s.start_ns + 1e-9 else None
    return path[::-1]


def _path_times(path: list) -> list:
    """The time (us) each record of a critical path (first to last) adds to it: from where the
    path so far ended (or its own start, if later) to its own end, never negative.
    Decision: not each record's duration. Path records can overlap in time: an LNC2
    ``core_barrier`` span lasts from its own core's arrival to the release, and the path reaches
    it from the span that made the last core arrive, which ended later than that arrival; summing
    durations counted the overlap twice (a path "busier" than the whole estimate). Counted this
    way the path's times are disjoint, so their sum never exceeds ``total_us``."""
    times, reached = [], None
    for r in path:
        start = r.start_us if reached is None or r.start_us > reached else reached
        times.append(r.end_us - start if r.end_us > start else 0.0)
        if reached is None or r.end_us > reached:
            reached = r.end_us
    return times


class Profile:
    """The estimated device time of one kernel launch.

    Attributes: ``kernel`` (name), ``target``, ``lnc``, ``timeline`` (the scheduler's ``Timeline``),
    ``events`` (the launch's ``Instruction`` events), ``outputs`` (what the kernel returned, as the
    caller's arrays; None when the profile was built from a timeline alone), ``total_us``,
    ``engine_busy`` (track -> busy fraction of ``total_us``, 0..1), ``records``
    (``InstructionRecord`` per span, in ``timeline.spans`` order), ``hfu`` (TensorE FLOPs /
    (peak FLOP rate x time), 0..1), ``mbu`` (HBM bytes / (HBM bandwidth x time), 0..1),
    ``warnings`` (``trace.advice.ProfileWarning``; ``str()`` is the message), ``critical_path``
    (``records`` indices, first to last). Decision: hfu / mbu are 0 when the timeline has no peak
    (``peak_flops_per_ns`` / ``hbm_bytes_per_ns`` 0) or no time.
    """

    def __init__(self, timeline: Timeline, events: Sequence | None = None, *, kernel: str = "kernel",
                 outputs: Any = None):
        self.timeline = timeline
        self.kernel = kernel
        self.target = timeline.target
        self.lnc = timeline.lnc
        self.events = list(events) if events is not None else [s.event for s in timeline.spans]
        self.outputs = outputs
        total = timeline.total_ns
        self.total_us = total / 1000.0
        per_track: dict = {}
        flops = hbm_bytes = 0
        for s in timeline.spans:        # one pass: the tracks' intervals, FLOPs and HBM bytes (ints)
            iv = per_track.get(s.track)
            if iv is None:
                iv = per_track[s.track] = []
            iv.append((s.start_ns, s.end_ns))
            flops += s.flops
            hbm_bytes += s.hbm_bytes
        self.engine_busy = {t: (_busy_ns(iv) / total if total > 0 else 0.0)
                            for t, iv in sorted(per_track.items(), key=lambda kv: _track_order(kv[0]))}
        self.flops, self.hbm_bytes = flops, hbm_bytes
        peak, bw = timeline.peak_flops_per_ns, timeline.hbm_bytes_per_ns
        self.hfu = self.flops / (peak * total) if peak > 0 and total > 0 else 0.0
        self.mbu = self.hbm_bytes / (bw * total) if bw > 0 and total > 0 else 0.0

    @functools.cached_property
    def critical_path(self) -> list:
        """``records`` indices of the critical path, first to last (``critical_path``; built on
        first use)."""
        return critical_path(self.timeline)

    @functools.cached_property
    def warnings(self) -> list:
        """``trace.advice.warnings_for(timeline)`` (built on first use)."""
        return advice.warnings_for(self.timeline)

    # ---- tables ------------------------------------------------------------------------------
    def line_times(self) -> list:
        """``(location, api, instructions, busy µs)`` per kernel line, longest first: the sum of
        the durations of the line's instructions (on all tracks); ties in first-issue order."""
        acc: dict = {}
        for r in self.records:
            loc = acc.setdefault(r.location, [r.api, 0, 0.0])
            loc[1] += 1
            loc[2] += r.duration_us
        rows = [(loc, a, n, t) for loc, (a, n, t) in acc.items()]
        order = {row[0]: i for i, row in enumerate(rows)}
        return sorted(rows, key=lambda x: (-x[3], order[x[0]]))

    def summary(self) -> str:
        """A text report: the estimate, HFU / MBU, time per track, the top kernel lines by time,
        the critical path (grouped by kernel line, in path order) and the warnings."""
        out = [f"{self.kernel}: estimated {self.total_us:.3f} us on {self.target} (LNC{self.lnc}), "
               f"{len(self.records)} instructions; HFU {self.hfu:.1%}, MBU {self.mbu:.1%}"]
        counts: dict = defaultdict(int)
        busy_us: dict = defaultdict(float)
        for r in self.records:
            counts[r.track] += 1
            busy_us[r.track] += r.duration_us
        out.append(f"  {'track':<16} {'busy us':>10} {'busy':>7} {'instructions':>13}")
        for t, frac in self.engine_busy.items():
            out.append(f"  {t:<16} {frac * self.total_us:>10.3f} {frac:>7.1%} {counts[t]:>13}")
        lines = self.line_times()
        out.append("top kernel lines by time:")
        for loc, api, n, t in lines[:SUMMARY_LINES]:
            out.append(f"  {loc:<28} {api:<24} {n:>6} x {t:>10.3f} us")
        if len(lines) > SUMMARY_LINES:
            out.append(f"  ... {len(lines) - SUMMARY_LINES} more lines")
        path = [self.records[i] for i in self.critical_path]
        times = _path_times(path)
        out.append(f"critical path: {len(path)} instructions, "
                   f"{sum(times):.3f} us busy of {self.total_us:.3f} us")
        groups: list = []
        for r, t in zip(path, times):
            if groups and groups[-1][0] == (r.location, r.track):
                groups[-1][1] += 1
                groups[-1][2] += t
            else:
                groups.append([(r.location, r.track), 1, t, r.api])
        for (loc, track), n, t, api in groups[:SUMMARY_LINES]:
            out.append(f"  {loc:<28} {api:<24} {track:<14} {n:>6} x {t:>10.3f} us")
        if len(groups) > SUMMARY_LINES:
            out.append(f"  ... {len(groups) - SUMMARY_LINES} more steps")
        out.append(f"warnings: {len(self.warnings) or 'none'}")
        out.extend(f"  {w.message}" for w in self.warnings)
        return "\n".join(out)

    @functools.cached_property
    def records(self) -> list:
        """``InstructionRecord`` per span, in ``timeline.spans`` order (built on first use)."""
        return [InstructionRecord(s.start_ns / 1000.0, s.end_ns / 1000.0, s.event.engine, s.track,
                                  s.event.op, s.event.api, s.event.location, s.event.core,
                                  s.event.seq, s.flops, s.hbm_bytes, s.why, s.duration_ns / 1000.0)
                for s in self.timeline.spans]

    def __repr__(self):
        return f"<Profile {self.kernel}: {self.total_us:.3f} us on {self.target}, {len(self.records)} instructions>"

    # ---- outputs -----------------------------------------------------------------------------
    def save_trace(self, path) -> str:
        """Write the timeline as Chrome-trace JSON (opens in ui.perfetto.dev); returns the path.
        See ``trace.export.write_trace``."""
        from .export import write_trace
        return write_trace(self, path)

    def plot(self, path) -> str:
        """Draw the timeline as a PNG (one row per track); returns the path. Needs matplotlib
        (``pip install nkisim[plot]``). See ``trace.export.write_png``."""
        from .export import write_png
        return write_png(self, path)


def _track_order(track: str) -> tuple:
    """Sort key of a track name: by core, then tensor, vector, scalar, gpsimd, sync, other engines,
    then DMA queues by number."""
    core, _, eng = track.partition(".")
    c = int(core[4:]) if core.startswith("core") and core[4:].isdigit() else 0
    order = ("tensor", "vector", "scalar", "gpsimd", "sync")
    if eng in order:
        return (c, 0, order.index(eng), "")
    if eng.startswith("dma") and eng[3:].isdigit():
        return (c, 2, int(eng[3:]), "")
    return (c, 1, 0, eng)


__all__ = ["Profile", "InstructionRecord", "critical_path", "SUMMARY_LINES"]
