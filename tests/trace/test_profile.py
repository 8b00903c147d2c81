"""trace.profile / trace.advice / trace.export on hand-built Timelines: figures computed here by
hand, each warning firing and not firing, the Perfetto JSON's structure, the PNG."""
import json
import sys

import pytest

from nkisim.trace.events import Instruction, Operand
from nkisim.trace.profile import Profile, critical_path
from nkisim.trace.timeline import Span, Timeline


def opd(role, buffer, shape, alloc, dtype="float32", itemsize=4, view=None):
    n = 1
    for d in shape:
        n *= d
    on_chip = buffer in ("sbuf", "psum")
    free = shape[1:] if on_chip else shape
    run = itemsize
    for d in free:
        run *= d
    return Operand(role, buffer, tuple(shape), dtype, n * itemsize, alloc, shape[0] if on_chip else 1, run,
                   view if view is not None else (0, ()))


def ins(op, engine, loc, reads=(), writes=(), core=0, seq=1, api=None):
    return Instruction(op, api or f"nisa.{op}", engine, core, seq, loc, tuple(reads), tuple(writes), {"k": 1})


def load(loc, shape, alloc="arg:a", view=(0, (1,)), seq=1, core=0):
    return ins("dma_copy", "dma", loc, [opd("src", "shared_hbm", shape, alloc, view=view)],
               [opd("dst", "sbuf", shape, f"c{core}.{seq}")], core=core, seq=seq, api="nl.load")


def store(loc, shape, alloc="arg:a", seq=1):
    return ins("dma_copy", "dma", loc, [opd("src", "sbuf", shape, "c0.9")],
               [opd("dst", "shared_hbm", shape, alloc, view=(0, (1,)))], seq=seq, api="nl.store")


def matmul(loc, stationary, moving, seq=1):
    k, m = stationary
    return ins("nc_matmul", "tensor", loc, [opd("stationary", "sbuf", stationary, "c0.1"),
                                            opd("moving", "sbuf", moving, "c0.2")],
               [opd("dst", "psum", (m, moving[1]), "c0.3")], seq=seq)


def vec(loc, partitions, seq=1, engine="vector"):
    return ins("tensor_tensor", engine, loc, [opd("data1", "sbuf", (partitions, 512), "c0.4")],
               [opd("dst", "sbuf", (partitions, 512), "c0.5")], seq=seq)


def timeline(spans, total=None, peak=0.0, bw=0.0, target="trn2", lnc=1):
    return Timeline(target=target, lnc=lnc, spans=spans, total_ns=total if total is not None else
                    max(s.end_ns for s in spans), peak_flops_per_ns=peak, hbm_bytes_per_ns=bw)


FLOPS = 2 * 128 * 128 * 512


def chain():
    """load 0-100 (dma0) -> matmul 100-300 (tensor) -> exp 300-400 (scalar) -> store 400-500
    (dma0); an independent vector op 0-50."""
    return [Span(load("k.py:1", (128, 512)), "core0.dma0", 0, 100, hbm_bytes=4096),
            Span(matmul("k.py:2", (128, 128), (128, 512), seq=2), "core0.tensor", 100, 300, flops=FLOPS,
                 waited_on=0),
            Span(vec("k.py:3", 128, seq=3, engine="scalar"), "core0.scalar", 300, 400, waited_on=1),
            Span(store("k.py:4", (128, 512), seq=4), "core0.dma0", 400, 500, hbm_bytes=2048, waited_on=2),
            Span(vec("k.py:5", 128, seq=5), "core0.vector", 0, 50)]


# ---- figures ---------------------------------------------------------------------------------
def test_figures_from_hand_built_timeline():
    p = Profile(timeline(chain(), peak=1e5, bw=100.0), kernel="k")
    assert p.total_us == pytest.approx(0.5)
    assert p.engine_busy == pytest.approx({"core0.tensor": 0.4, "core0.vector": 0.1, "core0.scalar": 0.2,
                                           "core0.dma0": 0.4})
    assert list(p.engine_busy) == ["core0.tensor", "core0.vector", "core0.scalar", "core0.dma0"]
    assert p.hfu == pytest.approx(FLOPS / (1e5 * 500))
    assert p.mbu == pytest.approx((4096 + 2048) / (100.0 * 500))
    r = p.records[1]
    assert (r.start_us, r.end_us, r.engine, r.op, r.location, r.track) == (
        pytest.approx(0.1), pytest.approx(0.3), "tensor", "nc_matmul", "k.py:2", "core0.tensor")
    assert p.critical_path == [0, 1, 2, 3]
    assert p.outputs is None and len(p.events) == 5


def test_hfu_mbu_zero_without_peak_or_time():
    p = Profile(timeline(chain()))
    assert (p.hfu, p.mbu) == (0.0, 0.0)
    empty = Profile(Timeline("trn2", 1))
    assert (empty.total_us, empty.engine_busy, empty.critical_path, empty.warnings) == (0.0, {}, [], [])


