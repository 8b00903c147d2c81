"""trace.schedule.estimate: a schedule, not a sum. Hand-built event lists with times computed by
hand from the documented costs (clocks, 64-cycle MM init, 100-cycle static overhead, DMA 1300 ns
+ bytes / B/ns), and real kernels run under ``nkisim.trace.record()``."""
import math

import numpy as np
import pytest

import nkisim
from nkisim import arch
from nkisim.examples import NAMES as EXAMPLES
from nkisim.trace import record
from nkisim.trace.events import Instruction, Operand
from nkisim.trace.schedule import estimate

_SIZE = {"float32": 4, "bfloat16": 2}
T2 = arch.TRN2


def opnd(role, buffer, shape, alloc, dtype="float32", parts=None, bytes_=None):
    """An operand; ``parts``/``bytes_``: the (start, end) partitions / bytes per partition touched."""
    on_chip = buffer in ("sbuf", "psum")
    row = (math.prod(shape[1:]) if on_chip else math.prod(shape)) * _SIZE[dtype]
    p = parts or ((0, shape[0]) if on_chip else (0, 1))
    b = bytes_ or (0, row)
    return Operand(role=role, buffer=buffer, shape=tuple(shape), dtype=dtype,
                   nbytes=math.prod(shape) * _SIZE[dtype], alloc=alloc,
                   partitions=shape[0] if on_chip else 1, contiguous_bytes=row,
                   part_start=p[0], part_end=p[1], byte_start=b[0], byte_end=b[1])


class Events(list):
    """Builds an event list: ``add(name, engine, reads, writes, core=0, **options)``."""

    def add(self, name, engine, reads=(), writes=(), core=0, **options):
        seq = sum(1 for e in self if e.core == core) + 1
        self.append(Instruction(op=name, api=f"nisa.{name}", engine=engine, core=core, seq=seq,
                                location=f"k.py:{len(self) + 1}", reads=tuple(reads),
                                writes=tuple(writes), options=options))
        return self


def vec_tt(ev, a, b, dst, n=512, core=0, engine="vector"):
    """tensor_tensor (fp32, SBUF): 2N cycles."""
    return ev.add("tensor_tensor", engine, [opnd("data1", "sbuf", (128, n), a), opnd("data2", "sbuf", (128, n), b)],
                  [opnd("dst", "sbuf", (128, n), dst)], core=core, op="add")


def load(ev, dst, n=512, core=0, src="arg:x", parts=128):
    return ev.add("dma_copy", "dma", [opnd("src", "hbm", (parts, n), src)],
                  [opnd("dst", "sbuf", (parts, n), dst)], core=core)


def matmul(ev, st, mv, dst, core=0):
    return ev.add("nc_matmul", "tensor", [opnd("stationary", "sbuf", (128, 128), st, "bfloat16"),
                                          opnd("moving", "sbuf", (128, 512), mv, "bfloat16")],
                  [opnd("dst", "psum", (128, 512), dst)], core=core, perf_mode="none")


TT_NS = 1024 / 0.96                      # tensor_tensor 2N = 1024 VectorE cycles at 0.96 GHz (trn2)
STATIC_NS = 100 / 0.96                   # static overhead after a dependency wait
MM_NS = 512 / 2.4                        # matmul max(min(64, 128), 512) cycles at 2.4 GHz
MM_INIT_NS = 64 / 2.4


def dma_ns(nbytes, run, engines=16, bw=23.0):
    return 1300 + nbytes / (engines * bw * run / (run + 256))


def test_independent_engines_overlap():
    ev = Events()
    matmul(ev, "s", "m", "p")
    vec_tt(ev, "a", "b", "c")
    tl = estimate(ev, T2, 1)
    mm, tt = tl.spans
    assert mm.start_ns == tt.start_ns == 0
    assert mm.end_ns == pytest.approx(MM_NS + MM_INIT_NS)        # idle TensorE: MM init
    assert tt.end_ns == pytest.approx(TT_NS)
    assert tl.total_ns == pytest.approx(max(MM_NS + MM_INIT_NS, TT_NS))
    assert (mm.track, tt.track) == ("core0.tensor", "core0.vector")
    assert mm.flops == 2 * 128 * 128 * 512 and tt.flops == 0


