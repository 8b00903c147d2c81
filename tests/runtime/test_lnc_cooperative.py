"""The cores of an LNC2 launch run cooperatively in the caller's thread: no thread is started,
each core sees its own state, a core gives way to the other only where it must wait (its
shared-HBM turn, a sync point, the end), a deadlock is reported at once, and a rank of a
multi-rank launch runs its two cores inside its own thread.

Documented behaviour compared: ARCHITECTURE.md ("Cores of one launch ... run them cooperatively,
switching only at synchronisation points, deterministic by default; a launch never outlives its
call"); nki.isa.core_barrier / sendrecv (cores meet at barriers; sendrecv swaps SBUF tiles).
Expected values come from NumPy or are worked out by hand from the documented order."""
import contextvars
import threading
import time

import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.collectives as ncc
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DeadlockError

F32 = np.float32


def test_an_lnc2_launch_starts_no_thread_and_runs_in_the_callers_thread():
    seen = []
    before = threading.active_count()

    def kernel(x):
        seen.append((nl.program_id(0), threading.get_ident(), threading.active_count()))
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        me = nl.program_id(0)
        nisa.dma_copy(dst=t, src=x[me:me + 1, :])
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        return out

    x = np.arange(16, dtype=F32).reshape(2, 8)
    np.testing.assert_array_equal(nki.simulate(kernel)[2](x), x)
    me = threading.get_ident()
    assert sorted(seen) == [(0, me, before), (1, me, before)]
    assert threading.active_count() == before


def test_each_core_has_its_own_context():
    """Each core runs in a fresh contextvars context of its own (as a fresh thread had): a value
    set by the caller or by the other core is not seen; the caller's context is unchanged."""
    var = contextvars.ContextVar("test_var", default="unset")
    var.set("caller")
    seen = {}

    def kernel(x):
        me = nl.program_id(0)
        seen[me] = var.get()
        var.set(f"core {me}")
        nisa.core_barrier(x, (0, 1))
        seen[(me, "after")] = var.get()
        return x

    nki.simulate(kernel)[2](np.zeros((2, 8), F32))
    assert seen == {0: "unset", 1: "unset", (0, "after"): "core 0", (1, "after"): "core 1"}
    assert var.get() == "caller"


def test_a_core_gives_way_only_where_it_must_wait():
    """Decision: core 0 runs first, until its shared-HBM turn is core 1's; then core 1 runs
    until its turn is core 0's, and so on (one shared-HBM instruction each per turn). Worked out
    by hand: core 0 issues its 1st store and runs on to its 2nd, which is core 1's turn."""
    log = []

    def kernel(x):
        me = nl.program_id(0)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(me))
        for i in range(3):
            log.append((me, i))
            nisa.dma_copy(dst=x[me:me + 1, :], src=t)
        return x

    nki.simulate(kernel)[2](np.zeros((2, 8), F32))
    assert log == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 2)]


def test_sendrecv_and_barrier_results_match_numpy():
    """Each core doubles its half, the halves are swapped with sendrecv, each core stores the
    swapped half, a barrier, then each core adds the other core's stored half: out =
    2*swap(x) + 2*x, row halves exchanged (NumPy reference)."""
    def kernel(x):
        me = nl.program_id(0)
        half = x.shape[0] // 2
        rows = slice(me * half, (me + 1) * half)
        other = slice((1 - me) * half, (2 - me) * half)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[rows, :])
        nisa.tensor_scalar(dst=a, data=a, op0=nl.multiply, operand0=2.0)
        nisa.sendrecv(src=a, dst=b, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        nisa.dma_copy(dst=out[rows, :], src=b)
        nisa.core_barrier(out, (0, 1))
        nisa.dma_copy(dst=a, src=out[other, :])
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        nisa.core_barrier(out, (0, 1))
        nisa.dma_copy(dst=out[rows, :], src=a)
        return out

    x = np.random.default_rng(0).standard_normal((8, 16)).astype(F32)
    swapped = np.concatenate([x[4:], x[:4]]) * F32(2)
    want = swapped + np.concatenate([swapped[4:], swapped[:4]])
    got = nki.simulate(kernel)[2](x)
    np.testing.assert_array_equal(got, want)


def test_deadlocks_are_reported_at_once_whatever_the_timeout():
    def skips(x):
        if nl.program_id(0) == 0:
            nisa.core_barrier(x, (0, 1))
        return x

    t0 = time.monotonic()
    with pytest.raises(DeadlockError, match=r"^nisa\.core_barrier: core 0 waits at core_barrier but core 1 "
                                            r"finished the kernel without reaching it \(test_lnc_cooperative"
                                            r"\.py:\d+\)"):
        nki.simulate(skips, barrier_timeout_s=30)[2](np.zeros((2, 8), F32))

    def crossed(x):
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            nisa.core_barrier(x, (0, 1))
        else:
            nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=0, pipe_id=3)
            nisa.memset(dst=t, value=0.0)
        return x

    with pytest.raises(DeadlockError, match=r"^nisa\.core_barrier: core 0 is at core_barrier while core 1 is "
                                            r"at sendrecv \(pipe_id=3\); both cores must reach the same sync "
                                            r"points in the same order"):
        nki.simulate(crossed, barrier_timeout_s=30)[2](np.zeros((2, 8), F32))
    assert time.monotonic() - t0 < 2


def test_a_core_at_a_barrier_while_the_other_waits_at_a_collective_is_a_deadlock_at_once():
    """Decision: core 1 waits at a barrier core 0 never reaches, core 0 at a collective that
    needs core 1 (both cores of a rank issue each collective): the core at the barrier reports
    at once (with threads this was a timeout)."""
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 0:
            ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([[0]]), op=nl.add)
        else:
            nisa.core_barrier(out, (0, 1))
        return out

    t0 = time.monotonic()
    with pytest.raises(DeadlockError, match=r"^nisa\.core_barrier: core 1 is at core_barrier while core 0 waits "
                                            r"at ncc\.all_reduce \(test_lnc_cooperative\.py:\d+\); both cores "
                                            r"must reach the same sync points and collectives in the same order"):
        nki.simulate(kernel, barrier_timeout_s=30)[2](np.zeros((2, 8), F32))
    assert time.monotonic() - t0 < 2


def test_lnc2_ranks_run_their_cores_in_the_ranks_thread():
    """Two LNC2 ranks: each rank's two cores run in that rank's thread (two threads in all), and
    an all-reduce over the ranks gives the NumPy sum."""
    seen = []

    def kernel(x):
        seen.append((threading.current_thread().name, nl.program_id(0)))
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([[0, 1]]), op=nl.add)
        return out

    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((4, 8)).astype(F32) for _ in range(2)]
    got = nki.simulate(kernel, ranks=2)[2](nki.per_rank(xs))
    for r in range(2):
        np.testing.assert_array_equal(got[r], xs[0] + xs[1])
    names = {}
    for name, core in seen:
        names.setdefault(name, []).append(core)
    assert len(names) == 2 and all(sorted(c) == [0, 1] for c in names.values())
