"""The loop-body tile rule of trace.schedule: a tile allocated in a loop body rotates through K
physical buffers (the compiler allocator's double buffering, nki_direct_allocation_guide.rst), so
iteration i + K's write waits until iteration i's tile is no longer read. Schedules computed by
hand from the documented costs (trn2: VectorE 0.96 GHz, tensor_tensor 2N cycles, 100-cycle
static overhead on an instruction that waited on a dependency -- every ``use`` here does, on
the accumulator it rewrites -- DMA 1300 ns + bytes at 23 B/ns per engine with the
b / (b + 256) payload curve)."""
import math

import numpy as np
import pytest

import nkisim
import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import arch
from nkisim.config import Settings
from nkisim.trace import record
from nkisim.trace.events import Instruction, Operand
from nkisim.trace.schedule import estimate, physical_buffers

T2 = arch.TRN2
N = 512                                   # fp32 elements per partition of every tile
ROW = N * 4                               # bytes per partition
TT = 2 * N / 0.96                         # tensor_tensor, two SBUF inputs: 2N VectorE cycles
S = 100 / 0.96                            # static overhead of an instruction that waited
D = 1300 + ROW / (23.0 * ROW / (ROW + 256))   # one-partition load: one DMA engine


def opnd(role, buffer, alloc, parts=1):
    on_chip = buffer in ("sbuf", "psum")
    shape = (parts, N)
    return Operand(role=role, buffer=buffer, shape=shape, dtype="float32", nbytes=parts * ROW,
                   alloc=alloc, partitions=parts if on_chip else 1, contiguous_bytes=ROW,
                   part_start=0, part_end=parts if on_chip else 1, byte_start=0,
                   byte_end=ROW if on_chip else parts * ROW)


class Events(list):
    def add(self, op, engine, line, reads, writes):
        self.append(Instruction(op=op, api=f"nisa.{op}", engine=engine, core=0, seq=len(self) + 1,
                                location=f"k.py:{line}", reads=tuple(reads), writes=tuple(writes),
                                options={"op": "add"} if op == "tensor_tensor" else {}))
        return self

    def load(self, tile, line=1):
        return self.add("dma_copy", "dma", line, [opnd("src", "hbm", "arg:x")], [opnd("dst", "sbuf", tile)])

    def use(self, tile, line=2):
        """tensor_tensor reading ``tile`` twice into the hoisted accumulator ``acc``."""
        return self.add("tensor_tensor", "vector", line, [opnd("data1", "sbuf", tile), opnd("data2", "sbuf", tile)],
                        [opnd("dst", "sbuf", "acc")])


def loop(n):
    """for i in range(n): t = ndarray(); dma_copy(t, x); tensor_tensor(acc, t, t)."""
    ev = Events()
    for i in range(n):
        ev.load(f"c0.{i + 1}").use(f"c0.{i + 1}")
    return ev


def slots(phys, ids):
    """(lane, slot) of each allocation: its physical buffer within its site."""
    return [phys[a][-2:] for a in ids]


def test_sequential_tiles_rotate_modulo_k():
    ev = loop(5)
    ids = [f"c0.{i + 1}" for i in range(5)]
    assert slots(physical_buffers(ev, 1), ids) == [(0, 0)] * 5
    assert slots(physical_buffers(ev, 2), ids) == [(0, 0), (0, 1), (0, 0), (0, 1), (0, 0)]
    assert slots(physical_buffers(ev, 3), ids) == [(0, 0), (0, 1), (0, 2), (0, 0), (0, 1)]
    assert physical_buffers(ev, None) == {}
    # the accumulator (one allocation) and the kernel argument are their own buffers
    phys = physical_buffers(ev, 2)
    assert "arg:x" not in phys and phys["acc"] != phys["c0.1"]


def test_tiles_live_at_the_same_time_get_a_buffer_each():
    """Three tiles loaded, then all three read (a list of tiles): a lane each, so three buffers
    even with K=1; the next group takes the same lanes (K=1: the same buffers; K=2: the others)."""
    ev = Events()
    for g in range(2):
        ids = [f"c0.{3 * g + k + 1}" for k in range(3)]
        for a in ids:
            ev.load(a)
        for a in ids:
            ev.use(a)
    ids = [f"c0.{k + 1}" for k in range(6)]
    assert slots(physical_buffers(ev, 1), ids) == [(0, 0), (1, 0), (2, 0)] * 2
    assert slots(physical_buffers(ev, 2), ids) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    # the first group runs its loads side by side: D, then the three reads back to back
    tl = estimate(ev[:6], T2, 1, loop_buffers=1)
    assert tl.total_ns == pytest.approx(D + 3 * (TT + S))