def test_busy_is_the_union_of_overlapping_spans():
    spans = [Span(load("k.py:1", (128, 512)), "core0.dma0", 0, 100),
             Span(load("k.py:1", (128, 512), seq=2, view=(512, (1,))), "core0.dma0", 50, 150),
             Span(vec("k.py:2", 128, seq=3), "core0.vector", 0, 200)]
    assert Profile(timeline(spans)).engine_busy["core0.dma0"] == pytest.approx(150 / 200)


def test_critical_path_follows_the_track_when_no_dependency_bound():
    spans = chain() + [Span(matmul("k.py:6", (128, 128), (128, 512), seq=6), "core0.tensor", 300, 600,
                            waited_on=None)]
    # the last span (600) was limited by its track: the matmul before it on TensorE, then its chain
    assert critical_path(timeline(spans)) == [0, 1, 5]


def test_summary_table():
    text = Profile(timeline(chain(), peak=1e5, bw=100.0), kernel="k").summary()
    assert text.splitlines()[0] == ("k: estimated 0.500 us on trn2 (LNC1), 5 instructions; "
                                    f"HFU {FLOPS / 5e7:.1%}, MBU {6144 / 5e4:.1%}")
    assert "core0.tensor" in text and "40.0%" in text
    top = text.split("top kernel lines by time:\n")[1].splitlines()[0]
    assert top.split()[0] == "k.py:2"                # the 200 ns matmul line comes first
    assert "critical path: 4 instructions, 0.500 us busy of 0.500 us" in text


def test_summary_critical_path_through_a_barrier_is_never_busier_than_the_total():
    """LNC2: core 1 reaches the barrier at 50 ns, core 0 at 400 ns; the barrier releases both at
    500 and core 1 stores 500-600. The path is core 0's work (0-400), the barrier core 1 waited
    in (50-500: only 400-500 is on the path, after the work that made core 0 arrive last), the
    store (500-600): 600 ns, the whole estimate, not 400 + 450 + 100."""
    barrier = [opd("data", "shared_hbm", (2, 8), "shared0")]
    spans = [Span(vec("k.py:1", 128, seq=1), "core0.vector", 0, 400),
             Span(ins("tensor_tensor", "vector", "k.py:2", core=1), "core1.vector", 0, 50),
             Span(ins("core_barrier", "gpsimd", "k.py:3", barrier, core=1, seq=2), "core1.gpsimd", 50, 500,
                  waited_on=0),
             Span(ins("core_barrier", "gpsimd", "k.py:3", barrier, core=0, seq=2), "core0.gpsimd", 400, 500,
                  waited_on=0),
             Span(store("k.py:4", (128, 512), seq=3), "core1.dma0", 500, 600, waited_on=2)]
    p = Profile(timeline(spans, lnc=2), kernel="k")
    assert p.critical_path == [0, 2, 4]
    text = p.summary()
    assert "critical path: 3 instructions, 0.600 us busy of 0.600 us" in text
    steps = text.split("critical path: 3 instructions")[1].splitlines()[1:4]
    assert [line.split()[0] for line in steps] == ["k.py:1", "k.py:3", "k.py:4"]
    assert [float(line.split()[-2]) for line in steps] == [0.4, 0.1, 0.1]


# ---- warnings --------------------------------------------------------------------------------
def kinds(spans, **kw):
    return [w.kind for w in Profile(timeline(spans, **kw)).warnings]


def one(spans, kind):
    found = [w for w in Profile(timeline(spans)).warnings if w.kind == kind]
    assert len(found) == 1, found
    return found[0]


def test_small_dma_fires_below_2_kib_per_partition():
    w = one([Span(load("k.py:7", (128, 64)), "core0.dma0", 0, 100),
             Span(load("k.py:7", (128, 64), seq=2, view=(64, (1,))), "core0.dma0", 100, 200)], "small_dma")
    assert w.locations == ("k.py:7",) and w.count == 2
    assert "256 B contiguous per partition" in w.message and "2048 B" in w.message
    assert "small_dma" not in kinds([Span(load("k.py:7", (128, 512)), "core0.dma0", 0, 100)])


def test_fewer_than_128_partitions_fires_on_compute_engines():
    w = one([Span(vec("k.py:8", 64), "core0.vector", 0, 100)], "partitions")
    assert w.locations == ("k.py:8",) and "64 of 128 partitions" in w.message
    assert "partitions" not in kinds([Span(vec("k.py:8", 128), "core0.vector", 0, 100)])


