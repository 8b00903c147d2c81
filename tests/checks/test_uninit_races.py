"""Strict uninitialised reads and race detection (checks/uninit.py, checks/races.py)."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.checks import races
from nkisim.errors import RaceError, UninitializedReadError
from nkisim.memory.buffers import shared_hbm
from conftest import sbuf_copy
from nkisim.memory.tensor import Allocation, contiguous_view


def strict(kernel):
    return nki.simulate(kernel, uninitialized_reads="raise")


def racy(kernel, **kw):
    return nki.simulate(kernel, detect_races=True, **kw)


def half_written(x):
    t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf, name="t")
    nisa.memset(dst=t[:, 0:4], value=1.0)
    out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_default_mode_reads_sentinels():
    out = nki.simulate(half_written)(np.zeros((1, 1), np.float32))
    assert (out[:, :4] == 1).all() and np.isnan(out[:, 4:]).all()


def test_strict_mode_names_op_operand_region_and_line():
    with pytest.raises(UninitializedReadError,
                       match=r"^nisa\.dma_copy: src reads 16 never-written element\(s\) of sbuf tensor 't' "
                             r"\(4, 8\) float32, first at view index \(0, 4\) \(allocated at "
                             r"test_uninit_races\.py:\d+\) \(test_uninit_races\.py:\d+\)$"):
        strict(half_written)(np.zeros((1, 1), np.float32))


def test_strict_mode_passes_fully_written_kernel():
    def kernel(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(strict(kernel)(x), x)


def shared_accumulator(x):
    """Every iteration adds into one tile allocated before the loop: a loop-carried dependency,
    legal since affine_range is an alias of range (checks/races.py)."""
    acc = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf, name="acc")
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(3):
        t = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_loop_carried_accumulation_in_affine_range_is_not_a_race():
    x = np.ones((3, 2, 4), np.float32)
    np.testing.assert_array_equal(racy(shared_accumulator)(x), 3 * np.ones((2, 4)))
    np.testing.assert_array_equal(nki.simulate(shared_accumulator)(x), 3 * np.ones((2, 4)))


def test_same_loop_with_sequential_range_is_fine():
    def kernel(x):
        acc = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for i in nl.sequential_range(3):
            t = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out
    np.testing.assert_array_equal(racy(kernel)(np.ones((3, 2, 4), np.float32)), 3 * np.ones((2, 4)))


def test_matmul_accumulation_over_affine_k_is_not_a_race():
    def kernel(a, b):
        ps = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            st = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
            mv = nl.ndarray((128, 64), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=st, src=a[k * 128:(k + 1) * 128, :])
            nisa.dma_copy(dst=mv, src=b[k * 128:(k + 1) * 128, :])
            nisa.nc_matmul(dst=ps, stationary=st, moving=mv)
        sb = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=sb)
        return out
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128), dtype=np.float32)
    b = rng.standard_normal((256, 64), dtype=np.float32)
    np.testing.assert_allclose(racy(kernel)(a, b), a.T @ b, rtol=1e-4, atol=1e-4)


def test_two_iterations_writing_the_same_rows_race():
    def kernel(x):
        out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        for i in nl.affine_range(2):
            t = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i])
            nisa.dma_copy(dst=out, src=t)
        return out
    with pytest.raises(RaceError, match=r"^nisa\.dma_copy: dst writes 8 element\(s\) of shared_hbm tensor 'out' "
                                        r"\(2, 4\) float32 in affine_range iteration 1 that iteration 0 wrote"):
        racy(kernel)(np.ones((2, 2, 4), np.float32))


def test_shuffled_order_exposes_order_dependence():
    x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)

    def last_wins(x):
        out = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i])
            nisa.dma_copy(dst=out, src=t)
        return out
    outs = {nki.simulate(last_wins, iteration_order="shuffled", seed=s)(x).tobytes() for s in range(6)}
    assert len(outs) == 2


def test_lnc2_shared_write_read_without_barrier_races():
    def kernel(x):
        out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        me = nl.program_id(0)
        t = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[me:me + 1, :])
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        if with_barrier:
            nisa.core_barrier(out, (0, 1))
        other = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=other, src=out[1 - me:2 - me, :])
        return out

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with_barrier = True
    np.testing.assert_array_equal(racy(kernel)[2](x), x)
    with_barrier = False
    with pytest.raises(RaceError, match=r"with no core_barrier between"):
        racy(kernel)[2](x)


# ---- race detection: exactness of the interval fast path (checks/races.py) ------------------

LOC = re.compile(r"\(test_uninit_races\.py:\d+\)")
SHAPE = (4, 6)
LOOP_MSG = ("nki: operand writes {n} element(s) of shared_hbm tensor 't' (4, 6) float32 in affine_range "
            "iteration {it} that iteration {other} wrote ({line}) and nothing read since: its values are "
            "lost. affine_range iterations must not overwrite each other's unread HBM results (reading "
            "them in between is fine); give each iteration its own elements, or use "
            "sequential_range if the last write is meant to win (loop at L) (L)")
CORE_MSG = ("nki: core {core} {verb} {n} element(s) of shared_hbm tensor 't' (4, 6) that core {other} "
            "{what} ({line}) with no core_barrier between (L)")


def _tensor():
    alloc = Allocation(np.zeros(24, np.float32), shared_hbm, SHAPE, np.dtype(np.float32), name="t")
    return contiguous_view(alloc)


@st.composite
def views(draw):
    """A random 2-D access pattern over the (4, 6) storage: any step (negative, 0), any count."""
    n0, n1 = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    s0, s1 = draw(st.integers(-8, 8)), draw(st.integers(-8, 8))
    lo = min(0, (n0 - 1) * s0) + min(0, (n1 - 1) * s1) if n0 and n1 else 0
    hi = max(0, (n0 - 1) * s0) + max(0, (n1 - 1) * s1) if n0 and n1 else 0
    if hi - lo > 23:
        n1 = 1 if n0 else 0
        lo, hi = min(0, (n0 - 1) * s0), max(0, (n0 - 1) * s0)
        if hi - lo > 23:
            n0 = 1
            lo = hi = 0
    off = draw(st.integers(-lo, 23 - hi))
    return ([[s0, n0], [s1, n1]], off)


def _offsets(t):
    """Every element's storage offset (view order), independently of checks/races.py."""
    idx = np.indices(t.shape).reshape(len(t.shape), -1)
    return t.offset + sum(i * s for i, s in zip(idx, t.strides))