def test_one_buffer_serialises_the_loop():
    """K=1: load i+1 waits for the read of tile i: n x (load + wait overhead + tensor_tensor)."""
    tl = estimate(loop(4), T2, 1, loop_buffers=1)
    assert tl.total_ns == pytest.approx(4 * (D + S + TT))
    loads, uses = tl.spans[0::2], tl.spans[1::2]
    for i in range(1, 4):
        assert loads[i].start_ns == pytest.approx(uses[i - 1].end_ns)


def test_double_buffering_overlaps_load_and_compute():
    """K=2 by hand: loads 0 and 1 at 0; use0 [D, D+TT+S]; use1 after it; load2 waits for use0's
    read, load3 for use1's; use2 waits for load2 (D > TT + S), use3 follows use2."""
    tl = estimate(loop(4), T2, 1, loop_buffers=2)
    assert [s.start_ns for s in tl.spans[0::2]] == pytest.approx([0, 0, D + TT + S, D + 2 * (TT + S)])
    assert tl.total_ns == pytest.approx(2 * D + 3 * (TT + S))
    assert estimate(loop(4), T2, 1).total_ns == pytest.approx(tl.total_ns)     # the default K is 2


def test_unbounded_buffers_prefetch_every_load():
    tl = estimate(loop(4), T2, 1, loop_buffers=None)
    assert tl.total_ns == pytest.approx(D + 4 * (TT + S))


def test_one_helper_called_twice_per_iteration_double_buffers_each_tile():
    """Two tiles per iteration first touched at the same line (a helper): two lanes, each
    rotating through K buffers -- with K=2 the same schedule as two lines, K=1 serialises."""
    def body(ev, same_line):
        for i in range(4):
            a, b = f"c0.{2 * i + 1}", f"c0.{2 * i + 2}"
            ev.load(a).load(b, line=1 if same_line else 3).use(a).use(b, line=2 if same_line else 4)
        return ev
    one = body(Events(), True)
    assert slots(physical_buffers(one, 2), [f"c0.{k + 1}" for k in range(4)]) == \
        [(0, 0), (1, 0), (0, 1), (1, 1)]
    for k in (1, 2):
        assert estimate(one, T2, 1, loop_buffers=k).total_ns == \
            pytest.approx(estimate(body(Events(), False), T2, 1, loop_buffers=k).total_ns)


def test_different_lines_are_different_sites():
    ev = Events()
    for i in range(4):
        ev.load(f"c0.{i + 1}", line=10 + i).use(f"c0.{i + 1}", line=20 + i)
    assert estimate(ev, T2, 1, loop_buffers=1).total_ns == pytest.approx(D + 4 * (TT + S))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_buffer_counts_raise(bad):
    with pytest.raises(ValueError, match="loop_buffers"):
        estimate(loop(2), T2, 1, loop_buffers=bad)


def test_setting_reads_the_environment_and_checks_it():
    assert Settings.from_env({}).loop_tile_buffers == 2
    assert Settings.from_env({"NKISIM_LOOP_TILE_BUFFERS": " 3 "}).loop_tile_buffers == 3
    with pytest.raises(ValueError, match="NKISIM_LOOP_TILE_BUFFERS"):
        Settings.from_env({"NKISIM_LOOP_TILE_BUFFERS": "0"})
    with pytest.raises(ValueError, match="loop_tile_buffers"):
        Settings(loop_tile_buffers=0)


@nki.jit
def _scale_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        y = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=t, data2=t, op=nl.multiply)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)
    return out


def test_real_kernel_one_buffer_waits_for_the_last_read():
    """On a real kernel's events with K=1: each iteration's load into ``t`` starts no earlier
    than the previous iteration's tensor_tensor (the last reader of its ``t``) ends, and the
    estimate grows as K shrinks; the values are the kernel's whatever K is."""
    x = np.random.default_rng(0).random((512, 1024), dtype=np.float32)
    p1 = nkisim.profile(_scale_rows, target="trn2", loop_tile_buffers=1)(x)
    p2 = nkisim.profile(_scale_rows, target="trn2")(x)
    p_inf = nkisim.profile(_scale_rows, target="trn2", loop_tile_buffers=1_000_000)(x)
    np.testing.assert_array_equal(p1.outputs, x * x)
    loads = [r for r in p1.records if r.op == "dma_copy" and r.location == p1.records[0].location]
    tts = [r for r in p1.records if r.op == "tensor_tensor"]
    assert len(loads) == len(tts) == 4
    for i in range(1, 4):
        assert loads[i].start_us >= tts[i - 1].end_us - 1e-9
    assert p1.total_us > p2.total_us >= p_inf.total_us
    # K larger than the trip count is the unbounded schedule
    with record(timing_only=True) as ev:
        nkisim.profile(_scale_rows, target="trn2", compute=False)(x)
    assert estimate(list(ev), T2, 1, loop_buffers=None).total_ns / 1000 == pytest.approx(p_inf.total_us)
