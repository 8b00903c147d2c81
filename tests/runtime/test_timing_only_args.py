"""A timing-only profile (``nkisim.profile(compute=False)``) computes no values its caller can use
(its matmuls write zeros, loop replay skips iterations), so it leaves the caller's arrays exactly as
they were, bit for bit, as a failed launch does (Decision in ``runtime.launch.run``); with
``compute=True`` the kernel's writes reach them. References: NumPy formulas written here."""
import numpy as np
import pytest

import nkisim
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl

F32 = np.float32


def mm_into(a_t, b, out):
    """out[M, N] = a_t.T @ b, K = 128, one PSUM tile per 128 x 512 block."""
    k, m = a_t.shape
    n = b.shape[1]
    for i in nl.affine_range(m // 128):
        lhs = nl.ndarray((k, 128), F32, buffer=nl.sbuf)
        nisa.dma_copy(dst=lhs, src=a_t[:, i * 128:(i + 1) * 128])
        rhs = nl.ndarray((k, n), F32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rhs, src=b)
        ps = nl.ndarray((128, n), F32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=lhs, moving=rhs)
        res = nl.ndarray((128, n), F32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=res)


def scale_into(a, out):
    """out = 2 * a, written in 8 column blocks by a loop long enough to be replayed."""
    for j in nl.affine_range(8):
        t = nl.ndarray((128, 64), F32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * 64:(j + 1) * 64])
        r = nl.ndarray((128, 64), F32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, j * 64:(j + 1) * 64], src=r)


def _inputs():
    rng = np.random.default_rng(7)
    return rng.standard_normal((128, 256), dtype=F32), rng.standard_normal((128, 512), dtype=F32)


@pytest.mark.parametrize("replay", [True, False])
def test_timing_only_matmul_leaves_the_output_argument_as_it_was(replay):
    a_t, b = _inputs()
    out = np.full((256, 512), -1.0, F32)
    want = out.copy()
    p = nkisim.profile(mm_into, compute=False, loop_replay=replay)(a_t, b, out)
    assert out.tobytes() == want.tobytes()
    assert p.outputs is None and p.total_us > 0
    a0, b0 = _inputs()
    assert a_t.tobytes() == a0.tobytes() and b.tobytes() == b0.tobytes()


def test_computed_profile_writes_the_output_argument():
    a_t, b = _inputs()
    out = np.full((256, 512), -1.0, F32)
    nkisim.profile(mm_into, compute=True)(a_t, b, out)
    np.testing.assert_allclose(out, a_t.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("replay", [True, False])
def test_timing_only_loop_leaves_every_block_as_it_was_and_times_alike(replay):
    a = np.arange(128 * 512, dtype=F32).reshape(128, 512)
    out = np.full((128, 512), -1.0, F32)
    p = nkisim.profile(scale_into, compute=False, loop_replay=replay)(a, out)
    assert (out == -1.0).all()
    computed = nkisim.profile(scale_into, compute=True)(a, out)
    np.testing.assert_array_equal(out, 2 * a)
    assert p.total_us == computed.total_us
    assert [(r.op, r.start_us, r.end_us) for r in p.records] == \
        [(r.op, r.start_us, r.end_us) for r in computed.records]