class _RefLoop:
    """The per-element algorithm applied eagerly to every access (the specification): a plain
    write of elements another iteration wrote and nothing read since (a lost write) is a finding;
    reads and accumulating writes never are."""

    def __init__(self):
        self.w = np.full(24, -1)             # position of the last writing iteration
        self.unread = np.zeros(24, bool)     # written in the loop, not read since
        self.lines = set()

    def record(self, pos, values, t, kind, acc):
        offs = _offsets(t)
        if kind == "w" and not acc:
            w = self.w[offs]
            lost = (w != -1) & (w != pos) & self.unread[offs]
            if lost.any():
                j = values[w[lost][0]]
                return LOOP_MSG.format(n=int(lost.sum()), it=values[pos], other=j,
                                       line="L" if (j, "w") in self.lines else "?")
        if kind == "w":
            self.w[offs] = pos
            self.unread[offs] = True
        else:
            self.unread[offs] = False
        self.lines.add((values[pos], kind))
        return None


def _limits(log_max, max_intervals):
    old = races._LOG_MAX, races._MAX_INTERVALS
    races._LOG_MAX, races._MAX_INTERVALS = log_max, max_intervals
    return old


accesses = st.tuples(views(), st.sampled_from("rw"), st.booleans())


@settings(max_examples=300, deadline=None)
@given(iterations=st.lists(st.lists(accesses, max_size=4), min_size=1, max_size=4),
       start=st.integers(-3, 3), shuffle=st.randoms(use_true_random=False),
       log_max=st.sampled_from([0, 1, 3, 512]), max_intervals=st.sampled_from([1, 2, 4096]))