def test_same_engine_program_order_and_back_to_back_matmuls():
    ev = Events()
    matmul(ev, "s", "m", "p1")
    matmul(ev, "s", "m", "p2")
    vec_tt(ev, "a", "b", "c")
    vec_tt(ev, "d", "e", "f")
    tl = estimate(ev, T2, 1)
    a, b, c, d = tl.spans
    assert b.start_ns == pytest.approx(a.end_ns) and b.duration_ns == pytest.approx(MM_NS)   # pipelined
    assert d.start_ns == pytest.approx(TT_NS) and d.waited_on is None
    assert tl.total_ns == pytest.approx(2 * TT_NS)


def test_raw_dependency_waits_with_static_overhead():
    ev = Events()
    load(ev, "x")                                   # 128 x 512 fp32: 2 KiB per partition
    vec_tt(ev, "x", "y", "z")                       # reads x
    vec_tt(ev, "z", "y", "w")                       # reads z: same engine, back to back
    tl = estimate(ev, T2, 1)
    d, t1, t2 = tl.spans
    want = dma_ns(128 * 2048, 2048)
    assert d.end_ns == pytest.approx(want)
    assert t1.start_ns == pytest.approx(want) and t1.waited_on == 0
    assert t1.duration_ns == pytest.approx(TT_NS + STATIC_NS)
    assert "static overhead" in t1.why
    # back to back on its engine: the engine was the limit (waited_on None), the static overhead
    # of a dependent instruction still applies
    assert t2.start_ns == pytest.approx(t1.end_ns) and t2.waited_on is None
    assert t2.duration_ns == pytest.approx(TT_NS + STATIC_NS)
    assert d.hbm_bytes == 128 * 512 * 4


def test_war_and_waw():
    ev = Events()
    vec_tt(ev, "x", "y", "z")                       # reads x for TT_NS
    load(ev, "x", n=16)                             # WAR: overwrites x -> waits for the read
    load(ev, "x", n=16)                             # WAW on x -> waits for the previous load
    tl = estimate(ev, T2, 1)
    tt, w1, w2 = tl.spans
    assert w1.start_ns == pytest.approx(TT_NS) and w1.waited_on == 0
    assert w2.start_ns == pytest.approx(w1.end_ns) and w2.waited_on == 1


def test_disjoint_bytes_and_partitions_do_not_depend():
    ev = Events()
    ev.add("dma_copy", "dma", [opnd("src", "hbm", (64, 256), "arg:x")],
           [opnd("dst", "sbuf", (64, 256), "t", parts=(0, 64), bytes_=(0, 1024))])
    ev.add("tensor_copy", "vector", [opnd("src", "sbuf", (64, 512), "t", parts=(64, 128))],
           [opnd("dst", "sbuf", (64, 512), "u")])
    ev.add("tensor_copy", "vector", [opnd("src", "sbuf", (128, 256), "t", bytes_=(1024, 2048))],
           [opnd("dst", "sbuf", (128, 256), "v")])
    ev.add("tensor_copy", "vector", [opnd("src", "sbuf", (64, 512), "t", parts=(32, 96))],
           [opnd("dst", "sbuf", (64, 512), "w")])
    tl = estimate(ev, T2, 1)
    d, other_parts, other_bytes, overlap = tl.spans
    assert other_parts.start_ns == 0 and other_parts.waited_on is None
    assert other_bytes.waited_on is None
    assert overlap.start_ns == pytest.approx(d.end_ns) and overlap.waited_on == 0


