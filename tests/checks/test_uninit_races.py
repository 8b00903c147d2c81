"""Strict uninitialised reads and race detection (checks/uninit.py, checks/races.py)."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import RaceError, UninitializedReadError


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
    """Every iteration adds into one tile allocated before the loop: a loop-carried dependency."""
    acc = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf, name="acc")
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(3):
        t = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    out = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_loop_carried_dependency_in_affine_range_is_a_race():
    x = np.ones((3, 2, 4), np.float32)
    with pytest.raises(RaceError, match=r"^nisa\.tensor_tensor: data1 reads 8 element\(s\) of sbuf tensor 'acc' "
                                        r"\(2, 4\) float32 in affine_range iteration 1 that iteration 0 wrote "
                                        r"\(test_uninit_races\.py:\d+\); affine_range iterations must be "
                                        r"independent"):
        racy(shared_accumulator)(x)
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