def test_loop_scope_matches_the_per_element_algorithm(iterations, start, shuffle, log_max, max_intervals):
    """Every access (kept going after a race, as findings="all" does) gives the same finding and
    message as checking every element eagerly; negative iteration values included."""
    values = list(range(start, start + len(iterations)))
    shuffle.shuffle(values)
    t = _tensor()
    old = _limits(log_max, max_intervals)
    try:
        scope, ref = races.LoopScope(1, "L"), _RefLoop()
        for pos, accs in enumerate(iterations):
            scope.iteration = values[pos]
            for (pattern, off), kind, mm in accs:
                v = t.ap(pattern, offset=off)
                want = ref.record(pos, values, v, kind, mm and kind == "w")
                try:
                    scope.record(v, kind, mm and kind == "w")
                    got = None
                except RaceError as e:
                    got = LOC.sub("(L)", str(e))
                assert got == want
    finally:
        _limits(*old)


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 1), views(), st.sampled_from("rw"), st.integers(0, 2)),
                      max_size=12),
       log_max=st.sampled_from([0, 2, 512]), max_intervals=st.sampled_from([1, 4096]))
def test_shared_races_match_the_per_element_algorithm(steps, log_max, max_intervals):
    """LNC2 epochs: each core's epoch only grows (by 0-2 per step); same findings as eager."""
    t = _tensor()
    w_ep, r_ep = np.full((2, 24), -1), np.full((2, 24), -1)
    lines, epoch = set(), [0, 0]
    old = _limits(log_max, max_intervals)
    try:
        shared = races.SharedRaces()
        for core, (pattern, off), kind, bump in steps:
            epoch[core] += bump
            v, other = t.ap(pattern, offset=off), 1 - core
            offs = _offsets(v)
            clash, what = w_ep[other, offs] == epoch[core], "wrote"
            if kind == "w" and not clash.any():
                clash, what = r_ep[other, offs] == epoch[core], "read"
            want = None
            if clash.any():
                want = CORE_MSG.format(core=core, verb="writes" if kind == "w" else "reads", n=int(clash.sum()),
                                       other=other, what=what,
                                       line="L" if (other, what[0]) in lines else "?")
            else:
                (w_ep if kind == "w" else r_ep)[core, offs] = epoch[core]
                lines.add((core, kind))
            try:
                shared.record(v, kind, core, epoch[core])
                got = None
            except RaceError as e:
                got = LOC.sub("(L)", str(e))
            assert got == want
    finally:
        _limits(*old)


def test_intervals_merge_touching_and_answer_overlap():
    s = races.Intervals()
    for lo, hi in [(10, 12), (0, 2), (20, 25), (3, 4), (14, 15)]:
        s.add(lo, hi)
    assert (s.lo, s.hi) == ([0, 10, 14, 20], [4, 12, 15, 25])
    assert s.meets(13, 13) is False and s.meets(5, 9) is False and s.meets(26, 30) is False
    assert s.meets(12, 13) and s.meets(9, 10) and s.meets(5, 100) and s.meets(-5, 0)
    s.add(5, 19)
    assert (s.lo, s.hi) == ([0], [25])


def test_columns_of_a_view_cut_in_rows():
    t = _tensor()                                             # (4, 6): rows of 6 elements
    assert races.columns(t[:, 2:4], 6) == (2, 3)
    assert races.columns(t.permute((1, 0))[1:3, :], 6) == (1, 2)
    assert races.columns(t.ap([[-6, 2], [-1, 3]], offset=17), 6) == (3, 5)
    assert races.columns(t.ap([[1, 4]], offset=4), 6) == (0, 5)     # wraps into the next row
    assert races.columns(t.ap([[7, 2]], offset=0), 6) == (0, 5)     # stride 7 moves the column
    assert races.span(t[1:3, 2:4]) == (8, 15) and races.span(t[:, 0:0]) is None


# ---- race detection through kernels: the fast paths still catch every race ------------------