@pytest.mark.parametrize("stationary, rows, cols", [((128, 64), 128, 64), ((32, 128), 32, 128)])
def test_matmul_under_filling_the_pe_array(stationary, rows, cols):
    w = one([Span(matmul("k.py:9", stationary, (stationary[0], 512)), "core0.tensor", 0, 100)], "matmul_fill")
    assert f"use {rows} rows x {cols} columns of the 128x128 PE array" in w.message
    assert w.locations == ("k.py:9",)


def test_full_matmul_does_not_warn():
    assert kinds([Span(matmul("k.py:9", (128, 128), (128, 512)), "core0.tensor", 0, 100)]) == []


def test_reload_of_the_same_hbm_bytes():
    w = one([Span(load("k.py:10", (128, 512)), "core0.dma0", 0, 100),
             Span(load("k.py:11", (128, 512), seq=2), "core0.dma0", 100, 200)], "reload")
    assert w.locations == ("k.py:11", "k.py:10") and "arg:a" in w.message and "262144 B again" in w.message


def test_no_reload_for_other_bytes_another_core_or_after_a_write():
    other_view = [Span(load("k.py:10", (128, 512)), "core0.dma0", 0, 100),
                  Span(load("k.py:11", (128, 512), seq=2, view=(65536, (1,))), "core0.dma0", 100, 200)]
    other_core = [Span(load("k.py:10", (128, 512)), "core0.dma0", 0, 100),
                  Span(load("k.py:11", (128, 512), core=1), "core1.dma0", 0, 100)]
    rewritten = [Span(load("k.py:10", (128, 512)), "core0.dma0", 0, 100),
                 Span(store("k.py:12", (128, 512), seq=2), "core0.dma0", 100, 200),
                 Span(load("k.py:11", (128, 512), seq=3), "core0.dma0", 200, 300)]
    for spans in (other_view, other_core, rewritten):
        assert "reload" not in kinds(spans)


def test_engine_idle_on_one_dependency_chain():
    spans = [Span(load("k.py:13", (128, 512)), "core0.dma0", 0, 400),
             Span(matmul("k.py:14", (128, 128), (128, 512), seq=2), "core0.tensor", 400, 500, waited_on=0)]
    w = one(spans, "idle_chain")
    assert w.message.startswith("core0.tensor idles 0.400 us (80% of the time) before k.py:14, waiting on "
                                "k.py:13 (core0.dma0)")
    assert w.locations == ("k.py:14", "k.py:13")


def test_short_idle_gap_does_not_warn():
    spans = [Span(vec("k.py:15", 128), "core0.vector", 0, 10),
             Span(matmul("k.py:16", (128, 128), (128, 512), seq=2), "core0.tensor", 10, 500, waited_on=0)]
    assert kinds(spans) == []          # a 10 ns gap of 500 ns: 2 % < 10 %


# ---- outputs ---------------------------------------------------------------------------------
def vec_c1(loc, partitions, core, seq):
    return ins("tensor_tensor", "vector", loc, [opd("data1", "sbuf", (partitions, 512), "c1.4")],
               [opd("dst", "sbuf", (partitions, 512), "c1.5")], core=core, seq=seq)


def test_trace_json_structure(tmp_path):
    spans = chain() + [Span(vec_c1("k.py:5", 128, 1, 1), "core1.vector", 0, 80),
                       Span(load("k.py:1", (128, 512), core=1, seq=2), "core1.dma3", 0, 100)]
    p = Profile(timeline(spans, lnc=2), kernel="k")
    path = p.save_trace(tmp_path / "sub" / "t.json")
    doc = json.loads(open(path).read())
    evs = doc["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["name"] == "thread_name"}
    assert sorted(threads.values()) == sorted(["tensor", "vector", "scalar", "dma0", "vector", "dma3"])
    assert {pid for pid, _ in threads} == {0, 1}
    assert len(set(threads)) == 6                     # one tid per track
    procs = [e for e in evs if e["name"] == "process_name"]
    assert [e["pid"] for e in procs] == [0, 1]
    xs = [e for e in evs if e["ph"] == "X"]
    assert len(xs) == 7
    mm = next(e for e in xs if e["name"] == "nc_matmul")
    assert (mm["ts"], mm["dur"]) == (pytest.approx(0.1), pytest.approx(0.2))      # µs
    assert threads[(mm["pid"], mm["tid"])] == "tensor"
    assert mm["args"]["location"] == "k.py:2" and mm["args"]["option.k"] == 1
    assert mm["args"]["reads"][0].startswith("stationary: sbuf c0.1 [128x128] float32")
    c1 = next(e for e in xs if e["pid"] == 1 and e["name"] == "dma_copy")
    assert threads[(1, c1["tid"])] == "dma3"
    assert doc["otherData"]["estimated_us"] == pytest.approx(0.5)


def test_plot_writes_a_png(tmp_path):
    path = Profile(timeline(chain()), kernel="k").plot(tmp_path / "t.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'nkisim\[plot\]'"):
        Profile(timeline(chain())).plot(tmp_path / "t.png")
