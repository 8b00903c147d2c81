"""LNC2 sync instructions (nisa.core_barrier, nisa.sendrecv): their events on both cores, and the
documented signature (a misspelt keyword is a TypeError)."""
import sys

import numpy as np
import pytest

import nkisim.trace
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from conftest import simulate


def _next_line():
    """The line after the caller's: where the instruction under test is called."""
    return sys._getframe(1).f_lineno + 1


def _operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def test_multicore_events_match_the_kernel_calls_on_both_cores():
    lines = []

    def kernel(x):
        me = nl.program_id(0)
        out = nl.ndarray((2, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        mine = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        theirs = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=x[me:me + 1, :])
        lines.append(_next_line())
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        nisa.dma_copy(dst=out[me:me + 1, :], src=theirs)
        lines.append(_next_line())
        nisa.core_barrier(out, (0, 1))
        return out
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with nkisim.trace.record() as events:
        got = simulate(kernel, x, lnc=2)
    np.testing.assert_array_equal(got, x[::-1])
    ours = [e for e in events if e.op in ("sendrecv", "core_barrier")]
    sr_line, cb_line = (f"test_multicore.py:{n}" for n in dict.fromkeys(lines))
    assert [(e.op, e.api, e.engine, e.core, e.location) for e in ours] == [
        (op, f"nisa.{op}", engine, core, line) for core in (0, 1)
        for op, engine, line in (("sendrecv", "dma", sr_line), ("core_barrier", "gpsimd", cb_line))]
    for core in (0, 1):
        sr, cb = [e for e in ours if e.core == core]
        assert sr.seq < cb.seq
        assert _operands(sr.reads) == [("src", "sbuf", (1, 4), "float32", 16)]
        assert _operands(sr.writes) == [("dst", "sbuf", (1, 4), "float32", 16)]
        assert sr.options == {"send_to_rank": 1 - core, "recv_from_rank": 1 - core, "pipe_id": 0,
                              "dma_engine": "dma"}
        assert _operands(cb.reads) == [("data", "shared_hbm", (2, 4), "float32", 32)] and cb.writes == ()
        assert cb.options == {"cores": (0, 1), "engine": "gpsimd"}
    # the barrier synchronises on the one shared tensor both cores wrote
    assert len({e.reads[0].alloc for e in ours if e.op == "core_barrier"}) == 1


def test_core_barrier_engine_unknown_runs_on_gpsimd_and_an_explicit_engine_is_kept():
    def kernel(x):
        nisa.core_barrier(x, (0, 1), engine=nisa.engine.unknown)
        nisa.core_barrier(x, (0, 1), engine=nisa.engine.sync)
        return x
    with nkisim.trace.record() as events:
        simulate(kernel, np.zeros((2, 4), np.float32), lnc=2)
    assert [e.engine for e in events if e.op == "core_barrier" and e.core == 0] == ["gpsimd", "sync"]


def test_multicore_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x):
        lines.append(_next_line())
        nisa.core_barrier(x, (0, 1), engin=nisa.engine.gpsimd)
        return x
    with pytest.raises(TypeError) as info:
        simulate(kernel, np.zeros((2, 4), np.float32), lnc=2)
    assert str(info.value) == (f"nisa.core_barrier() got an unexpected keyword argument 'engin'; did you "
                               f"mean 'engine'? (test_multicore.py:{lines[0]})")

    def kernel2(x):
        t = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0, pipeid=1)
    with pytest.raises(TypeError) as info:
        simulate(kernel2, np.zeros((2, 4), np.float32))
    assert str(info.value) == (f"nisa.sendrecv() got an unexpected keyword argument 'pipeid'; did you "
                               f"mean 'pipe_id'? (test_multicore.py:{lines[-1]})")