def _copy_in(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


RACE = (r"^nisa\.{op}: {operand} writes {n} element\(s\) of {buf} tensor {name}{shape} float32 in "
        r"affine_range iteration {it} that {other} wrote \({line}\) and nothing read since: its values "
        r"are lost\. affine_range iterations must not overwrite each other's unread HBM results \(reading "
        r"them in between is fine\); give each iteration its own elements, or use sequential_range "
        r"if the last write is meant to win \(loop at test_uninit_races\.py:\d+\) "
        r"\(test_uninit_races\.py:\d+\)$")
LINE = r"test_uninit_races\.py:\d+"


def race(op="dma_copy", operand="dst", n=4, buf="shared_hbm", name="out", shape=r"\(4, 8\)",
         it=1, other="iteration 0", line=LINE):
    name = f"'{name}' " if name else ""
    return RACE.format(op=op, operand=operand, n=n, buf=buf, name=name, shape=shape, it=it,
                       other=other, line=line)


def tiles_kernel(width, step):
    """Iteration i writes columns [i*step, i*step + width) of one output."""
    def kernel(x):
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        for i in nl.affine_range(2):
            t = nl.ndarray((4, width), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, i * step:i * step + width])
            nisa.dma_copy(dst=out[:, i * step:i * step + width], src=t)
        return out
    return kernel


def test_disjoint_output_tiles_are_not_a_race():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(racy(tiles_kernel(4, 4))(x), x)


def test_partially_overlapping_output_tiles_race():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    with pytest.raises(RaceError, match=race(n=8)):          # columns 3..4 of 4 rows
        racy(tiles_kernel(5, 3))(x)


def test_transposed_view_write_races_with_a_column_write():
    def kernel(x):
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        for i in nl.affine_range(2):
            if i == 0:     # row 0, written through column 0 of the transposed view
                nisa.dma_copy(dst=out.permute((1, 0))[:, 0:1], src=x.permute((1, 0))[:, 0:1])
            else:          # column 2 meets row 0 in one element
                nisa.dma_copy(dst=out[:, 2:3], src=x[:, 2:3])
        return out
    with pytest.raises(RaceError, match=race(n=1)):
        racy(kernel)(np.ones((4, 8), np.float32))


def test_negative_stride_view_races_and_disjoint_one_does_not():
    def kernel(x):
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        for i in nl.affine_range(2):
            # iteration i writes row (3 - i) through a reversed-rows pattern; with ``clash`` the
            # second iteration writes rows 2..3 reversed
            rows = 2 if clash and i == 1 else 1
            dst = out.ap([[-8, rows], [1, 8]], offset=(3 - i) * 8 + (8 if rows == 2 else 0))
            nisa.dma_copy(dst=dst, src=x[0:rows, :])
        return out
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    clash = False
    out = racy(kernel)(x)
    np.testing.assert_array_equal(out[3], x[0])
    np.testing.assert_array_equal(out[2], x[0])
    clash = True
    with pytest.raises(RaceError, match=race(n=8)):
        racy(kernel)(x)


