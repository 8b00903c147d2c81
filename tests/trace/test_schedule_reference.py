"""trace.schedule.estimate against a reference scheduler written here from the rules in its module
docstring, on random event streams: every span's track, start, end, FLOPs, HBM bytes and rule
text must be the same float for float (the fast scheduler's tables, skip lists, unrolled
bandwidth loop and memo must change nothing).

The reference is deliberately plain: every access ever made is kept in one list per core (no
"a write supersedes what it covers" pruning), bandwidth buckets are a dict scanned bucket by
bucket (no skip list), the cost of every event is computed afresh (``trace.cost.cost``, which has
its own tests), the DMA queue is found by a loop, the next core by a sort.
"""
import math

import numpy as np
import pytest

from nkisim import arch
from nkisim.trace.cost import cost, pe_peak_flops_per_ns
from nkisim.trace.events import Instruction, Operand
from nkisim.trace.schedule import estimate

W = 256.0                       # ns per bandwidth bucket (module docstring)
WHOLE = 1 << 62
SIZE = {"float32": 4, "bfloat16": 2}


# ---- the reference --------------------------------------------------------------------------------

def ref_physical(events, k):
    """alloc -> (core, location, role, buffer, lane, slot): first touch sets the site; a tile takes
    the lowest lane of its site whose tile is dead by its first touch; slot = tiles of the lane mod k."""
    if k is None:
        return {}
    first, last = {}, {}
    for i, ev in enumerate(events):
        for o in list(ev.reads) + list(ev.writes):
            if o.buffer in ("sbuf", "psum"):
                if o.alloc not in first:
                    first[o.alloc] = (i, (ev.core, ev.location, o.role, o.buffer))
                last[o.alloc] = i
    lanes, phys = {}, {}
    for a, (i, site) in first.items():
        site_lanes = lanes.setdefault(site, [])
        n = next((j for j, lane in enumerate(site_lanes) if lane[0] < i), len(site_lanes))
        if n == len(site_lanes):
            site_lanes.append([0, 0])
        phys[a] = (*site, n, site_lanes[n][1] % k)
        site_lanes[n][0] = last[a]
        site_lanes[n][1] += 1
    return phys


class RefPipe:
    def __init__(self, rate):
        self.rate, self.room, self.used = rate, rate * W, {}

    def full(self, b):
        return self.used.get(b, 0.0) >= self.room * 0.999999


