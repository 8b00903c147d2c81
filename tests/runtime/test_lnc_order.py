"""An LNC2 launch gives the same results on every run: the cores' instructions that touch shared
HBM take turns in a fixed order (core 0's first, core 1's first, core 0's second, ...), whatever
the threads' timing; a core that cannot issue one before the other acts (it finished, or waits at
a sync point) is skipped. A kernel racing on shared HBM (no core_barrier between the cores'
accesses to the same elements) gets the outcome of that order, and NKISIM_DETECT_RACES=1 reports
the race.

Documented behaviour compared: nki.isa.core_barrier (two cores "write to disjoint portions of a
shared HBM tensor" and synchronise before consuming it: without the barrier the order is not
fixed by hardware); ARCHITECTURE.md ("deterministic by default"). Expected values are worked out
by hand from the turn order above, never read from the simulator."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import RaceError

F32 = np.float32
RUNS = 12


def _busy(t, n):
    """Private work (SBUF only): shifts a core's timing, never the order of its shared accesses."""
    for i in range(n):
        nisa.memset(dst=t, value=float(i))


def _zero_then_own_rows(delay):
    """Each core zero-fills the WHOLE shared output, then stores its half of the input rows: a
    cross-core write-write race on the zero fill (the pattern of a library kernel that
    initialises its output on every core). ``delay[c]``: private instructions core c issues
    first."""
    def kernel(x):
        me = nl.program_id(0)
        n_rows, n = x.shape
        half = n_rows // 2
        out = nl.ndarray((n_rows, n), dtype=x.dtype, buffer=nl.shared_hbm)
        zero = nl.ndarray((n_rows, n), dtype=x.dtype, buffer=nl.sbuf)
        _busy(zero, delay[me])
        nisa.memset(dst=zero, value=0.0)
        nisa.dma_copy(dst=out, src=zero)                              # shared instruction 1
        t = nl.ndarray((half, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[me * half:(me + 1) * half, :])     # 2
        _busy(zero, delay[1 - me])
        nisa.dma_copy(dst=out[me * half:(me + 1) * half, :], src=t)   # 3
        return out
    return kernel


@pytest.mark.parametrize("delay", [(0, 0), (300, 0), (0, 300)])
def test_a_kernel_racing_on_shared_hbm_gives_the_same_result_on_every_run(delay):
    """Turns: zero fill of core 0, of core 1, then the loads, then the stores -- both halves
    survive the other core's zero fill, on every run, whichever core is slowed down."""
    x = np.arange(4 * 64, dtype=F32).reshape(4, 64) + 1
    run = nki.simulate(_zero_then_own_rows(delay))[2]
    for _ in range(RUNS):
        np.testing.assert_array_equal(run(x), x)


@pytest.mark.parametrize("delay", [(0, 0), (300, 0), (0, 300)])
def test_overwrites_of_one_shared_element_land_in_turn_order(delay):
    """Each core stores 10 * k + core_id at its k-th shared instruction into the same tensor:
    the last store is core 1's third (k = 2), so every run returns 21."""
    def kernel(x):
        me = nl.program_id(0)
        out = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        for k in range(3):
            _busy(t, delay[me])
            nisa.memset(dst=t, value=float(10 * k + me))
            nisa.dma_copy(dst=out, src=t)
        return out

    run = nki.simulate(kernel)[2]
    for _ in range(RUNS):
        np.testing.assert_array_equal(run(np.zeros((1, 8), F32)), np.full((1, 8), 21, F32))


def test_a_read_without_barrier_sees_the_writes_of_earlier_turns_only():
    """Core 1's k-th shared instruction comes after core 0's k-th and before its (k+1)-th:
    core 1 reading the cell at its 2nd turn sees core 0's 2nd store (value 2), not its 3rd."""
    def kernel(x):
        me = nl.program_id(0)
        cell = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        if me == 0:
            for k in range(1, 4):
                nisa.memset(dst=t, value=float(k))
                nisa.dma_copy(dst=cell, src=t)           # turns 1, 2, 3 of core 0
        else:
            _busy(t, 200)
            nisa.memset(dst=t, value=-1.0)
            nisa.dma_copy(dst=out, src=t)                # turn 1 of core 1
            nisa.dma_copy(dst=t, src=cell)               # turn 2: after core 0's 2nd store
            nisa.dma_copy(dst=out, src=t)                # turn 3
        return out

    run = nki.simulate(kernel)[2]
    for _ in range(RUNS):
        np.testing.assert_array_equal(run(np.zeros((1, 8), F32)), np.full((1, 8), 2, F32))


def test_a_core_waiting_at_a_barrier_is_skipped_and_the_order_resumes_after_it():
    """Core 0 waits at the barrier before any shared access; core 1 stores 1 then 2 (its turns
    go on while core 0 cannot issue one), reaches the barrier, then core 0 stores 3 and core 1
    stores 4: the cell ends 4 on every run."""
    def kernel(x):
        me = nl.program_id(0)
        cell = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        if me == 1:
            for v in (1.0, 2.0):
                nisa.memset(dst=t, value=v)
                nisa.dma_copy(dst=cell, src=t)
        nisa.core_barrier(cell, (0, 1))
        _busy(t, 200 if me == 1 else 0)
        nisa.memset(dst=t, value=3.0 + me)
        nisa.dma_copy(dst=cell, src=t)
        return cell

    run = nki.simulate(kernel)[2]
    for _ in range(RUNS):
        np.testing.assert_array_equal(run(np.zeros((1, 8), F32)), np.full((1, 8), 4, F32))


def test_the_race_is_reported_by_the_same_core_on_every_run():
    """With race detection the zero-fill race is an error: core 1's zero fill (its first turn)
    overwrites what core 0 wrote at its first turn, with no barrier between."""
    x = np.ones((4, 64), F32)
    run = nki.simulate(_zero_then_own_rows((0, 300)), detect_races=True)[2]
    for _ in range(4):
        with pytest.raises(RaceError, match=r"^nisa\.dma_copy: core 1 writes 256 element\(s\) of shared_hbm "
                                            r"tensor \(4, 64\) that core 0 wrote \(test_lnc_order\.py:\d+\) "
                                            r"with no core_barrier between"):
            run(x)
