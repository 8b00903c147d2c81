"""Each fast path fires where it should (counted in ``trace.record().fast_paths``), none fires
with ``fast_paths=False``, and the results are bit-identical either way (NumPy references)."""
import gc

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import trace


def copy_add(a, b):
    """Whole-tile dma_copy loads (deferred copies), an fp32 add straight into dst, a fill."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    for _ in range(3):                                       # the same signature three times
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    z = nl.zeros(a.shape, dtype=a.dtype, buffer=nl.sbuf)     # an on-chip fill
    nisa.tensor_tensor(dst=ta, data1=ta, data2=z, op=nl.add)
    nisa.dma_copy(dst=out, src=ta)
    return out


def matmul(lhsT, rhs):
    """One nc_matmul overwriting a fresh fp32 PSUM tile."""
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def _run(kernel, *args, fast):
    with trace.record() as ev:
        out = nki.simulate(kernel, fast_paths=fast)(*args)
    return out, ev.fast_paths


def test_copy_add_fast_paths_fire_and_agree():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64), dtype=np.float32)
    b = rng.standard_normal((128, 64), dtype=np.float32)
    want = a + b + b + b + np.float32(0)
    out_f, fast = _run(copy_add, a, b, fast=True)
    out_s, slow = _run(copy_add, a, b, fast=False)
    np.testing.assert_array_equal(out_f, want)
    np.testing.assert_array_equal(out_s, out_f)
    assert fast["deferred_copy"] >= 2          # both whole-tile loads
    assert fast["deferred_fill"] == 1          # nl.zeros on chip
    assert fast["out_f32"] == 4                # every fp32 add computed straight into dst
    assert fast["rule_memo"] >= 2              # the 2nd and 3rd identical adds skip the rules
    assert not +slow                           # nothing fires with fast_paths=False


def test_storage_pool_reuses_tiles_across_launches():
    a = np.ones((128, 64), np.float32)
    _run(copy_add, a, a, fast=True)            # fills the pool when its tiles die
    _, fast = _run(copy_add, a, a, fast=True)
    assert fast["storage_pool"] >= 1
    assert _run(copy_add, a, a, fast=False)[1]["storage_pool"] == 0


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_matmul_into_fresh_psum_tile(dtype):
    rng = np.random.default_rng(3)
    lhsT = rng.standard_normal((128, 64), dtype=np.float32).astype(dtype)
    rhs = rng.standard_normal((128, 256), dtype=np.float32).astype(dtype)
    want = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    out_f, fast = _run(matmul, lhsT, rhs, fast=True)
    out_s, slow = _run(matmul, lhsT, rhs, fast=False)
    np.testing.assert_allclose(out_f, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out_s, out_f)
    assert fast["matmul_out"] == 1
    assert not +slow


def psum_parts(lhsT, rhs):
    """nc_matmuls into parts of one PSUM tile (16, 64) in auto-accumulate mode: the same part
    again (accumulates), an overlapping part (mixed), a part cleared by a non-matmul write."""
    out = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=0.0)
    for _ in range(3):
        nisa.nc_matmul(dst=acc[0:16, 0:24], stationary=a, moving=b)      # 1st overwrites
    nisa.nc_matmul(dst=acc[0:16, 8:32], stationary=a, moving=b)          # 8..23 add, 24..31 not
    nisa.memset(dst=acc[0:16, 0:8], value=1.0)                           # clears 0..7
    nisa.nc_matmul(dst=acc[0:16, 0:24], stationary=a, moving=b)
    nisa.nc_matmul(dst=acc[0:16, 8:32], stationary=a, moving=b)
    res = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_matmul_flags_of_psum_parts():
    rng = np.random.default_rng(5)
    lhsT = rng.integers(-2, 3, (32, 16)).astype(np.float32)    # small integers: exact sums
    rhs = rng.integers(-2, 3, (32, 24)).astype(np.float32)
    p = lhsT.T @ rhs
    want = np.zeros((16, 64), np.float32)
    want[:, 0:24] = 3 * p                      # overwrite, then two accumulations
    want[:, 8:24] += p[:, 0:16]                # flagged by the matmuls before
    want[:, 24:32] = p[:, 16:24]               # never written by a matmul: overwritten
    want[:, 0:8] = p[:, 0:8]                   # memset cleared the flags: overwritten
    want[:, 8:24] += p[:, 8:24]
    want[:, 8:32] += p
    out_f, fast = _run(psum_parts, lhsT, rhs, fast=True)
    out_s, slow = _run(psum_parts, lhsT, rhs, fast=False)
    np.testing.assert_array_equal(out_f, want)
    np.testing.assert_array_equal(out_s, want)
    assert fast["matmul_flags_view"] >= 2      # the 2nd and 3rd matmul into acc[0:16, 0:24]
    assert not +slow


def psum_one_view(lhsT, rhs):
    """Auto-accumulating nc_matmuls into one part of a fresh PSUM tile (the tile's flags differ
    in that part only), then a part overlapping it, then the whole tile read back."""
    out = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=0.0)                                   # every flag False
    for _ in range(3):
        nisa.nc_matmul(dst=acc[0:8, 0:24], stationary=a[:, 0:8], moving=b)     # 1st overwrites
    nisa.nc_matmul(dst=acc[4:12, 16:40], stationary=a[:, 4:12], moving=b)      # rows 4..7, cols 16..23 add
    nisa.nc_matmul(dst=acc[0:8, 0:24], stationary=a[:, 0:8], moving=b)         # all flagged: adds
    res = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_matmul_flags_of_one_psum_part():
    rng = np.random.default_rng(6)
    lhsT = rng.integers(-2, 3, (32, 16)).astype(np.float32)    # small integers: exact sums
    rhs = rng.integers(-2, 3, (32, 24)).astype(np.float32)
    p = lhsT.T @ rhs                            # (16, 24)
    want = np.zeros((16, 64), np.float32)
    want[0:8, 0:24] = 3 * p[0:8]
    second = p[4:12]                            # the overlapping part, rows 4..11 cols 16..39
    want[4:8, 16:24] += second[0:4, 0:8]        # flagged by the matmuls before: accumulates
    want[8:12, 16:40] = second[4:8]             # memset's zeros overwritten
    want[4:8, 24:40] = second[0:4, 8:24]
    want[0:8, 0:24] += p[0:8]                   # every flag of this part set by now
    out_f, fast = _run(psum_one_view, lhsT, rhs, fast=True)
    out_s, slow = _run(psum_one_view, lhsT, rhs, fast=False)
    np.testing.assert_array_equal(out_f, want)
    np.testing.assert_array_equal(out_s, want)
    assert fast["matmul_flags_view"] >= 2      # the 2nd and 3rd matmul into acc[0:8, 0:24]
    assert not +slow


def test_gc_pause_is_a_fast_path():
    seen = []

    def probe(x):
        seen.append(gc.isenabled())
        return x

    assert gc.isenabled()
    nki.simulate(probe, fast_paths=True)(np.ones(4, np.float32))
    nki.simulate(probe, fast_paths=False)(np.ones(4, np.float32))
    assert seen == [False, True] and gc.isenabled()