def test_dma_queues_run_in_parallel():
    ev = Events()
    for i in range(16):                             # 8 partitions: one DMA engine each
        load(ev, f"t{i}", n=1024, parts=8, src=f"arg:x{i}")
    tl = estimate(ev, T2, 1)
    one = dma_ns(8 * 4096, 4096, engines=1)
    assert sorted({s.track for s in tl.spans}) == sorted(f"core0.dma{q}" for q in range(16))
    assert all(s.start_ns == 0 for s in tl.spans)
    assert tl.total_ns == pytest.approx(one)         # 16 x 23 B/ns x eff < 368 B/ns: no cap
    load(ev, "t16", n=1024, parts=8, src="arg:x16")  # a 17th waits for a queue
    tl = estimate(ev, T2, 1)
    assert tl.spans[16].start_ns == pytest.approx(one) and tl.spans[16].track == "core0.dma0"
    assert tl.total_ns == pytest.approx(2 * one)


def test_dma_queues_capped_by_core_bandwidth():
    ev = Events()
    n = 16
    for i in range(n):                              # 128 partitions x 8 KiB: each alone at ~16 x 23 B/ns
        load(ev, f"t{i}", n=2048, src=f"arg:x{i}")
    tl = estimate(ev, T2, 1)
    nbytes = 128 * 8192
    alone = dma_ns(nbytes, 8192)
    capped = 1300 + n * nbytes / 368               # all 16 share 16 x 23 = 368 B/ns
    assert tl.total_ns >= capped - 1e-6
    assert tl.total_ns == pytest.approx(capped, rel=0.02)
    assert tl.total_ns > 10 * (alone - 1300)
    assert "bandwidth" in tl.spans[-1].why


def test_shared_ports_trn1_vector_gpsimd_sbuf():
    ev = Events()
    vec_tt(ev, "a", "b", "c")
    vec_tt(ev, "d", "e", "f", engine="gpsimd")
    tl1 = estimate(ev, arch.TRN1, 1)
    tl2 = estimate(ev, T2, 1)
    assert tl1.spans[1].start_ns == pytest.approx(tl1.spans[0].end_ns)     # NC-v2: one at a time
    assert tl2.spans[1].start_ns == 0                                        # NC-v3: in parallel


def test_same_psum_bank_vector_scalar_collide_on_trn2():
    def evs(bank_b):
        ev = Events()
        ev.add("tensor_copy", "vector", [opnd("src", "psum", (128, 512), "p", bytes_=(0, 2048))],
               [opnd("dst", "sbuf", (128, 512), "s1")])
        ev.add("activation", "scalar", [opnd("data", "psum", (128, 512), "p", bytes_=bank_b)],
               [opnd("dst", "sbuf", (128, 512), "s2")], op="exp")
        return ev
    same = estimate(evs((0, 2048)), T2, 1)
    other = estimate(evs((2048, 4096)), T2, 1)
    assert same.spans[1].start_ns == pytest.approx(same.spans[0].end_ns)
    assert other.spans[1].start_ns == 0


def test_lnc2_cores_side_by_side_and_share_hbm():
    ev = Events()
    for c in (0, 1):
        for i in range(4):
            load(ev, f"c{c}.{i}", n=2048, core=c, src="arg:x")
    tl = estimate(ev, T2, 2)
    assert {s.track.split(".")[0] for s in tl.spans} == {"core0", "core1"}
    ends = [max(s.end_ns for s in tl.spans if s.event.core == c) for c in (0, 1)]
    assert ends[0] == pytest.approx(ends[1])
    one = estimate(Events(e for e in ev if e.core == 0), T2, 1)
    assert tl.total_ns == pytest.approx(one.total_ns, rel=0.05)     # 2 x 368 B/ns < 2 x HBM share
    assert tl.hbm_bytes_per_ns == pytest.approx(2 * 3000 / 8)


