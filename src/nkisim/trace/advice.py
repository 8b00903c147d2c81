"""The profiler's performance warnings over one launch's Timeline, each naming kernel line(s).

Reads only the ``trace.timeline`` contract, the events it holds and ``arch``. Sources:
aws-neuron-sdk tools/neuron-explorer/overview-device-profiles.rst ("Automatic timeline warnings",
"Small DMA transfers"), nki/deep-dives/nki-dma-bandwidth-guide.rst ("Bandwidth vs. Payload Size"),
nki/deep-dives/nki_perf_guide.rst (Opt #1 input reloading, "Reducing engine idle time" / Opt #3,
Opt #5b fewer than 128 partitions and MultiplyMoving using < 128 PE columns), and
nki/guides/use-neuron-profile.rst (the profiler these stand in for).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .. import arch
from .timeline import Timeline

# Decision: an engine's idle gaps caused by one producer line are worth a warning once they add
# up to this fraction of the launch's time (the docs give no threshold; smaller gaps are noise)
IDLE_CHAIN_FRACTION = 0.10

_HBM = ("hbm", "shared_hbm", "private_hbm")
_ON_CHIP = ("sbuf", "psum")
_MATMUL_OPS = ("nc_matmul",)
_COMPUTE_ENGINES = ("vector", "scalar", "gpsimd")


@dataclass(frozen=True)
class ProfileWarning:
    """One performance warning: ``kind`` (``small_dma``, ``partitions``, ``matmul_fill``,
    ``reload``, ``idle_chain``), the ``message`` (names the line(s) and the numbers), the kernel
    ``locations`` (``file.py:LINE``) it is about, and ``count``: instructions concerned."""
    kind: str
    message: str
    locations: tuple
    count: int = 1

    def __str__(self) -> str:
        return self.message


def _is_dma(ev) -> bool:
    return ev.engine == "dma"


def _by_line(items) -> dict:
    """``(location, value)`` pairs grouped: location -> list of values, in first-seen order."""
    out: dict = defaultdict(list)
    for loc, v in items:
        out[loc].append(v)
    return out


def small_dmas(spans) -> list:
    """DMAs moving fewer than ``arch.DMA_EFFICIENT_PARTITION_BYTES`` (2 KiB) of contiguous bytes
    per partition: the smallest ``contiguous_bytes`` over the instruction's operands (the on-chip
    side counts per partition, the HBM side its longest dense run). One warning per kernel line.
    Source: nki-dma-bandwidth-guide.rst ("< 256 B per partition: severely overhead-bound", "at
    least 2 KiB of contiguous data per partition"); overview-device-profiles.rst "Small DMA
    transfers"."""
    limit = arch.DMA_EFFICIENT_PARTITION_BYTES
    found = []
    for s in spans:
        ev = s.event
        ops = ev.reads + ev.writes
        if not _is_dma(ev) or not ops:
            continue
        run = min(o.contiguous_bytes for o in ops)
        if run < limit:
            found.append((ev.location, (run, ev.api)))
    out = []
    for loc, vals in _by_line(found).items():
        runs = [r for r, _ in vals]
        lo, hi = min(runs), max(runs)
        size = f"{lo} B" if lo == hi else f"{lo}-{hi} B"
        out.append(ProfileWarning(
            "small_dma", f"{loc}: {len(vals)} DMA(s) ({vals[0][1]}) move {size} contiguous per partition, "
                         f"below the {limit} B per partition the DMA bandwidth guide recommends; "
                         f"DMA fixed cost dominates (make the free dimension larger or batch the transfers)",
            (loc,), len(vals)))
    return out


def few_partitions(spans, target) -> list:
    """VectorE / ScalarE / GpSimd instructions whose on-chip operands span fewer than ``pmax``
    (128) partitions: each partition is one lane, so the rest idle ("an instruction that
    read/write less than 128 partitions", nki_perf_guide.rst Opt #5b). One warning per line."""
    pmax = target.pmax
    found = []
    for s in spans:
        ev = s.event
        if ev.engine not in _COMPUTE_ENGINES:
            continue
        parts = [o.partitions for o in ev.reads + ev.writes if o.buffer in _ON_CHIP]
        if parts and max(parts) < pmax:
            found.append((ev.location, (max(parts), ev.api, s.duration_ns)))
    out = []
    for loc, vals in _by_line(found).items():
        used = max(p for p, _, _ in vals)
        busy = sum(d for _, _, d in vals)
        out.append(ProfileWarning(
            "partitions", f"{loc}: {len(vals)} instruction(s) ({vals[0][1]}) use at most {used} of "
                          f"{pmax} partitions ({busy / 1000:.3f} us); the other lanes idle "
                          f"(partition vectorization: put independent tiles on disjoint partitions)",
            (loc,), len(vals)))
    return out


def matmul_fill(spans, target) -> list:
    """Matmuls that under-fill the PE array: the stationary tile (K partitions x M free elements)
    maps to PE rows x columns of the ``pmax`` x ``gemm_stationary_fmax`` (128 x 128) array; fewer
    rows or columns leave PEs unused ("only uses 128 rows and 96 columns of the processing
    elements out of the available 128x128 systolic array", nki_perf_guide.rst Opt #5b)."""
    rows_max, cols_max = target.pmax, target.gemm_stationary_fmax
    found = []
    for s in spans:
        ev = s.event
        if ev.op not in _MATMUL_OPS:
            continue
        st = next((o for o in ev.reads if o.role == "stationary"), None)
        if st is None or not st.shape:
            continue
        rows = st.partitions
        cols = 1
        for d in st.shape[1:]:
            cols *= d
        if rows < rows_max or cols < cols_max:
            found.append((ev.location, (rows, cols, ev.api)))
    out = []
    for loc, vals in _by_line(found).items():
        rows = max(r for r, _, _ in vals)
        cols = max(c for _, c, _ in vals)
        fill = rows * cols / (rows_max * cols_max)
        out.append(ProfileWarning(
            "matmul_fill", f"{loc}: {len(vals)} matmul(s) ({vals[0][2]}) use {rows} rows x {cols} columns "
                           f"of the {rows_max}x{cols_max} PE array ({fill:.0%} at most); "
                           f"use a stationary tile of {rows_max} partitions x {cols_max} elements",
            (loc,), len(vals)))
    return out


def reloads(spans) -> list:
    """DMAs that load the same HBM bytes again: a read of an HBM view with the same allocation,
    ``view`` (offset, strides), shape and dtype as an earlier DMA read on the same core, with no
    write to that allocation in between (nki_perf_guide.rst Opt #1: "input data reloading", the
    profiler's reload warning names the tensor, its size and how many times it was reloaded).
    Decision: exact same view only (a partly overlapping view is not counted); per core (each
    core has its own SBUF); views of unknown offset are skipped. One warning per line."""
    seen: dict = {}          # (core, alloc) -> {(view, shape, dtype): location of the first load}
    found = []
    for s in spans:
        ev = s.event
        if not _is_dma(ev):
            continue
        for o in ev.reads:
            if o.buffer not in _HBM or not o.view or o.view[0] is None:
                continue
            loads = seen.setdefault((ev.core, o.alloc), {})
            key = (o.view, o.shape, o.dtype)
            if key in loads:
                found.append((ev.location, (loads[key], o.alloc, o.nbytes)))
            else:
                loads[key] = ev.location
        for o in ev.writes:
            if o.buffer in _HBM:
                seen.pop((ev.core, o.alloc), None)
    out = []
    for loc, vals in _by_line(found).items():
        firsts = sorted({f for f, _, _ in vals})
        allocs = sorted({a for _, a, _ in vals})
        total = sum(n for _, _, n in vals)
        out.append(ProfileWarning(
            "reload", f"{loc}: {len(vals)} load(s) read HBM bytes of {', '.join(allocs)} already loaded "
                      f"(first at {', '.join(firsts)}), {total} B again; keep the tile in SBUF or reorder "
                      f"the loops", tuple(dict.fromkeys((loc, *firsts))), len(vals)))
    return out


def idle_chains(timeline: Timeline) -> list:
    """An engine idle waiting on one dependency chain: on each track, the gap before a span whose
    start was set by ``waited_on`` (its binding dependency, not the track) is charged to the
    producer's kernel line; a (track, producer line) whose gaps add up to at least
    ``IDLE_CHAIN_FRACTION`` of the launch's time is reported with both lines ("for each engine idle
    gap ... inspect the semaphore wait condition of the first instruction after the gap",
    nki_perf_guide.rst "Reducing engine idle time", Opt #3 pipelining)."""
    spans, total = timeline.spans, timeline.total_ns
    if total <= 0:
        return []
    last_end: dict = {}
    idle: dict = defaultdict(float)
    waiters: dict = defaultdict(list)
    for s in spans:
        prev = last_end.get(s.track, 0.0)
        gap = s.start_ns - prev
        if s.waited_on is not None and gap > 0:
            producer = spans[s.waited_on]
            key = (s.track, producer.event.location, producer.track)
            idle[key] += gap
            waiters[key].append(s.event.location)
        last_end[s.track] = max(prev, s.end_ns)
    out = []
    for (track, ploc, ptrack), gap in sorted(idle.items(), key=lambda kv: -kv[1]):
        if gap < IDLE_CHAIN_FRACTION * total:
            continue
        wlocs = tuple(dict.fromkeys(waiters[(track, ploc, ptrack)]))
        shown = ", ".join(wlocs[:3]) + (", ..." if len(wlocs) > 3 else "")
        out.append(ProfileWarning(
            "idle_chain", f"{track} idles {gap / 1000:.3f} us ({gap / total:.0%} of the time) before {shown}, "
                          f"waiting on {ploc} ({ptrack}); pipeline the work in smaller tiles so the "
                          f"engines overlap", (*wlocs, ploc), len(waiters[(track, ploc, ptrack)])))
    return out


def warnings_for(timeline: Timeline) -> list:
    """Every warning of one launch, in the order small DMAs, partitions, matmul fill, reloads,
    idle chains. Raises KeyError for an unknown ``timeline.target``."""
    target = arch.get(timeline.target)
    spans = timeline.spans
    return (small_dmas(spans) + few_partitions(spans, target) + matmul_fill(spans, target)
            + reloads(spans) + idle_chains(timeline))


__all__ = ["ProfileWarning", "warnings_for", "small_dmas", "few_partitions", "matmul_fill", "reloads",
           "idle_chains", "IDLE_CHAIN_FRACTION"]