def ref_reserve(t0, nbytes, cap, pipes):
    """Bucket by bucket: the transfer takes what its own rate and every pipe leave free; it ends no
    earlier than its last bucket's bytes at each pipe's full rate."""
    if nbytes <= 0:
        return t0
    b, t, left = int(t0 // W), t0, nbytes
    while True:
        if any(p.full(b) for p, _ in pipes):
            while any(p.full(b) for p, _ in pipes):
                b += 1
            t = b * W
        span = (b + 1) * W - t
        room = span * cap
        for p, f in pipes:
            room = min(room, min(p.room - p.used.get(b, 0.0), span * p.rate) / f)
        if room >= left:
            end = t + left / (room / span) if span > 0 else t
            for p, f in pipes:
                p.used[b] = p.used.get(b, 0.0) + left * f
                end = max(end, b * W + p.used[b] / p.rate)
            return end
        if room > 0:
            for p, f in pipes:
                p.used[b] = p.used.get(b, 0.0) + room * f
            left -= room
        b += 1
        t = (b) * W


def overlap(x, y):
    return x[0] < y[1] and y[0] < x[1] and x[2] < y[3] and y[2] < x[3]


class RefCore:
    def __init__(self, t):
        self.engine = {}
        self.queues = [0.0] * t.dma_engines
        self.pipe = RefPipe(t.dma_core_bytes_per_ns)
        self.accesses = []          # (buffer, range, end, span index, is_write), program order
        self.ports = {}
        self.floor, self.floor_idx = 0.0, None
        self.tensor_end = None
        self.frontier = 0.0
        self.latest = (0.0, None)


def ref_ports(t, kind, ev, phys):
    out = []
    ops = list(ev.reads) + list(ev.writes)
    if t.shared_sbuf_vector_gpsimd and kind in ("vector", "gpsimd") and any(o.buffer == "sbuf" for o in ops):
        out.append("sbuf.vector+gpsimd")
    if kind in ("vector", "scalar"):
        for o in ops:
            if o.buffer != "psum":
                continue
            if t.shared_psum_vector_scalar:
                if "psum.vector+scalar" not in out:
                    out.append("psum.vector+scalar")
            elif o.byte_end:
                a = phys.get(o.alloc, o.alloc)
                out += [f"{a}.bank{b}" for b in range(o.byte_start // t.psum_bank_bytes,
                                                        (o.byte_end - 1) // t.psum_bank_bytes + 1)]
            else:
                out.append(f"{phys.get(o.alloc, o.alloc)}.bank*")
    return out


def where(ops, phys):
    return [(phys.get(o.alloc, o.alloc), (o.part_start, o.part_end, o.byte_start, o.byte_end)
             if o.byte_end else (0, WHOLE, 0, WHOLE)) for o in ops]


def ref_ready(st, ev, phys):
    """Latest end over every earlier conflicting access (RAW, WAW; WAR for writes)."""
    ready, dep = 0.0, None
    for is_write, acc in ((False, where(ev.reads, phys)), (True, where(ev.writes, phys))):
        for buf, r in acc:
            for b2, r2, end, idx, w2 in st.accesses:
                if b2 == buf and (w2 or is_write) and end > ready and overlap(r, r2):
                    ready, dep = end, idx
    return ready, dep


def ref_note(st, ev, phys, end, idx):
    for buf, r in where(ev.reads, phys):
        st.accesses.append((buf, r, end, idx, False))
    for buf, r in where(ev.writes, phys):
        st.accesses.append((buf, r, end, idx, True))


def ref_place(t, st, hbm, idx, ev, co, phys, spans, not_before, dma_rate, hbm_rate):
    ready, dep = ref_ready(st, ev, phys)
    if not_before > ready:
        ready, dep = not_before, None
    kind = co.kind
    if kind == "dma":
        q = min(range(len(st.queues)), key=lambda j: (st.queues[j], j))
        free, track = st.queues[q], f"core{ev.core}.dma{q}"
    else:
        free, track = st.engine.get(kind, 0.0), f"core{ev.core}.{kind}"
    waited = None
    if st.floor > free:
        free, waited = st.floor, st.floor_idx
    bound = dep is not None and ready >= free
    start = free
    if ready > free:
        start, waited = ready, dep
    why = co.why
    ports = ref_ports(t, kind, ev, phys) if kind in ("vector", "scalar", "gpsimd") else []
    for p in ports:
        if st.ports.get(p, 0.0) > start:
            start, waited = st.ports[p], None
            why = co.why + f"; waited for the shared port {p}"
    if kind == "dma":
        data = start + co.fixed_ns
        pipes = [(st.pipe, 1.0)] + ([(hbm, co.hbm_bytes / co.dma_bytes)] if co.hbm_bytes else [])
        end = ref_reserve(data, co.dma_bytes, co.rate, pipes)
        if end > data + co.dma_bytes / co.rate * 1.000001:
            why += f"; bandwidth shared (core DMA {dma_rate:g} B/ns, HBM {hbm_rate:g} B/ns)"
        st.queues[q] = end
    else:
        dur = co.duration_ns
        if kind == "tensor" and (st.tensor_end is None or start > st.tensor_end):
            dur += co.wait_overhead_ns
            why += f" + MM_INIT {t.mm_init_cycles} cycles (not back to back)"
        elif kind != "tensor" and bound:
            dur += co.wait_overhead_ns
            why += f" + static overhead {t.static_overhead_cycles} cycles (waited on a dependency)"
        end = start + dur
        if co.hbm_bytes:
            end = max(end, ref_reserve(start, co.hbm_bytes, co.hbm_bytes / dur, [(hbm, 1.0)]))
        st.engine[kind] = end
        if kind == "tensor":
            st.tensor_end = end
    for p in ports:
        st.ports[p] = end
    ref_note(st, ev, phys, end, idx)
    st.frontier = end
    if st.latest[1] is None or end >= st.latest[0]:
        st.latest = (end, idx)
    spans[idx] = (track, start, end, co.flops, co.hbm_bytes, waited, why)


def ref_estimate(events, t, lnc, k=2):
    """Spans as (track, start, end, flops, hbm_bytes, waited_on, why), total, peak FLOPs rate."""
    phys = ref_physical(events, k)
    cores = sorted({e.core for e in events})
    ncores = max(lnc, len(cores), 1)
    dma_rate, hbm_rate = t.dma_core_bytes_per_ns, t.hbm_core_bytes_per_ns * ncores
    hbm = RefPipe(hbm_rate)
    state = {c: RefCore(t) for c in cores}
    todo = {c: [i for i, e in enumerate(events) if e.core == c] for c in cores}
    spans = [None] * len(events)
    costs = [cost(e, t) for e in events]
    waiting = {}                       # k-th barrier -> {core: (index, arrival, latest span)}
    count = {c: 0 for c in cores}
    pending = {c: False for c in cores}
    while True:
        live = [c for c in cores if todo[c] and not pending[c]]
        if not live:
            if not waiting:
                break
            n = min(waiting)
            ref_barrier(t, state, waiting.pop(n), events, costs, phys, spans, pending)
            continue
        c = sorted(live, key=lambda j: (state[j].frontier, j))[0]
        st, idx = state[c], todo[c].pop(0)
        ev, co = events[idx], costs[idx]
        if ev.op == "core_barrier" and len(cores) > 1:
            ready, _ = ref_ready(st, ev, phys)
            arrive = max(ready, st.floor, *st.engine.values(), *st.queues)
            group = waiting.setdefault(count[c], {})
            count[c] += 1
            group[c] = (idx, arrive, st.latest[1])
            pending[c] = True
            st.frontier = arrive
            if len(group) == len(cores):
                ref_barrier(t, state, waiting.pop(count[c] - 1), events, costs, phys, spans, pending)
            continue
        ref_place(t, st, hbm, idx, ev, co, phys, spans, 0.0, dma_rate, hbm_rate)
    peak = max((co.peak_flops_per_ns for co in costs if co.flops), default=0.0) or pe_peak_flops_per_ns(t)
    return spans, max((s[2] for s in spans), default=0.0), peak * ncores


def ref_barrier(t, state, group, events, costs, phys, spans, pending):
    """Every core waits for the last arrival, then a semaphore latency (dma_fixed_ns)."""
    last = max(a for _, a, _ in group.values())
    binding = next(g[2] for g in group.values() if g[1] == last)
    for c in sorted(group):
        idx, arrive, _ = group[c]
        st, co, ev = state[c], costs[idx], events[idx]
        release = last + co.duration_ns + t.dma_fixed_ns
        spans[idx] = (f"core{c}.{co.kind}", arrive, release, co.flops, co.hbm_bytes, binding,
                      co.why + f"; released {release - arrive:.0f} ns after arrival")
        st.engine[co.kind] = release
        st.floor, st.floor_idx = release, idx
        st.latest = (release, idx)
        ref_note(st, ev, phys, release, idx)
        pending[c] = False


# ---- random event streams -------------------------------------------------------------------------

def opnd(role, buffer, shape, alloc, dtype, parts, span, contiguous=None):
    on_chip = buffer in ("sbuf", "psum")
    return Operand(role=role, buffer=buffer, shape=tuple(shape), dtype=dtype,
                   nbytes=math.prod(shape) * SIZE[dtype], alloc=alloc,
                   partitions=shape[0] if on_chip else 1,
                   contiguous_bytes=contiguous or (math.prod(shape[1:]) if on_chip else shape[-1]) * SIZE[dtype],
                   part_start=parts[0], part_end=parts[1], byte_start=span[0], byte_end=span[1])


def random_stream(rng, lnc, n, barriers):
    """``n`` events per launch over a few sites and tiles: DMA loads / stores / HBM copies (partial
    partitions and byte ranges, unknown ranges), matmuls into PSUM, VectorE / ScalarE / GpSimdE ops
    on SBUF and PSUM (shared ports, banks), a compute op reading HBM, core barriers (LNC2)."""
    events = []
    seq = {c: 0 for c in range(lnc)}
    tile = {c: 0 for c in range(lnc)}

    def add(core, name, engine, reads, writes, loc, **options):
        seq[core] += 1
        events.append(Instruction(op=name, api=f"nisa.{name}", engine=engine, core=core, seq=seq[core],
                                  location=f"k.py:{loc}", reads=tuple(reads), writes=tuple(writes),
                                  options=options))

    def chip(core, fresh):
        if fresh or tile[core] == 0:
            tile[core] += 1
        return f"c{core}.{int(rng.integers(max(1, tile[core] - 3), tile[core] + 1))}"

    for _ in range(n):
        core = int(rng.integers(lnc))
        kind = int(rng.integers(9))
        f = int(rng.choice([64, 256, 512, 2048]))
        dt = str(rng.choice(["float32", "bfloat16"]))
        p0 = int(rng.choice([0, 0, 32, 64]))
        p1 = min(128, p0 + int(rng.choice([1, 32, 64, 128])))
        row = f * SIZE[dt]
        sub = (0, row) if rng.random() < 0.7 else (row // 4, row // 2)
        hoff = int(rng.integers(4)) * row * 128
        hbm_range = (0, 1, hoff, hoff + row * (p1 - p0)) if rng.random() < 0.9 else (0, 1, 0, 0)
        src = f"arg:x{int(rng.integers(3))}"
        loc = int(rng.integers(1, 6))
        if kind <= 2:
            add(core, "dma_copy", "dma", [opnd("src", "hbm", (p1 - p0, f), src, dt, hbm_range[:2], hbm_range[2:])],
                [opnd("dst", "sbuf", (p1 - p0, f), chip(core, rng.random() < 0.6), dt, (p0, p1), sub)], loc)
        elif kind == 3:
            add(core, "dma_copy", "dma", [opnd("src", "sbuf", (p1 - p0, f), chip(core, False), dt, (p0, p1), sub)],
                [opnd("dst", "hbm", (p1 - p0, f), f"arg:out{int(rng.integers(2))}", dt, hbm_range[:2],
                      hbm_range[2:])], loc)
        elif kind == 4:
            add(core, "dma_copy", "dma", [opnd("src", "hbm", (p1 - p0, f), src, dt, hbm_range[:2], hbm_range[2:])],
                [opnd("dst", "hbm", (p1 - p0, f), "arg:out0", dt, hbm_range[:2], hbm_range[2:])], loc)
        elif kind == 5:
            nm = int(rng.choice([128, 512]))
            add(core, "nc_matmul", "tensor",
                [opnd("stationary", "sbuf", (128, 128), chip(core, False), dt, (0, 128), (0, 128 * SIZE[dt])),
                 opnd("moving", "sbuf", (128, nm), chip(core, False), dt, (0, 128), (0, nm * SIZE[dt]))],
                [opnd("dst", "psum", (128, nm), f"c{core}.p{int(rng.integers(2))}", "float32", (0, 128),
                      (0, nm * 4))], loc, perf_mode="none")
        elif kind == 6:
            eng = str(rng.choice(["vector", "scalar", "gpsimd"]))
            buf = str(rng.choice(["sbuf", "psum"])) if eng != "gpsimd" else "sbuf"
            a = chip(core, False) if buf == "sbuf" else f"c{core}.p{int(rng.integers(2))}"
            bank = (0, 2048) if rng.random() < 0.5 else (2048, 4096) if rng.random() < 0.5 else (0, 0)
            r = (0, 128, *bank) if buf == "psum" else (p0, p1, *sub)
            add(core, "tensor_tensor", eng,
                [opnd("data1", buf, (128, 512), a, "float32", r[:2], r[2:]),
                 opnd("data2", "sbuf", (128, 512), chip(core, False), "float32", (0, 128), (0, 2048))],
                [opnd("dst", "sbuf", (128, 512), chip(core, rng.random() < 0.5), "float32", (0, 128), (0, 2048))],
                loc, op="add")
        elif kind == 7:
            add(core, "activation", "scalar", [opnd("data", "sbuf", (p1 - p0, f), chip(core, False), dt, (p0, p1), sub)],
                [opnd("dst", "sbuf", (p1 - p0, f), chip(core, True), dt, (p0, p1), sub)], loc, op="exp")
        else:                              # a VectorE op reading HBM: takes HBM bandwidth
            add(core, "tensor_copy", "vector", [opnd("src", "hbm", (p1 - p0, f), src, dt, hbm_range[:2], hbm_range[2:])],
                [opnd("dst", "sbuf", (p1 - p0, f), chip(core, True), dt, (p0, p1), sub)], loc)
        if barriers and lnc > 1 and rng.random() < 0.05:
            for c in range(lnc):
                add(c, "core_barrier", "gpsimd", [], [opnd("data", "hbm", (1, 1), "shared0", "float32",
                                                           (0, 1), (0, 4))], 9)
    events.sort(key=lambda e: (e.core, e.seq))
    return events


@pytest.mark.parametrize("seed", range(30))
def test_estimate_equals_the_reference_scheduler(seed):
    rng = np.random.default_rng(1000 + seed)
    t = arch.get(("trn1", "trn2", "trn3")[seed % 3])
    lnc = 1 + (seed // 3) % 2
    k = (2, 1, 3, None)[seed % 4]
    events = random_stream(rng, lnc, int(rng.integers(20, 200)), barriers=seed % 5 != 0)
    want, total, peak = ref_estimate(events, t, lnc, k)
    tl = estimate(events, t, lnc, loop_buffers=k)
    got = [(s.track, s.start_ns, s.end_ns, s.flops, s.hbm_bytes, s.waited_on, s.why) for s in tl.spans]
    for i, (g, w) in enumerate(zip(got, want)):
        assert g[:5] == w[:5] and g[6] == w[6], (i, events[i], g, w)
        # the binding dependency: the same span, or (equally late) one ending at the same time
        assert (g[5] is None) == (w[5] is None), (i, g, w)
        if g[5] is not None:
            assert tl.spans[g[5]].end_ns == want[w[5]][2], (i, g, w)
    assert len(got) == len(want)
    assert tl.total_ns == total and tl.peak_flops_per_ns == peak
    assert all(s.event is e for s, e in zip(tl.spans, events))


def test_the_reference_sees_contention():
    """The random streams exercise what the fast paths shortcut: full bandwidth buckets, waits on
    dependencies, shared ports, barriers (else the comparison above proves little)."""
    rng = np.random.default_rng(7)
    events = random_stream(rng, 2, 300, barriers=True)
    spans, _, _ = ref_estimate(events, arch.TRN2, 2)
    whys = " ".join(s[6] for s in spans)
    assert "bandwidth shared" in whys and "waited on a dependency" in whys and "released" in whys
    assert "MM_INIT" in whys
    assert sum(s[5] is not None for s in spans) > 30


@pytest.mark.parametrize("k", [None, 2])
def test_a_first_touch_read_and_write_of_one_tile_are_both_remembered(k):
    """One instruction that first touches a tile reads some of its bytes and writes others (the
    dependency table has no entry for it yet, at both operands); a later write of the read bytes
    on another engine must wait for it (write-after-read), as the reference says."""
    t = arch.TRN2
    both = Instruction(op="tensor_copy", api="nisa.tensor_copy", engine="vector", core=0, seq=1,
                       location="k.py:1", reads=(opnd("src", "sbuf", (128, 64), "c0.1", "float32", (0, 128), (0, 256)),),
                       writes=(opnd("dst", "sbuf", (128, 64), "c0.1", "float32", (0, 128), (256, 512)),))
    later = Instruction(op="activation", api="nisa.activation", engine="scalar", core=0, seq=2,
                        location="k.py:2", reads=(opnd("data", "sbuf", (128, 64), "c0.2", "float32", (0, 128), (0, 256)),),
                        writes=(opnd("dst", "sbuf", (128, 64), "c0.1", "float32", (0, 128), (0, 256)),),
                        options={"op": "exp"})
    want, total, _ = ref_estimate([both, later], t, 1, k)
    tl = estimate([both, later], t, 1, loop_buffers=k)
    assert want[1][1] >= want[0][2] and want[1][5] == 0      # the reference: it waits on the first
    assert [(s.track, s.start_ns, s.end_ns, s.waited_on) for s in tl.spans] == [w[:3] + (w[5],) for w in want]
    assert tl.total_ns == total
