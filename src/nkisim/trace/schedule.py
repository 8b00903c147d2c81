"""The schedule: place one launch's instruction events on engines and DMA queues (a ``Timeline``).

``estimate(events, target, lnc)`` is a list schedule, not a sum of costs. Deterministic; imports
``arch`` and ``trace`` (events, cost, timeline) only.

- Each compute engine of a core (tensor, vector, scalar, gpsimd, sync) issues its instructions in
  program order; an instruction starts when its engine is free and every instruction it depends
  on has ended: read-after-write, write-after-read and write-after-write on overlapping bytes
  (partitions x bytes per partition on chip, bytes in HBM; ``Operand.part_*``/``byte_*``) of the
  same allocation. Decision: dependencies are per core; cores order each other only through
  ``core_barrier`` / ``sendrecv``.
- An instruction whose start was set by a dependency (also one that ends just as its engine
  frees up: back-to-back dependent instructions) pays its engine's static instruction overhead
  (100 cycles; ``Cost.wait_overhead_ns``), which stands for the cross-engine semaphore hand-off
  (Decision: the docs give no separate compute-engine semaphore latency; the DMA's ~1300 ns
  semaphore-to-start latency is already its fixed cost). A matmul that starts on an idle TensorE
  (not back to back) pays MM_INIT (64 cycles) more.
- Loop-body tiles rotate through K physical buffers (``physical_buffers``). Source: "Neuron
  Compiler inspects the above code and uses a heuristic-driven allocator to decide how many
  physical tiles are allocated to each tensor"; with one physical tile "the different loop
  iterations will end up completely serialized", with two ("double buffering") "the DMA copy
  from HBM to SBUF can overlap with the exponential operation" (Beta-1
  nki_direct_allocation_guide.rst, "Background"; nki/migration/index.rst "What are block
  dimensions?": "the compiler could choose to allocate 2 physical tiles"; a tile declared in
  the loop body is the NKI 0.2 form of a block dimension, "hoist it down inside the loop").
  So the k-th tile an on-chip allocation site makes shares its bytes with the (k-K)-th, and the
  schedule's write-after-read / write-after-write rule makes iteration i + K wait until
  iteration i's tile is no longer read. Tiles of one site that are live at the same time (a
  list of tiles filled by a loop, read later) get K buffers each (the allocator never maps two
  live tiles to one address). Decision: K = ``Settings.loop_tile_buffers`` (default 2, the
  guide's double buffering; the allocator's heuristic is not documented; None: every tile its
  own memory); SBUF and PSUM alike; the site of an allocation is the instruction (kernel line,
  operand role) that first touches it; kernel arguments and HBM tensors are not rotated.
- DMA queues. Decision: each DMA instruction goes, in issue order, to the core's queue that is
  free first (lowest number on ties; 16 queues, ``core<c>.dma<q>``); each queue runs its transfers
  in order; a transfer takes its fixed latency, then moves its bytes at most at its own rate
  (``Cost.rate``) through two shared pipes: the core's DMA bandwidth (16 x per-engine) and the
  launch's HBM share (``cores x device bandwidth / cores per device``; HBM bytes only). A pipe
  hands out its capacity in 256 ns buckets, earliest first, so transfers ready early use
  bandwidth left free by ones issued before them (``_Pipe``).
- Shared ports: NeuronCore-v2 VectorE and GpSimdE take turns on SBUF, VectorE and ScalarE on PSUM;
  v3+ VectorE and ScalarE take turns on the same PSUM bank only. Decision: a bank is
  ``byte offset // psum_bank_bytes`` within one PSUM allocation (allocations are bank aligned).
- LNC2: the cores run side by side (the core whose last placed instruction ended first places
  its next one, so the shared HBM pipe is shared fairly) and share the HBM bandwidth; ``core_barrier`` waits until every core has
  finished everything it issued before the barrier, then releases all of them a semaphore
  latency (``dma_fixed_ns``) after the last arrival; nothing of a core starts before its release.
  The k-th ``sendrecv`` of each core meet likewise, then the transfer runs as a DMA.
"""
from __future__ import annotations

from typing import Sequence

from .. import arch
from .cost import HBM_BUFFERS, cost, pe_peak_flops_per_ns
from .events import Instruction
from .timeline import Span, Timeline

_WHOLE = 1 << 62
_SYNC_OPS = frozenset(("core_barrier", "sendrecv"))
_ON_CHIP = frozenset(("sbuf", "psum"))
LOOP_TILE_BUFFERS = 2     # the default K (Settings.loop_tile_buffers); see the module docstring