def test_write_after_a_read_by_another_iteration_is_not_a_race():
    """In program order (affine_range is an alias of range) a later iteration may overwrite what
    an earlier one read; the earlier read saw the old values."""
    def kernel(x):
        t = _copy_in(x)
        out = nl.ndarray((2, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nisa.dma_copy(dst=out[i], src=t)                # reads all of t
            nisa.memset(dst=t[1:3, :], value=0.0)           # overwrites rows 1..2 (read just before)
        return out
    x = np.ones((4, 8), np.float32)
    want = np.stack([x, x])
    want[1, 1:3] = 0
    np.testing.assert_array_equal(racy(kernel)(x), want)


def test_overwriting_another_iterations_unread_write_races():
    def kernel(x):
        t = _copy_in(x)
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        for i in nl.affine_range(3):
            if i == 0:
                nisa.dma_copy(dst=out[0:2, :], src=t[0:2, :])
            elif i == 2:
                nisa.dma_copy(dst=out[1:2, 2:6], src=t[0:1, 0:4])   # 4 of iteration 0's unread elements
        return out
    with pytest.raises(RaceError, match=race(n=4, it=2)):
        racy(kernel)(np.ones((4, 8), np.float32))


def test_on_chip_overwrites_are_not_races():
    """A tile declared before the loop may be overwritten unread by a later iteration (a scratch
    tile, a reset state, a discarded result): in-order code that loses no kernel output."""
    def kernel(x):
        t = _copy_in(x)
        ps = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.psum)
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            nisa.memset(dst=t[0:2, :], value=float(i))
            nisa.memset(dst=ps, value=float(i))
        nisa.dma_copy(dst=out, src=t)
        return out
    want = np.ones((4, 8), np.float32)
    want[0:2] = 2
    np.testing.assert_array_equal(racy(kernel)(np.ones((4, 8), np.float32)), want)


def test_inputs_read_by_every_iteration_are_not_a_race():
    def kernel(x):
        out = nl.ndarray((4, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)                      # every iteration reads all of x
            nisa.dma_copy(dst=out[i], src=t)
        return out
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(racy(kernel)(x), np.broadcast_to(x, (4, 4, 8)))


def nested_kernel(clash):
    """(i, j) writes a 2-row block of out: "none" out[i, 2j:2j+2] (all disjoint); "inner" out[i, 0:2]
    (the j of one i collide); "outer" out[0, 2j:2j+2] (the same j of both i collide)."""
    def kernel(x):
        out = nl.ndarray((2, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        for i in nl.affine_range(2):
            for j in nl.affine_range(2):
                a, b = {"none": (i, 2 * j), "inner": (i, 0), "outer": (0, 2 * j)}[clash]
                nisa.dma_copy(dst=out[a, b:b + 2, :], src=x[2 * j:2 * j + 2, :])
        return out
    return kernel


def test_nested_loops_each_level_checked():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(racy(nested_kernel("none"))(x), np.stack([x, x]))
    loops = {}
    for clash in ("inner", "outer"):
        with pytest.raises(RaceError, match=race(n=16, shape=r"\(2, 4, 8\)")) as info:
            racy(nested_kernel(clash))(x)
        loops[clash] = int(re.search(r"loop at test_uninit_races\.py:(\d+)", str(info.value))[1])
    assert loops["inner"] == loops["outer"] + 1


def test_tensor_allocated_in_the_outer_iteration_is_checked_by_the_inner_loop():
    def kernel(x):
        out = nl.ndarray((2, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=t, value=0.0)
            s = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.private_hbm, name="s")
            nisa.dma_copy(dst=s, src=t)
            for j in nl.affine_range(2):
                nisa.tensor_scalar(dst=t[:, j:j + 1 + shift], data=t[:, j:j + 1 + shift],
                                   op0=nl.add, operand0=1.0)    # read, then written: legal
                nisa.dma_copy(dst=s[:, j:j + 1 + shift], src=t[:, j:j + 1 + shift])
                if peek:              # reading s in between consumes column 1
                    nisa.dma_copy(dst=t[:, 7:8], src=s[:, j + shift:j + 1 + shift])
            nisa.dma_copy(dst=out[i], src=s)
        return out
    x = np.zeros((1, 1), np.float32)
    want = np.zeros((4, 8), np.float32)
    want[:, 0:2] = 1
    shift, peek = 0, False
    np.testing.assert_array_equal(racy(kernel)(x), np.stack([want, want]))
    shift = 1                     # column 1 of s: written by both inner iterations, unread between
    with pytest.raises(RaceError, match=race(n=4, buf="private_hbm", name="s")):
        racy(kernel)(x)
    peek = True
    want[:, 1], want[:, 2] = 2, 1
    np.testing.assert_array_equal(racy(kernel)(x), np.stack([want, want]))


def psum_kernel(first):
    """Two iterations accumulate nc_matmul into one PSUM tile; ``first`` is what iteration 1 does
    to it before its matmul: nothing, a plain overwrite of rows 0..1, or a read (all legal)."""
    def kernel(a, b):
        ps = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.psum, name="ps")
        for k in nl.affine_range(2):
            st = nl.ndarray((8, 8), dtype=a.dtype, buffer=nl.sbuf)
            mv = nl.ndarray((8, 4), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=st, src=a[k * 8:(k + 1) * 8, :])
            nisa.dma_copy(dst=mv, src=b[k * 8:(k + 1) * 8, :])
            if k == 1 and first == "write":
                nisa.memset(dst=ps[0:2, :], value=0.0)
            if k == 1 and first == "read":
                peek = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=peek, src=ps)
            nisa.nc_matmul(dst=ps, stationary=st, moving=mv)
        sb = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        out = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=sb)
        return out
    return kernel


def test_psum_accumulation_reads_and_overwrites_are_legal():
    a = np.arange(128, dtype=np.float32).reshape(16, 8) / 64
    b = np.arange(64, dtype=np.float32).reshape(16, 4) / 32
    np.testing.assert_allclose(racy(psum_kernel("none"))(a, b), a.T @ b, rtol=1e-5)
    np.testing.assert_allclose(racy(psum_kernel("read"))(a, b), a.T @ b, rtol=1e-5)
    want = a.T @ b
    want[0:2] = a[8:].T[0:2] @ b[8:]          # iteration 0's sum in rows 0..1 was reset
    np.testing.assert_allclose(racy(psum_kernel("write"))(a, b), want, rtol=1e-5)


def lnc_rows_kernel(overlap):
    """Core c writes 2-row tiles c, c + 2 (interleaved, disjoint); with ``overlap`` core 1's tiles
    start one row early and meet core 0's."""
    def kernel(x):
        out = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        me = nl.program_id(0)
        for i in nl.affine_range(2):
            r = (2 * i + me) * 2 - (me if overlap else 0)
            t = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[r:r + 2, :])
            nisa.dma_copy(dst=out[r:r + 2, :], src=t)
        return out
    return kernel


