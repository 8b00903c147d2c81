"""An LNC2 launch never outlives its call: an interrupt in the caller's thread or a failing core
stops both cores (at their next instruction or sync point) before the caller's arrays are
restored; a long but legitimate load imbalance at a barrier is no deadlock.

Documented behaviour compared: nki.isa.core_barrier ("all specified NeuronCores must reach
before any can proceed"); ARCHITECTURE.md ("a launch never outlives its call"; "a kernel that
raised leaves the caller's arrays untouched")."""
import _thread
import threading
import time

import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DeadlockError, ShapeError

F32 = np.float32


def _core_threads():
    return [t for t in threading.enumerate() if t.name.startswith("nkisim-core")]


def _lnc2(kernel, **options):
    return nki.simulate(kernel, **options)[2]


class _Raised(Exception):
    pass


def _raise_in_main(signum, frame):
    raise _Raised("from the caller's thread")


@pytest.mark.parametrize("exc,where", [(KeyboardInterrupt, "running"), (KeyboardInterrupt, "at_barrier"),
                                       (_Raised, "running")])
def test_an_exception_in_the_caller_stops_both_cores_and_restores_the_arrays(exc, where):
    """KeyboardInterrupt (or another exception a signal handler raises in the caller's thread)
    while both cores run, or while core 0 waits at a barrier for core 1."""
    import signal
    started = threading.Event()
    if exc is _Raised:
        signal.signal(signal.SIGUSR1, _raise_in_main)
    # Python's own SIGINT handler, whatever the runner inherited (a shell that starts a job in
    # the background makes it ignore SIGINT, and then interrupt_main() does nothing)
    sigint = signal.signal(signal.SIGINT, signal.default_int_handler)

    def kernel(x):
        t = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.sbuf)
        me = nl.program_id(0)
        if where == "at_barrier" and me == 0:
            nisa.dma_copy(dst=x[0:2, :], src=t)
            nisa.core_barrier(x, (0, 1))
        for i in nl.sequential_range(200_000):
            nisa.memset(dst=t, value=float(i + 1))
            nisa.dma_copy(dst=x[2 * me:2 * me + 2, :], src=t)
            started.set()
        return x

    x = np.arange(32, dtype=F32).reshape(4, 8)
    want = x.copy()

    def interrupt():
        started.wait(10)
        time.sleep(0.1)
        if exc is _Raised:
            _thread.interrupt_main(signal.SIGUSR1)
        else:
            _thread.interrupt_main()

    timer = threading.Thread(target=interrupt, daemon=True)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(exc):
            _lnc2(kernel)(x)
            time.sleep(5)            # (not reached) would let a late interrupt land inside the raises
        timer.join()
    finally:
        if exc is _Raised:
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        signal.signal(signal.SIGINT, sigint)
    assert time.monotonic() - t0 < 8
    assert _core_threads() == []                          # no core outlives the call
    assert x.tobytes() == want.tobytes()                  # restored bit for bit
    time.sleep(0.2)
    assert x.tobytes() == want.tobytes()                  # and nothing writes after the return


@pytest.mark.parametrize("when", ["running", "at_barrier"])
def test_a_failing_core_stops_the_other_at_its_next_instruction(when):
    """Core 1 breaks a rule; core 0 (in a long loop of instructions, or waiting at a barrier)
    stops promptly: the error raised is core 1's, core 0 does not run its loop to the end."""
    n = 20_000
    done = []
    go = threading.Event()

    def kernel(x):
        out = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            if when == "at_barrier":
                go.set()
                nisa.core_barrier(out, (0, 1))
            for i in nl.sequential_range(n):
                go.set()
                nisa.memset(dst=t, value=float(i))
                done.append(i)
        else:
            go.wait(10)
            bad = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=bad, src=t)          # 4 != 8 elements: ShapeError
        return out

    x = np.zeros((1, 8), F32)
    t0 = time.monotonic()
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_copy: "):
        _lnc2(kernel, barrier_timeout_s=30.0)(x)
    assert time.monotonic() - t0 < 5                  # no barrier timeout
    assert _core_threads() == []
    assert len(done) < n // 4, len(done)               # core 0 stopped early
    if when == "at_barrier":
        assert done == []                              # it never passed the barrier


def test_a_failing_core_stops_the_other_in_the_recorded_run_too():
    """Counted from the trace: core 0's instructions after core 1's error are at most a few."""
    import nkisim.trace
    n = 5_000

    def kernel(x):
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            for i in nl.sequential_range(n):
                nisa.memset(dst=t, value=float(i))
        else:
            for i in nl.sequential_range(50):
                nisa.memset(dst=t, value=float(i))
            raise ValueError("core 1 fails")
        return x

    with nkisim.trace.record() as events:
        with pytest.raises(ValueError, match="core 1 fails"):
            _lnc2(kernel)(np.zeros((1, 8), F32))
    core0 = sum(1 for e in events if e.core == 0)
    assert core0 < n // 4, core0
    assert _core_threads() == []


def test_load_imbalance_longer_than_the_barrier_timeout_is_no_deadlock():
    """Core 1 computes (issuing instructions) for 4x the barrier timeout while core 0 waits at
    the barrier: the wait counts only time when no core progresses, so the kernel passes."""
    timeout = 0.05

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        if me == 1:
            end = time.monotonic() + 4 * timeout
            while time.monotonic() < end:
                nisa.memset(dst=t, value=0.0)
                time.sleep(timeout / 10)
        nisa.dma_copy(dst=t, src=x[me:me + 1, :])
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        nisa.core_barrier(out, (0, 1))
        nisa.dma_copy(dst=t, src=out[1 - me:2 - me, :])
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        return out

    x = np.arange(16, dtype=F32).reshape(2, 8)
    got = _lnc2(kernel, barrier_timeout_s=timeout)(x)
    # each core copied the other's row after the barrier: the rows end swapped or duplicated,
    # but every row holds one of the input rows
    assert all(any(np.array_equal(r, w) for w in x) for r in got)


def test_a_stalled_peer_is_a_deadlock_after_the_timeout():
    """Decision: a peer that issues no instruction for barrier_timeout_s while the other core
    waits (a Python-level loop, a blocking call) ends in DeadlockError, not a hang."""
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 1:
            time.sleep(0.6)
        nisa.core_barrier(out, (0, 1))
        return out

    t0 = time.monotonic()
    with pytest.raises(DeadlockError, match=r"^nisa\.core_barrier: core 0 waits at core_barrier but core 1 "
                                            r"issued no instruction for 0\.1 s \(test_lnc_stop\.py:\d+\)"):
        _lnc2(kernel, barrier_timeout_s=0.1)(np.zeros((2, 8), F32))
    assert time.monotonic() - t0 < 3
    assert _core_threads() == []


def test_a_core_in_a_python_loop_is_stopped_when_the_other_fails():
    """A core that issues no instruction (a Python-level loop) is still stopped."""
    def kernel(x):
        if nl.program_id(0) == 0:
            end = time.monotonic() + 30
            while time.monotonic() < end:
                pass
        else:
            raise ValueError("core 1 fails")
        return x

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="core 1 fails"):
        _lnc2(kernel)(np.zeros((1, 8), F32))
    assert time.monotonic() - t0 < 5
    assert _core_threads() == []