def test_lnc2_hbm_share_caps_two_cores():
    # trn1: one device (820 GB/s) for 2 cores: an LNC2 launch gets all of it; each core's DMAs
    # alone could move 272 B/ns, so HBM-to-HBM copies (2 HBM bytes per byte moved) are HBM bound.
    ev = Events()
    for c in (0, 1):
        for i in range(16):
            ev.add("dma_copy", "dma", [opnd("src", "hbm", (128, 2048), f"arg:x{i}")],
                   [opnd("dst", "hbm", (128, 2048), f"arg:y{c}.{i}")], core=c)
    tl = estimate(ev, arch.TRN1, 2)
    hbm = sum(s.hbm_bytes for s in tl.spans)
    assert tl.hbm_bytes_per_ns == pytest.approx(820)
    assert tl.total_ns >= hbm / 820
    assert tl.total_ns == pytest.approx(1300 + hbm / 820, rel=0.05)


def test_core_barrier_synchronises_cores():
    ev = Events()
    vec_tt(ev, "a", "b", "c", n=4096, core=0)                  # core 0 busy for 8192 cycles
    ev.add("core_barrier", "gpsimd", [opnd("data", "hbm", (2, 8), "shared0")], [], core=0)
    vec_tt(ev, "d", "e", "f", core=0)
    ev.add("core_barrier", "gpsimd", [opnd("data", "hbm", (2, 8), "shared0")], [], core=1)
    vec_tt(ev, "d", "e", "f", core=1)
    tl = estimate(ev, T2, 2)
    busy0 = 8192 / 0.96
    release = busy0 + 64 / 1.2 + 1300                          # last arrival + MIN_II + semaphore
    b0, b1 = tl.spans[1], tl.spans[3]
    assert b0.start_ns == pytest.approx(busy0) and b1.start_ns == 0
    assert b0.end_ns == pytest.approx(release) and b1.end_ns == pytest.approx(release)
    assert tl.spans[2].start_ns == pytest.approx(release)
    assert tl.spans[4].start_ns == pytest.approx(release)


def test_critical_path_crosses_a_barrier_to_the_core_that_arrived_last():
    from nkisim.trace.profile import critical_path
    ev = Events()
    ev.add("core_barrier", "gpsimd", [opnd("data", "hbm", (2, 8), "shared0")], [], core=0)   # 0
    vec_tt(ev, "d", "e", "f", core=0)                                                         # 1
    vec_tt(ev, "a", "b", "c", n=4096, core=1)                  # 2: core 1 busy for 8192 cycles
    ev.add("core_barrier", "gpsimd", [opnd("data", "hbm", (2, 8), "shared0")], [], core=1)   # 3
    tl = estimate(ev, T2, 2)
    assert tl.spans[0].waited_on == 2 and tl.spans[3].waited_on == 2
    path = critical_path(tl)
    assert path[-1] == 1 and 2 in path and path.index(2) < path.index(0)   # work, barrier, after


def test_deterministic():
    ev = Events()
    for i in range(20):
        load(ev, f"t{i % 3}", n=64 * (i + 1))
        vec_tt(ev, f"t{i % 3}", "y", f"z{i % 2}", n=64 * (i + 1))
    a, b = estimate(ev, T2, 1), estimate(ev, T2, 1)
    assert [(s.start_ns, s.end_ns, s.track, s.waited_on) for s in a.spans] == \
        [(s.start_ns, s.end_ns, s.track, s.waited_on) for s in b.spans]


# ---- real kernels ------------------------------------------------------------------------------

def _run(name, target="trn2", small=True):
    from nkisim.examples import load as load_example
    mod = load_example(name)
    inputs = mod.make_inputs(np.random.default_rng(0), small=small)
    with record() as events:
        nkisim.simulate(mod.KERNEL, target=target)(*inputs)
    return list(events)