def test_lnc2_interleaved_disjoint_tiles_pass_and_overlapping_ones_race():
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    np.testing.assert_array_equal(racy(lnc_rows_kernel(False))[2](x), x)
    with pytest.raises(RaceError, match=r"^nisa\.dma_copy: core ([01]) writes 4 element\(s\) of shared_hbm "
                                        r"tensor 'out' \(8, 4\) that core (?!\1)[01] wrote "
                                        rf"\({LINE}\) with no core_barrier between \({LINE}\)"
                                        r"\n\(raised on LNC core \1\)$"):
        racy(lnc_rows_kernel(True))[2](x)


def test_negative_iteration_values_are_tracked():
    """Decision (checks/races.py): marks hold iteration positions, so values -1/-2 are not lost."""
    def kernel(x):
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        for i in nl.affine_range(-2, 0):
            nisa.dma_copy(dst=out[:, 0:2], src=x[:, 0:2])
        return out
    with pytest.raises(RaceError, match=race(n=8, it=-1, other="iteration -2")):
        racy(kernel)(np.ones((4, 8), np.float32))


def column_blocks_kernel(width, copy=False):
    """Iteration i scales columns [3i, 3i + width) of a tile loaded before the loop, in place (or,
    with ``copy``, from x, reading nothing of t), and copies them into the same columns of an HBM
    tensor declared before the loop (its overlapping columns are then lost writes)."""
    def kernel(x):
        t = nl.ndarray((4, 12), dtype=nl.float32, buffer=nl.sbuf, name="t")
        nisa.dma_copy(dst=t, src=x)
        h = nl.ndarray((4, 12), dtype=nl.float32, buffer=nl.shared_hbm, name="h")
        for i in nl.affine_range(4):
            c = slice(3 * i, min(3 * i + width, 12))
            xs = nl.ndarray((4, c.stop - c.start), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xs, src=x[:, c])
            src = xs if copy else t[:, c]
            nisa.tensor_scalar(dst=t[:, c], data=src, op0=nl.multiply, operand0=2.0)
            if copy:
                nisa.dma_copy(dst=h[:, c], src=t[:, c])
        out = nl.ndarray((4, 12), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


def test_column_blocks_of_one_tile_in_place():
    x = np.arange(48, dtype=np.float32).reshape(4, 12)
    np.testing.assert_array_equal(racy(column_blocks_kernel(3))(x), 2 * x)
    np.testing.assert_array_equal(racy(column_blocks_kernel(3, copy=True))(x), 2 * x)
    want = 2 * x
    want[:, 3:12:3] *= 2              # overlapping columns 3, 6, 9 scaled in place twice: legal
    np.testing.assert_array_equal(racy(column_blocks_kernel(4))(x), want)
    with pytest.raises(RaceError, match=race(n=4, name="h", shape=r"\(4, 12\)")):
        racy(column_blocks_kernel(4, copy=True))(x)


def test_psum_iadd_reduction_and_a_reset_in_affine_range_are_not_races():
    """``acc += nl.matmul(...)`` across affine_range iterations is the documented PSUM reduction;
    a plain write of the accumulator by another iteration is in-order code too (on chip)."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((256, 16)).astype(np.float32), rng.standard_normal((256, 32)).astype(np.float32)

    def reduce(x, y):
        acc = nl.zeros((16, 32), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            acc += nl.matmul(nl.load(x[k * 128:(k + 1) * 128, :]), nl.load(y[k * 128:(k + 1) * 128, :]),
                             transpose_x=True)
        out = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, sbuf_copy(acc))
        return out
    np.testing.assert_allclose(racy(reduce)(a, b), a.T @ b, rtol=1e-5, atol=1e-4)

    def clobber(x, y):
        acc = nl.zeros((16, 32), dtype=nl.float32, buffer=nl.psum, name="acc")
        for k in nl.affine_range(2):
            if k == 0:
                acc += nl.matmul(nl.load(x[0:128, :]), nl.load(y[0:128, :]), transpose_x=True)
            else:
                nisa.memset(dst=acc, value=0.0)
        out = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, sbuf_copy(acc))
        return out
    np.testing.assert_array_equal(racy(clobber)(a, b), np.zeros((16, 32), np.float32))


def test_psum_indexed_iadd_is_a_reduction_too():
    """``acc[...] += nl.matmul(...)`` (the tutorial's form) runs as getitem, in-place add, then an
    assignment of the view to itself, which must not count as a second, plain write."""
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((256, 16)).astype(np.float32), rng.standard_normal((256, 32)).astype(np.float32)

    def kernel(x, y):
        acc = nl.zeros((16, 32), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            acc[...] += nl.matmul(nl.load(x[k * 128:(k + 1) * 128, :]), nl.load(y[k * 128:(k + 1) * 128, :]),
                                  transpose_x=True)
            acc[:, 0:8] += 1.0
        out = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, sbuf_copy(acc))
        return out
    want = a.T @ b
    want[:, 0:8] += 2
    np.testing.assert_allclose(racy(kernel)(a, b), want, rtol=1e-5, atol=1e-4)


def test_psum_iadd_of_a_matmul_then_nc_matmul_accumulates():
    """``acc += nl.matmul(...)`` leaves acc marked as matmul-written, so a following nc_matmul
    with the default accumulate adds to it (the sum of all four products, in any loop order)."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((512, 16)).astype(np.float32), rng.standard_normal((512, 32)).astype(np.float32)

    def kernel(x, y):
        acc = nl.zeros((16, 32), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(4):
            at, bt = nl.load(x[k * 128:(k + 1) * 128, :]), nl.load(y[k * 128:(k + 1) * 128, :])
            if k % 2:
                acc += nl.matmul(at, bt, transpose_x=True)
            else:
                nisa.nc_matmul(dst=acc, stationary=at, moving=bt)
        out = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, sbuf_copy(acc))
        return out
    np.testing.assert_allclose(racy(kernel)(a, b), a.T @ b, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(racy(kernel, iteration_order="shuffled", seed=3)(a, b), a.T @ b,
                               rtol=1e-5, atol=1e-4)


def test_assigning_a_view_to_itself_changes_nothing_but_other_assignments_still_write():
    def kernel(x):
        t = nl.load(x)
        t[:, 0:2] = t[:, 0:2]               # a no-op
        t[:, 2:4] = t[:, 0:2]               # a real copy
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    want = a.copy()
    want[:, 2:4] = a[:, 0:2]
    np.testing.assert_array_equal(nki.simulate(kernel)(a), want)
