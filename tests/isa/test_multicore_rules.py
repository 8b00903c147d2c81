"""Documented rules of the LNC2 sync instructions (aws-neuron-sdk nki/api/nki/isa/__init__.py:
core_barrier, sendrecv), each with a passing and a failing case."""
import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DeadlockError, MemorySpaceError, ShapeError

F32 = np.float32


def _lnc2(kernel, *args, **options):
    return nki.simulate(kernel, **options)[2](*args)


# ---- core_barrier: "data ... must be data in shared HBM" -------------------------------------

@pytest.mark.parametrize("buffer", ["private_hbm", "hbm"])
def test_core_barrier_on_a_tensor_in_private_hbm_raises(buffer):
    where = "private_hbm"

    def kernel(x):
        t = nl.ndarray((2, 8), dtype=x.dtype, buffer=getattr(nl, buffer))
        nisa.core_barrier(t, (0, 1))
        return x
    with pytest.raises(MemorySpaceError, match=rf"^nisa\.core_barrier: data is in {where}; must be in "
                                               rf"shared_hbm \(the shared data both cores synchronise on\) "
                                               rf"\(test_multicore_rules\.py:\d+\)"):
        _lnc2(kernel, np.zeros((2, 8), F32))


@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
def test_core_barrier_on_an_on_chip_tile_synchronises_like_nki_library_does(buffer):
    """Decision (docstring): nki-library passes an SBUF tile; the barrier still orders the cores:
    each core reads the other's row of a shared tensor only after the barrier."""
    def kernel(x):
        me = nl.program_id(0)
        out = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        anchor = nl.ndarray((1, 8), dtype=nl.float32, buffer=getattr(nl, buffer))
        nisa.memset(anchor, value=0.0)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[me:me + 1, :])
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        nisa.core_barrier(anchor, (0, 1))
        res = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        other = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=other, src=out[1 - me:2 - me, :])
        nisa.dma_copy(dst=res[me:me + 1, :], src=other)
        return res
    x = np.arange(16, dtype=F32).reshape(2, 8)
    np.testing.assert_array_equal(_lnc2(kernel, x, detect_races=True), x[::-1])


def test_core_barrier_on_shared_hbm_and_on_an_lnc2_argument_passes():
    def kernel(x):
        out = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[me:me + 1, :])
        nisa.dma_copy(dst=out[me:me + 1, :], src=t)
        nisa.core_barrier(out, (0, 1))
        nisa.core_barrier(x, (0, 1))          # LNC2 arguments are in shared HBM
        return out
    x = np.arange(16, dtype=F32).reshape(2, 8)
    np.testing.assert_array_equal(_lnc2(kernel, x), x)


# ---- sendrecv(dma_engine=gpsimd_dma): "1024 bytes for 32-bit types, 512 bytes for 16-bit
# types, 256 bytes for 8-bit types" per partition ----------------------------------------------

LIMITS = [(nl.float32, F32, 1024), (nl.int32, np.int32, 1024), (nl.bfloat16, ml_dtypes.bfloat16, 512),
          (nl.float16, np.float16, 512), (nl.int8, np.int8, 256), (nl.uint8, np.uint8, 256)]


def _exchange(nl_dtype, np_dtype, free, engine, partitions=4):
    def kernel(x):
        me = nl.program_id(0)
        src = nl.ndarray((partitions, free), dtype=nl_dtype, buffer=nl.sbuf)
        dst = nl.ndarray((partitions, free), dtype=nl_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x[me])
        nisa.sendrecv(src=src, dst=dst, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0,
                      dma_engine=engine)
        out = nl.ndarray((partitions, free), dtype=nl_dtype, buffer=nl.shared_hbm)
        if me == 0:
            nisa.dma_copy(dst=out, src=dst)
        return out
    x = (np.arange(2 * partitions * free) % 100).astype(np_dtype).reshape(2, partitions, free)
    return _lnc2(kernel, x), x


@pytest.mark.parametrize("nl_dtype,np_dtype,limit", LIMITS)
def test_sendrecv_gpsimd_dma_at_the_per_partition_limit_passes(nl_dtype, np_dtype, limit):
    free = limit // np.dtype(np_dtype).itemsize
    got, x = _exchange(nl_dtype, np_dtype, free, nisa.dma_engine.gpsimd_dma)
    np.testing.assert_array_equal(got, x[1])          # core 0 received core 1's tile