def _floors(tl):
    flops = sum(s.flops for s in tl.spans)
    hbm = sum(s.hbm_bytes for s in tl.spans)
    return flops / tl.peak_flops_per_ns, hbm / tl.hbm_bytes_per_ns


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_real_kernels_never_beat_the_physical_floor(name, target):
    events = _run(name, target)
    tl = estimate(events, arch.get(target), 1)
    assert len(tl.spans) == len(events) and all(s is not None for s in tl.spans)
    flops_floor, hbm_floor = _floors(tl)
    assert tl.total_ns >= flops_floor and tl.total_ns >= hbm_floor
    for i, s in enumerate(tl.spans):
        assert s.end_ns >= s.start_ns >= 0 and s.why
        assert s.waited_on is None or tl.spans[s.waited_on].end_ns <= s.start_ns + 1e-6
        assert s.track.startswith("core0.")
    assert tl.total_ns == max(s.end_ns for s in tl.spans)


def test_matmul_kernel_is_not_a_sum():
    events = _run("matmul")
    tl = estimate(events, T2, 1)
    total_busy = sum(s.duration_ns for s in tl.spans)
    assert tl.total_ns < total_busy                        # engines and queues overlap
    assert any(s.flops for s in tl.spans)
    assert tl.peak_flops_per_ns == pytest.approx(2 * 128 * 128 * 2.4)


def test_lnc2_kernel_with_barrier():
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def kernel(x):
        me = nl.program_id(0)
        out = nl.ndarray((2, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[me:me + 1, :])
        nisa.core_barrier(out, (0, 1))
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        return out

    with record() as events:
        nkisim.simulate(kernel[2], target="trn2")(np.ones((2, 512), np.float32))
    tl = estimate(list(events), T2, 2)
    barriers = [s for s in tl.spans if s.event.op == "core_barrier"]
    assert len(barriers) == 2 and barriers[0].end_ns == barriers[1].end_ns
    stores = [s for s in tl.spans if s.event.op == "dma_copy" and s.event.writes[0].buffer == "shared_hbm"]
    assert all(s.start_ns >= barriers[0].end_ns for s in stores)
    assert {s.event.core for s in tl.spans} == {0, 1}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_random_event_lists_never_beat_the_floor(seed, target):
    rng = np.random.default_rng(seed)
    t = arch.get(target)
    lnc = 1 + seed % 2
    ev = Events()
    for _ in range(60):
        core = int(rng.integers(lnc))
        k = int(rng.integers(5))
        a, b = (f"c{core}.{int(x)}" for x in rng.integers(6, size=2))
        n = int(rng.choice([8, 64, 512, 2048]))
        if k == 0:
            load(ev, a, n=n, core=core, src=f"arg:x{int(rng.integers(3))}", parts=int(rng.choice([1, 32, 128])))
        elif k == 1:
            ev.add("dma_copy", "dma", [opnd("src", "hbm", (128, n), "arg:x0")],
                   [opnd("dst", "hbm", (128, n), f"arg:y{core}")], core=core)
        elif k == 2:
            matmul(ev, a, b, f"c{core}.p", core=core)
        elif k == 3:
            matmul(ev, a, b, f"c{core}.p", core=core)
            ev[-1] = Instruction(**{**{f: getattr(ev[-1], f) for f in ("op", "api", "engine", "core", "seq",
                                                                      "location", "writes", "options")},
                                    "reads": tuple(opnd(o.role, "sbuf", o.shape, o.alloc, "float32")
                                                   for o in ev[-1].reads)})
        else:
            vec_tt(ev, a, b, f"c{core}.{int(rng.integers(6))}", n=n, core=core)
    ev.sort(key=lambda e: (e.core, e.seq))
    tl = estimate(ev, t, lnc)
    flops_floor, hbm_floor = _floors(tl)
    assert tl.total_ns >= flops_floor and tl.total_ns >= hbm_floor
    core_dma = [sum(s.event.reads[0].nbytes for s in tl.spans if s.event.op == "dma_copy" and s.event.core == c)
                for c in range(lnc)]
    assert tl.total_ns >= max(core_dma) / t.dma_core_bytes_per_ns