class _Pipe:
    """A bandwidth shared by transfers: ``rate`` bytes/ns, handed out in buckets of ``width`` ns;
    ``full`` links each full bucket to a later candidate (path-compressed skip list)."""
    __slots__ = ("rate", "width", "room", "used", "full")

    def __init__(self, rate: float, width: float = 256.0):
        self.rate, self.width = rate, width
        self.room = rate * width
        self.used: dict = {}
        self.full: dict = {}

    def first_free(self, b: int) -> int:
        """The first bucket at or after ``b`` that is not full."""
        full = self.full
        if b not in full:
            return b
        path = []
        while b in full:
            path.append(b)
            b = full[b]
        for x in path:
            full[x] = b
        return b

    def take(self, b: int, nbytes: float) -> float:
        u = self.used[b] = self.used.get(b, 0.0) + nbytes
        if u >= self.room * 0.999999:
            self.full[b] = b + 1
        return u


def _reserve(t0: float, nbytes: float, cap: float, pipes: tuple) -> float:
    """Move ``nbytes`` from time ``t0`` at most ``cap`` bytes/ns through ``pipes`` ((pipe, f):
    f pipe bytes per byte moved; all pipes share one bucket width); returns the end time.

    Each bucket gives the transfer the bytes every pipe still has free in it, earliest first, so
    a transfer ready early uses bandwidth left free by transfers issued before it. The transfer
    ends no earlier than its last bucket's bytes at each pipe's full rate from the bucket's start,
    so no pipe ever carries more than ``rate`` x elapsed time (the physical floor holds)."""
    if nbytes <= 0:
        return t0
    w = pipes[0][0].width
    b = int(t0 // w)
    t = t0
    left = nbytes
    while True:
        nb = b
        moved = True
        while moved:                     # skip buckets some pipe has full
            moved = False
            for p, _ in pipes:
                if nb in p.full:
                    nb = p.first_free(nb)
                    moved = len(pipes) > 1
        if nb != b:
            b, t = nb, nb * w
        bend = (b + 1) * w
        span = bend - t
        room = span * cap
        for p, f in pipes:
            r = min(p.room - p.used.get(b, 0.0), span * p.rate) / f
            if r < room:
                room = r
        if room >= left:
            end = t + left / (room / span) if span > 0 else t
            for p, f in pipes:
                floor = b * w + p.take(b, left * f) / p.rate
                if floor > end:
                    end = floor
            return end
        if room > 0:
            for p, f in pipes:
                p.take(b, room * f)
            left -= room
        b += 1
        t = bend


class _Core:
    """One core's scheduling state."""
    __slots__ = ("engine_free", "queue_free", "dma_pipe", "deps", "ports", "floor",
                 "frontier", "syncs", "pending", "tensor_end", "latest", "floor_idx", "phys")

    def __init__(self, queues: int, dma_rate: float, phys: dict | None = None):
        self.phys = phys if phys is not None else {}   # on-chip alloc id -> its physical buffer
        self.engine_free: dict = {}
        self.queue_free = [0.0] * queues
        self.dma_pipe = _Pipe(dma_rate)
        self.deps: dict = {}        # alloc -> [writes [(p0, p1, b0, b1, end, idx)], reads {range: (end, idx)}]
        self.ports: dict = {}       # shared port -> free time
        self.floor = 0.0            # nothing starts before (a barrier's release)
        self.floor_idx = None       # the barrier span that set ``floor``
        self.frontier = 0.0         # end of the last placed instruction (cores advance in turn)
        self.syncs: dict = {}       # op -> count (k-th barrier / sendrecv)
        self.pending = None         # a sync instruction waiting for its partners
        self.tensor_end = None      # end of the last TensorE instruction (back-to-back test)
        self.latest = (0.0, None)   # (end, span index) of the span of this core ending last


def _accesses(ops, phys: dict) -> list:
    """(buffer, (p0, p1, b0, b1)) of each operand: the physical buffer of an on-chip allocation
    (``phys``; see ``physical_buffers``), else the allocation; unknown ranges are the whole
    allocation."""
    return [(phys.get(o.alloc, o.alloc), (o.part_start, o.part_end, o.byte_start, o.byte_end)
             if o.byte_end else (0, _WHOLE, 0, _WHOLE)) for o in ops]


def physical_buffers(events: Sequence[Instruction], buffers: int | None) -> dict:
    """On-chip allocation id -> physical buffer ``(core, location, role, buffer, lane, slot)``:
    the modulo allocation of a loop body's tiles (see the module docstring). ``buffers``: K, the
    physical buffers each lane of a site rotates through; None: every allocation is its own
    buffer (an empty map).

    A site is (core, location, role, buffer) of the instruction that first touches the
    allocation: the tiles a loop body declares at one line are first touched by the same
    instruction. In first-use order each tile takes the lowest lane of its site whose current
    tile is dead (last accessed before this tile's first access), or a new lane: tiles of one
    site live at the same time (a list of tiles filled by a loop; one helper called twice per
    iteration) get a lane each. The j-th tile of a lane gets slot ``j mod K``, so a lane's tile
    shares its buffer with the one K tiles before it, which is dead by then."""
    if buffers is None:
        return {}
    if isinstance(buffers, bool) or not isinstance(buffers, int) or buffers < 1:
        raise ValueError(f"schedule.estimate: loop_buffers must be a positive integer or None (the "
                         f"physical buffers of a loop body's tile), got {buffers!r}")
    first: dict = {}
    last: dict = {}
    for i, ev in enumerate(events):
        for ops in (ev.reads, ev.writes):
            for o in ops:
                if o.buffer in _ON_CHIP:
                    a = o.alloc
                    if a not in first:
                        first[a] = (i, (ev.core, ev.location, o.role, o.buffer))
                    last[a] = i
    lanes: dict = {}            # site -> [[last access of the lane's current tile, tiles so far], ...]
    phys: dict = {}
    for a, (i, site) in first.items():      # dicts keep insertion order: first-use order
        site_lanes = lanes.get(site)
        if site_lanes is None:
            site_lanes = lanes[site] = []
        for n, lane in enumerate(site_lanes):
            if lane[0] < i:
                break
        else:
            n, lane = len(site_lanes), [0, 0]
            site_lanes.append(lane)
        phys[a] = (*site, n, lane[1] % buffers)
        lane[0] = last[a]
        lane[1] += 1
    return phys


def _deps(st: _Core, reads: list, writes: list):
    """(ready time, index of the binding span) over the RAW / WAR / WAW dependencies: every
    access waits for the earlier writes of overlapping bytes; a write also for earlier reads."""
    ready, idx = 0.0, None
    deps = st.deps
    for accesses, after_reads in ((reads, False), (writes, True)):
        for alloc, (p0, p1, b0, b1) in accesses:
            e = deps.get(alloc)
            if e is None:
                continue
            for w in e[0]:                  # (p0, p1, b0, b1, end, span index)
                if w[4] > ready and p0 < w[1] and w[0] < p1 and b0 < w[3] and w[2] < b1:
                    ready, idx = w[4], w[5]
            if after_reads:
                for r, w in e[1].items():   # range -> (end, span index)
                    if w[0] > ready and p0 < r[1] and r[0] < p1 and b0 < r[3] and r[2] < b1:
                        ready, idx = w[0], w[1]
    return ready, idx


def _record(st: _Core, reads: list, writes: list, end: float, idx: int) -> None:
    """Remember the accesses: writes as a list, reads by range (the latest end kept); a write
    supersedes the accesses it covers."""
    deps = st.deps
    for alloc, r in reads:
        e = deps.get(alloc)
        if e is None:
            e = deps[alloc] = [[], {}]
        x = e[1].get(r)
        if x is None or end >= x[0]:
            e[1][r] = (end, idx)
    for alloc, r in writes:
        e = deps.get(alloc)
        if e is None:
            e = deps[alloc] = [[], {}]
        p0, p1, b0, b1 = r
        if e[0]:
            e[0] = [x for x in e[0] if not (p0 <= x[0] and x[1] <= p1 and b0 <= x[2] and x[3] <= b1)]
        if e[1]:
            e[1] = {x: v for x, v in e[1].items()
                    if not (p0 <= x[0] and x[1] <= p1 and b0 <= x[2] and x[3] <= b1)}
        e[0].append((*r, end, idx))


def _ports(t: arch.Target, kind: str, ev: Instruction, phys: dict) -> tuple:
    """The shared SBUF / PSUM ports ``ev`` on engine ``kind`` takes (see the module docstring)."""
    if kind not in ("vector", "gpsimd", "scalar"):
        return ()
    out = []
    ops = (*ev.reads, *ev.writes)
    if t.shared_sbuf_vector_gpsimd and kind in ("vector", "gpsimd") and any(o.buffer == "sbuf" for o in ops):
        out.append("sbuf.vector+gpsimd")
    if kind in ("vector", "scalar"):
        if t.shared_psum_vector_scalar:
            if any(o.buffer == "psum" for o in ops):
                out.append("psum.vector+scalar")
        else:
            bank = t.psum_bank_bytes
            for o in ops:
                if o.buffer == "psum":
                    if o.byte_end:
                        a = phys.get(o.alloc, o.alloc)
                        out.extend(f"{a}.bank{b}" for b in range(o.byte_start // bank,
                                                                         (o.byte_end - 1) // bank + 1))
                    else:
                        out.append(f"{phys.get(o.alloc, o.alloc)}.bank*")
    return tuple(out)


def estimate(events: Sequence[Instruction], target: arch.Target, lnc: int,
             loop_buffers: int | None = LOOP_TILE_BUFFERS) -> Timeline:
    """The estimated ``Timeline`` of one launch's events (all cores, in (core, seq) order).

    ``target``: the ``arch.Target`` simulated; ``lnc``: the launch's cores (1 or 2);
    ``loop_buffers``: K, the physical buffers of a loop body's tile (None: unbounded; ValueError
    below 1; see ``physical_buffers``). Spans come
    back in the order of ``events``. Deterministic. Cost: a few µs per event."""
    t = target
    n = len(events)
    spans: list = [None] * n
    per_core: dict = {}
    for i, ev in enumerate(events):
        per_core.setdefault(ev.core, []).append(i)
    cores = sorted(per_core)
    dma_rate = t.dma_core_bytes_per_ns
    phys = physical_buffers(events, loop_buffers)
    state = {c: _Core(t.dma_engines, dma_rate, phys) for c in cores}
    pos = {c: 0 for c in cores}
    ncores = max(lnc, len(cores), 1)
    hbm_rate = t.hbm_core_bytes_per_ns * ncores
    shared = {"hbm": _Pipe(hbm_rate)}
    peak_mode = 0.0
    waiting: dict = {}          # (op, k) -> {core: (index, arrival, cost)}
    memo: dict = {}             # cost() depends only on the event's op, engine, operand shapes, options

    def cost_of(ev):
        try:
            ck = (ev.op, ev.engine,
                  tuple([(o.role, o.buffer, o.shape, o.dtype, o.nbytes, o.partitions, o.contiguous_bytes)
                         for o in ev.reads]),
                  tuple([(o.role, o.buffer, o.shape, o.dtype, o.nbytes, o.partitions, o.contiguous_bytes)
                         for o in ev.writes]),
                  tuple(ev.options.items()))
            co = memo.get(ck)
            if co is None:
                co = memo[ck] = cost(ev, t)
        except TypeError:               # an unhashable option value: no memo
            co = cost(ev, t)
        return co

    if len(cores) == 1:         # one core: its events in order, no rendezvous
        st = state[cores[0]]
        for idx, ev in enumerate(events):
            co = cost_of(ev)
            if co.peak_flops_per_ns > peak_mode and co.flops:
                peak_mode = co.peak_flops_per_ns
            _place(idx, ev, co, st, t, spans, shared, hbm_rate, dma_rate, 0.0)
    while len(cores) > 1:
        live = [c for c in cores if pos[c] < len(per_core[c]) and state[c].pending is None]
        if not live:
            if not waiting:
                break
            key = min(waiting)       # release the oldest rendezvous (partners finished or absent)
            _release(waiting.pop(key), key, events, spans, state, pos, t, shared, hbm_rate, dma_rate)
            continue
        c = live[0] if len(live) == 1 else min(live, key=lambda k: (state[k].frontier, k))
        st = state[c]
        idx = per_core[c][pos[c]]
        ev = events[idx]
        co = cost_of(ev)
        if co.peak_flops_per_ns > peak_mode and co.flops:
            peak_mode = co.peak_flops_per_ns
        if ev.op in _SYNC_OPS and len(cores) > 1:
            k = st.syncs.get(ev.op, 0)
            st.syncs[ev.op] = k + 1
            ready, _ = _deps(st, _accesses(ev.reads, st.phys), _accesses(ev.writes, st.phys))
            arrive = max(ready, st.floor, *st.engine_free.values(), *st.queue_free) \
                if ev.op == "core_barrier" else max(ready, st.floor)
            key = (ev.op, k)
            group = waiting.setdefault(key, {})
            group[c] = (idx, arrive, co, st.latest[1])
            st.pending = key
            st.frontier = arrive
            if len(group) == len(cores):
                _release(waiting.pop(key), key, events, spans, state, pos, t, shared, hbm_rate, dma_rate)
            continue
        _place(idx, ev, co, st, t, spans, shared, hbm_rate, dma_rate, 0.0)
        pos[c] += 1

    total = max((s.end_ns for s in spans), default=0.0)
    return Timeline(target=t.name, lnc=lnc, spans=spans, total_ns=total,
                    peak_flops_per_ns=(peak_mode or pe_peak_flops_per_ns(t)) * ncores,
                    hbm_bytes_per_ns=hbm_rate)


def _place(idx, ev, co, st: _Core, t, spans, shared, hbm_rate, dma_rate, not_before) -> None:
    """Place one instruction on its engine / queue of core state ``st``."""
    kind = co.kind
    reads, writes = _accesses(ev.reads, st.phys), _accesses(ev.writes, st.phys)
    ready, dep = _deps(st, reads, writes)
    if not_before > ready:
        ready, dep = not_before, None
    if kind == "dma":
        qf = st.queue_free
        free = min(qf)
        q = qf.index(free)
        track = f"core{ev.core}.dma{q}"
    else:
        free = st.engine_free.get(kind, 0.0)
        track = f"core{ev.core}.{kind}"
    waited = None
    if st.floor > free:                 # held by a barrier: that is what this start waited on
        free, waited = st.floor, st.floor_idx
    start = free
    bound = dep is not None and ready >= free     # the dependency, not the track, sets the start
    if ready > free:
        start, waited = ready, dep
    ports = _ports(t, kind, ev, st.phys) if kind != "dma" else ()
    why = co.why
    for p in ports:
        pf = st.ports.get(p, 0.0)
        if pf > start:
            start, waited = pf, None
            why = co.why + f"; waited for the shared port {p}"
    if kind == "dma":
        data = start + co.fixed_ns
        pipes = ((st.dma_pipe, 1.0), (shared["hbm"], co.hbm_bytes / co.dma_bytes)) if co.hbm_bytes \
            else ((st.dma_pipe, 1.0),)
        end = _reserve(data, co.dma_bytes, co.rate, pipes)
        if end > data + co.dma_bytes / co.rate * 1.000001:
            why += f"; bandwidth shared (core DMA {dma_rate:g} B/ns, HBM {hbm_rate:g} B/ns)"
        st.queue_free[q] = end
    else:
        dur = co.duration_ns
        if kind == "tensor":
            if st.tensor_end is None or start > st.tensor_end:
                dur += co.wait_overhead_ns
                why += f" + MM_INIT {t.mm_init_cycles} cycles (not back to back)"
        elif bound:
            dur += co.wait_overhead_ns
            why += f" + static overhead {t.static_overhead_cycles} cycles (waited on a dependency)"
        end = start + dur
        if co.hbm_bytes:            # a compute engine reading HBM (rare) still takes HBM bandwidth
            end = max(end, _reserve(start, co.hbm_bytes, co.hbm_bytes / dur, ((shared["hbm"], 1.0),)))
        st.engine_free[kind] = end
        if kind == "tensor":
            st.tensor_end = end
    for p in ports:
        st.ports[p] = end
    _record(st, reads, writes, end, idx)
    st.frontier = end
    if st.latest[1] is None or end >= st.latest[0]:
        st.latest = (end, idx)
    spans[idx] = Span(ev, track, start, end, co.flops, co.hbm_bytes, waited, why)


def _release(group, key, events, spans, state, pos, t, shared, hbm_rate, dma_rate) -> None:
    """Release a rendezvous: every core of ``group`` (core -> (index, arrival, cost)) continues."""
    op = key[0]
    last = max(a for _, a, _, _ in group.values())
    # the barrier is bound by the core that arrived last, and that core by its span ending last
    binding = max(group.values(), key=lambda g: g[1])[3]
    for c in sorted(group):
        idx, arrive, co, _ = group[c]
        st = state[c]
        ev = events[idx]
        if op == "core_barrier":
            kind = co.kind
            release = last + co.duration_ns + t.dma_fixed_ns
            spans[idx] = Span(event=ev, track=f"core{c}.{kind}", start_ns=arrive, end_ns=release,
                              waited_on=binding,
                              why=co.why + f"; released {release - arrive:.0f} ns after arrival")
            st.engine_free[kind] = release
            st.floor, st.floor_idx = release, idx
            st.latest = (release, idx)
            _record(st, _accesses(ev.reads, st.phys), _accesses(ev.writes, st.phys), release, idx)
        else:
            _place(idx, ev, co, st, t, spans, shared, hbm_rate, dma_rate, last)
        st.pending = None
        pos[c] += 1


__all__ = ["estimate"]
