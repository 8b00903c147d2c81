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

Speed (the same schedule, float for float, as the plain reading of these rules:
tests/trace/test_schedule_reference.py runs one on random event streams, and
tests/trace/test_schedule_pinned.py on real kernels, pinned to digests): physical buffers are
numbered once per estimate so the dependency table hashes ints, not 6-tuples; the same pass over
the operands (``_scan``) collects the allocations some event writes, and a read of bytes nothing
ever writes is neither scanned nor remembered (no dependency can bind it either way: kernel
inputs); each ``Cost`` is prepared once (``_prepare``: its fields, its rule text with each note
the schedule may append, the derived floats) and ``_place`` unpacks one tuple; ``_place`` scans
the dependencies inline; a write that covers the one earlier write of its buffer drops it in
place (and a single read range likewise); ``_place`` hands ``_record`` the table entries it
found; the DMA queue free first comes off a heap of (free time, queue); a DMA's two pipes (core,
HBM) are reserved by an unrolled loop (``_reserve2``, each bucket's bytes read once); track names
are built once; an event loop replay synthesised (``Instruction.origin`` set) takes its origin's
prepared cost, its memo key being equal by construction. Decision: the table still drops
the accesses a write covers (they can never bind again: the covering write ended later).
"""
from __future__ import annotations

from heapq import heapreplace
from operator import attrgetter
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
    ``used``: bucket -> bytes taken; a bucket is full once ``used >= limit`` (``room``, the
    bucket's bytes, less a 1e-6 tolerance); ``full`` links each full bucket to a later candidate
    (path-compressed skip list)."""
    __slots__ = ("rate", "width", "room", "limit", "used", "full")

    def __init__(self, rate: float, width: float = 256.0):
        self.rate, self.width = rate, width
        self.room = rate * width
        self.limit = self.room * 0.999999
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
        """Take ``nbytes`` of bucket ``b``; returns the bucket's bytes taken so far."""
        used = self.used
        u = used[b] = used.get(b, 0.0) + nbytes
        if u >= self.limit:
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
    multi = len(pipes) > 1
    while True:
        nb = b
        moved = True
        while moved:                     # skip buckets some pipe has full
            moved = False
            for p, _ in pipes:
                if nb in p.full:
                    nb = p.first_free(nb)
                    moved = multi
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
                used = p.used
                u = used[b] = used.get(b, 0.0) + left * f
                if u >= p.limit:
                    p.full[b] = b + 1
                floor = b * w + u / p.rate
                if floor > end:
                    end = floor
            return end
        if room > 0:
            for p, f in pipes:
                used = p.used
                u = used[b] = used.get(b, 0.0) + room * f
                if u >= p.limit:
                    p.full[b] = b + 1
            left -= room
        b += 1
        t = bend


def _reserve2(t0: float, nbytes: float, cap: float, p1: _Pipe, p2: _Pipe, f: float) -> float:
    """``_reserve(t0, nbytes, cap, ((p1, 1.0), (p2, f)))`` with the two pipes unrolled (a DMA
    through its core's pipe and the HBM pipe: the common case); the same float operations in
    the same order, so the same result bit for bit."""
    if nbytes <= 0:
        return t0
    w = p1.width
    b = int(t0 // w)
    t = t0
    left = nbytes
    full1, full2, used1, used2 = p1.full, p2.full, p1.used, p2.used
    room1, room2, rate1, rate2, lim1, lim2 = p1.room, p2.room, p1.rate, p2.rate, p1.limit, p2.limit
    while True:
        if b in full1 or b in full2:     # skip buckets some pipe has full
            nb = b
            moved = True
            while moved:
                moved = False
                if nb in full1:
                    nb = p1.first_free(nb)
                    moved = True
                if nb in full2:
                    nb = p2.first_free(nb)
                    moved = True
            b, t = nb, nb * w
        bend = (b + 1) * w
        span = bend - t
        room = span * cap
        u1, u2 = used1.get(b, 0.0), used2.get(b, 0.0)       # the buckets' bytes taken so far
        x, y = room1 - u1, span * rate1      # min(x, y) / 1.0
        r = y if y < x else x
        if r < room:
            room = r
        x, y = room2 - u2, span * rate2
        r = (y if y < x else x) / f
        if r < room:
            room = r
        if room >= left:
            end = t + left / (room / span) if span > 0 else t
            u = used1[b] = u1 + left
            if u >= lim1:
                full1[b] = b + 1
            floor = b * w + u / rate1
            if floor > end:
                end = floor
            u = used2[b] = u2 + left * f
            if u >= lim2:
                full2[b] = b + 1
            floor = b * w + u / rate2
            if floor > end:
                end = floor
            return end
        if room > 0:
            u = used1[b] = u1 + room
            if u >= lim1:
                full1[b] = b + 1
            u = used2[b] = u2 + room * f
            if u >= lim2:
                full2[b] = b + 1
            left -= room
        b += 1
        t = bend


class _Core:
    """One core's scheduling state."""
    __slots__ = ("engine_free", "queue_free", "dma_pipe", "deps", "ports", "floor", "frontier",
                 "syncs", "pending", "tensor_end", "latest", "floor_idx", "phys", "keys", "tracks",
                 "dma_tracks", "written", "queue_heap")

    def __init__(self, queues: int, dma_rate: float, phys: dict, keys: dict, core: int, written: set):
        self.phys = phys            # on-chip alloc id -> its physical buffer
        self.keys = keys            # on-chip alloc id -> its buffer's number
        self.written = written      # dependency keys some event of the launch writes
        self.engine_free: dict = {}
        self.queue_free = [0.0] * queues
        self.queue_heap = [(0.0, q) for q in range(queues)]     # (free time, queue): the next queue on top
        self.dma_pipe = _Pipe(dma_rate)
        self.deps: dict = {}        # buffer -> [writes [(p0, p1, b0, b1, end, idx)], reads {range: (end, idx)}]
        self.ports: dict = {}       # shared port -> free time
        self.floor = 0.0            # nothing starts before (a barrier's release)
        self.floor_idx = None       # the barrier span that set ``floor``
        self.frontier = 0.0         # end of the last placed instruction (cores advance in turn)
        self.syncs: dict = {}       # op -> count (k-th barrier / sendrecv)
        self.pending = None         # a sync instruction waiting for its partners
        self.tensor_end = None      # end of the last TensorE instruction (back-to-back test)
        self.latest = (0.0, None)   # (end, span index) of the span of this core ending last
        self.tracks = {k: f"core{core}.{k}" for k in ("tensor", "vector", "scalar", "gpsimd", "sync")}
        self.dma_tracks = [f"core{core}.dma{q}" for q in range(queues)]


_WHERE = attrgetter("alloc", "part_start", "part_end", "byte_start", "byte_end")
_ALL = (0, _WHOLE, 0, _WHOLE)
_RANGE = attrgetter("part_start", "part_end", "byte_start", "byte_end")


def _accesses(ops, keys: dict) -> list:
    """(buffer, (p0, p1, b0, b1)) of each operand: the physical buffer of an on-chip allocation
    (its number in ``keys``, from ``physical_buffers``), else the allocation id; unknown ranges
    are the whole allocation."""
    return [(keys.get(a, a), (p0, p1, b0, b1) if b1 else _ALL) for a, p0, p1, b0, b1 in map(_WHERE, ops)]


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
    return _scan(events, buffers)[0]


def _scan(events: Sequence[Instruction], buffers: int | None) -> tuple:
    """``(physical_buffers(events, buffers), the ids of every allocation some event writes)``, in
    one pass over the operands."""
    if buffers is None:
        return {}, {o.alloc for ev in events for o in ev.writes}
    if isinstance(buffers, bool) or not isinstance(buffers, int) or buffers < 1:
        raise ValueError(f"schedule.estimate: loop_buffers must be a positive integer or None (the "
                         f"physical buffers of a loop body's tile), got {buffers!r}")
    first: dict = {}
    last: dict = {}
    written: set = set()
    wrote = written.add
    for i, ev in enumerate(events):
        for o in ev.reads:
            if o.buffer in _ON_CHIP:
                a = o.alloc
                if a not in first:
                    first[a] = (i, (ev.core, ev.location, o.role, o.buffer))
                last[a] = i
        for o in ev.writes:
            a = o.alloc
            wrote(a)
            if o.buffer in _ON_CHIP:
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
    return phys, written


def _deps(st: _Core, reads: list, writes: list):
    """(ready time, index of the binding span) over the RAW / WAR / WAW dependencies: every
    access waits for the earlier writes of overlapping bytes; a write also for earlier reads
    (the first of equally late ones binds: writes in record order, then reads)."""
    ready, idx = 0.0, None
    deps = st.deps
    for alloc, (p0, p1, b0, b1) in reads:
        e = deps.get(alloc)
        if e is not None:
            for w in e[0]:                  # (p0, p1, b0, b1, end, span index)
                if w[4] > ready and p0 < w[1] and w[0] < p1 and b0 < w[3] and w[2] < b1:
                    ready, idx = w[4], w[5]
    for alloc, (p0, p1, b0, b1) in writes:
        e = deps.get(alloc)
        if e is not None:
            for w in e[0]:
                if w[4] > ready and p0 < w[1] and w[0] < p1 and b0 < w[3] and w[2] < b1:
                    ready, idx = w[4], w[5]
            for r, w in e[1].items():       # range -> (end, span index)
                if w[0] > ready and p0 < r[1] and r[0] < p1 and b0 < r[3] and r[2] < b1:
                    ready, idx = w[0], w[1]
    return ready, idx


def _record(st: _Core, reads: list, writes: list, end: float, idx: int) -> None:
    """Remember the accesses ``(buffer, range, its dependency-table entry or None)``: writes as
    a list, reads by range (the latest end kept); a write supersedes the accesses it covers. An
    entry, once made, stays the same list (only its two fields are replaced), so ``_place``
    passes the ones it found; None: looked up again (an earlier access may have made it)."""
    deps = st.deps
    for alloc, r, e in reads:
        if e is None:
            e = deps.get(alloc)
            if e is None:
                deps[alloc] = [[], {r: (end, idx)}]
                continue
        rd = e[1]
        x = rd.get(r)
        if x is None or end >= x[0]:
            rd[r] = (end, idx)
    for alloc, r, e in writes:
        if e is None:
            e = deps.get(alloc)
            if e is None:
                deps[alloc] = [[r + (end, idx)], {}]
                continue
        p0, p1, b0, b1 = r
        ws, rd = e
        if ws:
            if len(ws) == 1:            # the common case (a tile rewritten whole), no new list
                x = ws[0]
                if p0 <= x[0] and x[1] <= p1 and b0 <= x[2] and x[3] <= b1:
                    ws.clear()
            else:
                ws = e[0] = [x for x in ws if not (p0 <= x[0] and x[1] <= p1 and b0 <= x[2] and x[3] <= b1)]
        if rd:
            if len(rd) == 1:            # the common case (one read range), no new dict
                for x in rd:
                    if p0 <= x[0] and x[1] <= p1 and b0 <= x[2] and x[3] <= b1:
                        rd.clear()
                    break
            else:
                e[1] = {x: v for x, v in rd.items() if not (p0 <= x[0] and x[1] <= p1 and b0 <= x[2] and x[3] <= b1)}
        ws.append(r + (end, idx))


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


_COST_KEY = attrgetter("role", "buffer", "shape", "dtype", "nbytes", "partitions", "contiguous_bytes")


def estimate(events: Sequence[Instruction], target: arch.Target, lnc: int,
             loop_buffers: int | None = LOOP_TILE_BUFFERS) -> Timeline:
    """The estimated ``Timeline`` of one launch's events (all cores, in (core, seq) order).

    ``target``: the ``arch.Target`` simulated; ``lnc``: the launch's cores (1 or 2);
    ``loop_buffers``: K, the physical buffers of a loop body's tile (None: unbounded; ValueError
    below 1; see ``physical_buffers``). Spans come
    back in the order of ``events``. Deterministic. Cost: about 4 µs per event on this machine
    (the 2048^3 bf16 tiled matmul's 3200 events: 13 ms)."""
    t = target
    n = len(events)
    spans: list = [None] * n
    per_core: dict = {}
    for i, ev in enumerate(events):
        per_core.setdefault(ev.core, []).append(i)
    cores = sorted(per_core)
    dma_rate = t.dma_core_bytes_per_ns
    phys, written = _scan(events, loop_buffers)
    numbers: dict = {}          # physical buffer -> a small int (a cheap dependency-table key)
    keys = {a: numbers.setdefault(b, len(numbers)) for a, b in phys.items()}
    written = {keys.get(a, a) for a in written}     # dependency keys some event writes
    state = {c: _Core(t.dma_engines, dma_rate, phys, keys, c, written) for c in cores}
    pos = {c: 0 for c in cores}
    ncores = max(lnc, len(cores), 1)
    hbm_rate = t.hbm_core_bytes_per_ns * ncores
    hbm = _Pipe(hbm_rate)
    notes = _Notes(t, dma_rate, hbm_rate)
    waiting: dict = {}          # (op, k) -> {core: (index, arrival, prepared cost)}
    memo: dict = {}             # cost() depends only on the event's op, engine, operand shapes, options
    by_origin: dict = {}        # id(origin event) -> its prepared cost (origins live as long as ``events``)
    prepared: dict = {}         # id(Cost) -> its ``_prepare`` tuple (which keeps the Cost alive)

    def cost_of(ev):
        o = ev.origin           # a replayed event: its template's cost (equal key by construction)
        if o is not None:
            pc = by_origin.get(id(o))
            if pc is None:
                pc = by_origin[id(o)] = cost_of(o)
            return pc
        try:
            ck = (ev.op, ev.engine, tuple(map(_COST_KEY, ev.reads)), tuple(map(_COST_KEY, ev.writes)),
                  tuple(ev.options.items()))
            co = memo.get(ck)
            if co is None:
                co = memo[ck] = cost(ev, t)
        except TypeError:               # an unhashable option value: no memo
            co = cost(ev, t)
        pc = prepared.get(id(co))
        if pc is None:
            pc = prepared[id(co)] = _prepare(co, notes)
        return pc

    if len(cores) == 1:         # one core: its events in order, no rendezvous
        st = state[cores[0]]
        for idx, ev in enumerate(events):
            o = ev.origin           # cost_of's first step, inlined: a replayed event's known cost
            pc = by_origin.get(id(o)) if o is not None else None
            if pc is None:
                pc = cost_of(ev)
            _place(idx, ev, pc, st, t, spans, hbm, 0.0)
    while len(cores) > 1:
        live = [c for c in cores if pos[c] < len(per_core[c]) and state[c].pending is None]
        if not live:
            if not waiting:
                break
            key = min(waiting)       # release the oldest rendezvous (partners finished or absent)
            _release(waiting.pop(key), key, events, spans, state, pos, t, hbm)
            continue
        c = live[0] if len(live) == 1 else min(live, key=lambda k: (state[k].frontier, k))
        st = state[c]
        idx = per_core[c][pos[c]]
        ev = events[idx]
        pc = cost_of(ev)
        if ev.op in _SYNC_OPS and len(cores) > 1:
            k = st.syncs.get(ev.op, 0)
            st.syncs[ev.op] = k + 1
            ready, _ = _deps(st, _accesses(ev.reads, st.keys), _accesses(ev.writes, st.keys))
            arrive = max(ready, st.floor, *st.engine_free.values(), *st.queue_free) \
                if ev.op == "core_barrier" else max(ready, st.floor)
            key = (ev.op, k)
            group = waiting.setdefault(key, {})
            group[c] = (idx, arrive, pc, st.latest[1])
            st.pending = key
            st.frontier = arrive
            if len(group) == len(cores):
                _release(waiting.pop(key), key, events, spans, state, pos, t, hbm)
            continue
        _place(idx, ev, pc, st, t, spans, hbm, 0.0)
        pos[c] += 1

    # every event's cost is one of the prepared ones: the TensorE peak of the modes used
    peak_mode = max((pc[0].peak_flops_per_ns for pc in prepared.values() if pc[0].flops), default=0.0)
    total = max((s.end_ns for s in spans), default=0.0)
    return Timeline(target=t.name, lnc=lnc, spans=spans, total_ns=total,
                    peak_flops_per_ns=(peak_mode or pe_peak_flops_per_ns(t)) * ncores,
                    hbm_bytes_per_ns=hbm_rate)


class _Notes:
    """The ``why`` suffixes the schedule appends to a cost's rule (built once per estimate)."""
    __slots__ = ("mm_init", "static", "bandwidth")

    def __init__(self, t: arch.Target, dma_rate: float, hbm_rate: float):
        self.mm_init = f" + MM_INIT {t.mm_init_cycles} cycles (not back to back)"
        self.static = f" + static overhead {t.static_overhead_cycles} cycles (waited on a dependency)"
        self.bandwidth = f"; bandwidth shared (core DMA {dma_rate:g} B/ns, HBM {hbm_rate:g} B/ns)"


_PORT_KINDS = frozenset(("vector", "gpsimd", "scalar"))
_new = object.__new__


def _prepare(co, notes: _Notes) -> tuple:
    """What ``_place`` reads of one ``Cost``, worked out once per cost (not per event): ``(cost,
    kind, is DMA, why, fixed_ns, dma_bytes, rate, HBM bytes per byte moved (0: none), the
    unshared end's tolerance, why with the bandwidth note, duration_ns, duration + wait overhead,
    why with the wait note, hbm_bytes, flops, takes shared ports)``. Each derived float is the
    operation ``_place`` would do, so the same bits."""
    kind, dma_bytes, rate = co.kind, co.dma_bytes, co.rate
    dma = kind == "dma"
    return (co, kind, dma, co.why, co.fixed_ns, dma_bytes, rate,
            co.hbm_bytes / dma_bytes if dma and co.hbm_bytes else 0,
            dma_bytes / rate * 1.000001 if dma else 0.0, co.why + notes.bandwidth,
            co.duration_ns, co.duration_ns + co.wait_overhead_ns,
            co.why + (notes.mm_init if kind == "tensor" else notes.static),
            co.hbm_bytes, co.flops, kind in _PORT_KINDS)


def _place(idx, ev, pc, st: _Core, t, spans, hbm: _Pipe, not_before) -> None:
    """Place one instruction (prepared cost ``pc``, see ``_prepare``) on its engine / queue of
    core state ``st``: its dependencies (``_deps``'s rule, inlined; reads of bytes nothing ever
    writes skipped), its track, shared ports, bandwidth; then ``_record``."""
    (co, kind, dma, why, fixed_ns, dma_bytes, rate, hbm_f, tol, why_bw, dur, dur_wait, why_wait,
     hbm_bytes, flops, takes_ports) = pc
    keys, deps = st.keys, st.deps
    ready, dep = 0.0, None
    reads = []
    written = st.written
    for o in ev.reads:
        a = o.alloc
        a = keys.get(a, a)
        if a not in written:        # nothing ever writes these bytes: no dependency either way
            continue
        r = _RANGE(o) if o.byte_end else _ALL
        p0, p1, b0, b1 = r
        e = deps.get(a)
        reads.append((a, r, e))
        if e is not None:
            for w in e[0]:                  # (p0, p1, b0, b1, end, span index)
                if w[4] > ready and p0 < w[1] and w[0] < p1 and b0 < w[3] and w[2] < b1:
                    ready, dep = w[4], w[5]
    writes = []
    for o in ev.writes:
        a = o.alloc
        a = keys.get(a, a)
        r = _RANGE(o) if o.byte_end else _ALL
        p0, p1, b0, b1 = r
        e = deps.get(a)
        writes.append((a, r, e))
        if e is not None:
            for w in e[0]:
                if w[4] > ready and p0 < w[1] and w[0] < p1 and b0 < w[3] and w[2] < b1:
                    ready, dep = w[4], w[5]
            rd = e[1]
            if rd:
                for r, w in rd.items():     # range -> (end, span index)
                    if w[0] > ready and p0 < r[1] and r[0] < p1 and b0 < r[3] and r[2] < b1:
                        ready, dep = w[0], w[1]
    if not_before > ready:
        ready, dep = not_before, None
    if dma:
        free, q = st.queue_heap[0]      # the queue free first, the lowest number on ties
        track = st.dma_tracks[q]
    else:
        free = st.engine_free.get(kind, 0.0)
        track = st.tracks.get(kind) or f"core{ev.core}.{kind}"
    waited = None
    floor = st.floor
    if floor > free:                    # held by a barrier: that is what this start waited on
        free, waited = floor, st.floor_idx
    start = free
    bound = dep is not None and ready >= free     # the dependency, not the track, sets the start
    if ready > free:
        start, waited = ready, dep
    ports = _ports(t, kind, ev, st.phys) if takes_ports else ()
    for p in ports:
        pf = st.ports.get(p, 0.0)
        if pf > start:
            start, waited = pf, None
            why = co.why + f"; waited for the shared port {p}"
    if dma:
        data = start + fixed_ns
        if hbm_f:
            end = _reserve2(data, dma_bytes, rate, st.dma_pipe, hbm, hbm_f)
        else:
            end = _reserve(data, dma_bytes, rate, ((st.dma_pipe, 1.0),))
        if end > data + tol:
            why = why_bw if why is co.why else why + why_bw[len(co.why):]
        st.queue_free[q] = end
        heapreplace(st.queue_heap, (end, q))
    else:
        if kind == "tensor":
            te = st.tensor_end
            if te is None or start > te:
                dur = dur_wait
                why = why_wait if why is co.why else why + why_wait[len(co.why):]
            st.tensor_end = end = start + dur
        else:
            if bound:
                dur = dur_wait
                why = why_wait if why is co.why else why + why_wait[len(co.why):]
            end = start + dur
        if hbm_bytes:               # a compute engine reading HBM (rare) still takes HBM bandwidth
            end = max(end, _reserve(start, hbm_bytes, hbm_bytes / dur, ((hbm, 1.0),)))
            if kind == "tensor":
                st.tensor_end = end
        st.engine_free[kind] = end
    for p in ports:
        st.ports[p] = end
    _record(st, reads, writes, end, idx)
    st.frontier = end
    latest = st.latest
    if latest[1] is None or end >= latest[0]:
        st.latest = (end, idx)
    s = _new(Span)              # every field set: what Span(ev, track, start, end, ...) builds, faster
    s.event, s.track, s.start_ns, s.end_ns = ev, track, start, end
    s.flops, s.hbm_bytes, s.waited_on, s.why = flops, hbm_bytes, waited, why
    spans[idx] = s


def _release(group, key, events, spans, state, pos, t, hbm) -> None:
    """Release a rendezvous: every core of ``group`` (core -> (index, arrival, prepared cost,
    latest span)) continues."""
    op = key[0]
    last = max(a for _, a, _, _ in group.values())
    # the barrier is bound by the core that arrived last, and that core by its span ending last
    binding = max(group.values(), key=lambda g: g[1])[3]
    for c in sorted(group):
        idx, arrive, pc, _ = group[c]
        co = pc[0]
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
            _record(st, [(*x, None) for x in _accesses(ev.reads, st.keys)],
                    [(*x, None) for x in _accesses(ev.writes, st.keys)], release, idx)
        else:
            _place(idx, ev, pc, st, t, spans, hbm, last)
        st.pending = None
        pos[c] += 1


__all__ = ["estimate"]