@pytest.mark.parametrize("nl_dtype,np_dtype,limit", LIMITS)
def test_sendrecv_gpsimd_dma_over_the_per_partition_limit_raises(nl_dtype, np_dtype, limit):
    isz = np.dtype(np_dtype).itemsize
    free = limit // isz + 1
    with pytest.raises(ShapeError, match=rf"^nisa\.sendrecv: src bytes per partition \({free} x {isz}-byte "
                                         rf"elements\) {free * isz} bytes exceeds {limit} bytes on trn3 with "
                                         rf"dma_engine=gpsimd_dma for {8 * isz}-bit types "
                                         rf"\(test_multicore_rules\.py:\d+\)"):
        _exchange(nl_dtype, np_dtype, free, nisa.dma_engine.gpsimd_dma)


@pytest.mark.parametrize("nl_dtype,np_dtype,limit", LIMITS[::2])
def test_sendrecv_default_dma_has_no_gpsimd_limit(nl_dtype, np_dtype, limit):
    free = 4 * limit // np.dtype(np_dtype).itemsize
    got, x = _exchange(nl_dtype, np_dtype, free, nisa.dma_engine.dma, partitions=2)
    np.testing.assert_array_equal(got, x[1])


# ---- sendrecv pipes: "Operations with different pipe_id values can progress independently
# without blocking each other" ------------------------------------------------------------------

def test_sendrecv_on_different_pipes_progress_independently():
    """Core 0 calls pipe 0 then pipe 1, core 1 pipe 1 then pipe 0: each call meets the other
    core's call of the same pipe (no deadlock), and each dst holds the other core's src."""
    def kernel(x):
        me = nl.program_id(0)
        a = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        ra = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        rb = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[me, 0:1, :])
        nisa.dma_copy(dst=b, src=x[me, 1:2, :])
        pipes = (0, 1) if me == 0 else (1, 0)
        for p in pipes:
            src, dst = (a, ra) if p == 0 else (b, rb)
            nisa.sendrecv(src=src, dst=dst, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=p)
        out = nl.ndarray((2, 2, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[me, 0:1, :], src=ra)
        nisa.dma_copy(dst=out[me, 1:2, :], src=rb)
        return out
    x = np.arange(32, dtype=F32).reshape(2, 2, 8)
    np.testing.assert_array_equal(_lnc2(kernel, x), x[::-1])


def test_sendrecv_pipe_calls_meet_in_order_within_a_pipe():
    """Two calls on one pipe meet the peer's two calls on it in order, whatever the other
    pipe's calls between them."""
    def kernel(x):
        me = nl.program_id(0)
        srcs = [nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf) for _ in range(3)]
        dsts = [nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf) for _ in range(3)]
        for i in range(3):
            nisa.dma_copy(dst=srcs[i], src=x[me, i:i + 1, :])
        order = [(0, 0), (1, 1), (0, 2)] if me == 0 else [(1, 1), (0, 0), (0, 2)]
        for pipe, i in order:
            nisa.sendrecv(src=srcs[i], dst=dsts[i], send_to_rank=1 - me, recv_from_rank=1 - me,
                          pipe_id=pipe)
        out = nl.ndarray((2, 3, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in range(3):
            nisa.dma_copy(dst=out[me, i:i + 1, :], src=dsts[i])
        return out
    x = np.arange(48, dtype=F32).reshape(2, 3, 8)
    np.testing.assert_array_equal(_lnc2(kernel, x), x[::-1])


def test_sendrecv_a_pipe_the_other_core_never_uses_is_a_deadlock():
    def kernel(x):
        me = nl.program_id(0)
        a = nl.zeros((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        d = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=a, dst=d, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=me)
        nisa.dma_copy(dst=x[me:me + 1, :], src=d)
        return x
    with pytest.raises(DeadlockError, match=r"^nisa\.sendrecv: core 0 is at sendrecv \(pipe_id=0\) while "
                                            r"core 1 is at sendrecv \(pipe_id=1\); both cores must reach the "
                                            r"same sync points in the same order \(test_multicore_rules\.py:\d+\)"):
        _lnc2(kernel, np.zeros((2, 8), F32))


@pytest.mark.parametrize("second_pipe", [0, 1])
def test_sendrecv_of_a_received_tile_sends_the_received_values(second_pipe):
    """A sendrecv whose src is the dst of an earlier sendrecv sends what was received: two swaps
    give each core its own tile back."""
    def kernel(x):
        me = nl.program_id(0)
        a = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.sbuf)
        c = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[me])
        nisa.sendrecv(src=a, dst=b, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        nisa.sendrecv(src=b, dst=c, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=second_pipe)
        out = nl.ndarray((2, 2, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[me], src=c)
        return out
    x = np.arange(32, dtype=F32).reshape(2, 2, 8)
    np.testing.assert_array_equal(_lnc2(kernel, x), x)
