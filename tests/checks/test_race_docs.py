"""Race detection against what the docs say loops mean (checks/races.py, runtime/loops.py).

The current docs make ``affine_range`` a deprecated alias of ``range()`` (nki/api/nki/language/
__init__.py, nki/get-started/about/index.rst): iterations run in order, so loop-carried state and
accumulation (nc_matmul into PSUM, SBUF ``tensor_tensor(dst=acc, data1=acc, ...)``, ``+=``) are
legal; even the former parallel meaning allowed "associative reductions". What stays an error:
an affine_range iteration overwriting HBM elements another iteration wrote and nothing read (a
lost write: results that never reach the caller), and LNC2 cores touching the same shared_hbm
elements with no barrier between. On-chip tiles may be reused, reset and overwritten freely. The kernels below are
written for these tests (same patterns as the matmul and fused-Mamba tutorials, not their code);
every result is compared with an independent NumPy reference.
"""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import RaceError

LINE = r"test_race_docs\.py:\d+"


def racy(kernel, **kw):
    return nki.simulate(kernel, detect_races=True, **kw)


def both(kernel, *args, lnc=None):
    """The kernel's result with race detection on; it must equal the result with it off, bit for
    bit (detection only watches)."""
    on, off = racy(kernel), nki.simulate(kernel)
    if lnc:
        on, off = on[lnc], off[lnc]
    got = on(*args)
    np.testing.assert_array_equal(got, off(*args))
    return got


def lost(op, n, buf, it=1, other=0, operand="dst"):
    """The RaceError message of a lost write (checks/races.py)."""
    return (rf"^nisa\.{op}: {operand} writes {n} element\(s\) of {buf} tensor .*in affine_range iteration "
            rf"{it} that iteration {other} wrote \({LINE}\) and nothing read since: its values are lost\. "
            rf".*\(loop at {LINE}\) \({LINE}\)$")


def load(src):
    t = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ---- legal: accumulation across affine_range iterations ------------------------------------

@pytest.mark.parametrize("op, ref", [(nl.add, np.add), (nl.maximum, np.maximum), (nl.multiply, np.multiply)])
@pytest.mark.parametrize("acc_first", [True, False])
def test_sbuf_accumulator_declared_outside_the_loop(op, ref, acc_first):
    """acc = acc op x_i over affine_range i (the fused-Mamba tutorial's step 6 pattern)."""
    def kernel(x):
        acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=acc, src=x[0])
        for i in nl.affine_range(1, x.shape[0]):
            t = load(x[i])
            a, b = (acc, t) if acc_first else (t, acc)
            nisa.tensor_tensor(dst=acc, data1=a, data2=b, op=op)
        return store(acc)
    x = np.random.default_rng(1).uniform(0.5, 1.5, (5, 128, 64)).astype(np.float32)
    want = x[0].copy()
    for i in range(1, 5):
        want = ref(want, x[i]) if acc_first else ref(x[i], want)
    np.testing.assert_array_equal(both(kernel, x), want)


def test_iadd_and_reassigned_sum_into_sbuf_accumulators():
    """``acc += t`` and ``acc2[...] = nl.add(acc2, t)`` across affine_range iterations."""
    def kernel(x):
        acc = nl.zeros((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        acc2 = nl.zeros((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(x.shape[0]):
            t = nl.load(x[i])
            acc += t
            acc2[...] = nl.add(acc2, t)
        out = nl.ndarray((2, 128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0], acc)
        nl.store(out[1], acc2)
        return out
    x = np.random.default_rng(2).standard_normal((4, 128, 32)).astype(np.float32)
    want = np.zeros((128, 32), np.float32)
    for i in range(4):
        want = want + x[i]           # the same fp32 additions, in the same order
    got = both(kernel, x)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], want)


@pytest.mark.parametrize("shared_psum", [False, True])
def test_tiled_matmul_accumulating_in_psum_over_affine_k(shared_psum):
    """Output tiles over affine m, n; nc_matmul accumulates over affine k. With ``shared_psum``
    one PSUM tile declared before every loop is reused by each (m, n): overwritten with
    accumulate=False at k = 0 after the previous tile was read out (legal)."""
    def kernel(a, b):
        K, M = a.shape
        N = b.shape[1]
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        ps0 = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
        for m in nl.affine_range(M // 128):
            for n in nl.affine_range(N // 256):
                ps = ps0 if shared_psum else nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // 128):
                    st = load(a[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                    mv = load(b[k * 128:(k + 1) * 128, n * 256:(n + 1) * 256])
                    nisa.nc_matmul(dst=ps, stationary=st, moving=mv,
                                   accumulate=(k > 0) if shared_psum else None)
                sb = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=sb, src=ps)
                nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * 256:(n + 1) * 256], src=sb)
        return out
    rng = np.random.default_rng(3)
    a = rng.standard_normal((384, 256)).astype(np.float32)
    b = rng.standard_normal((384, 512)).astype(np.float32)
    np.testing.assert_allclose(both(kernel, a, b), a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)


def test_psum_iadd_of_matmuls_then_sbuf_accumulation_of_blocks():
    """Two levels: ``ps += nl.matmul(...)`` over affine k, then the PSUM block added into an SBUF
    accumulator over affine j (K split in blocks, like the tutorial's fully optimized matmul)."""
    def kernel(a, b):
        acc = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            ps = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(2):
                r = (2 * j + k) * 128
                ps += nl.matmul(nl.load(a[r:r + 128, :]), nl.load(b[r:r + 128, :]), transpose_x=True)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=ps, op=nl.add)
        return store(acc)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((512, 64)).astype(np.float32)
    b = rng.standard_normal((512, 128)).astype(np.float32)
    np.testing.assert_allclose(both(kernel, a, b), a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)


# ---- legal: loop-carried state ------------------------------------------------------------

def linear_scan(a, b):
    """h[:, t] = a[:, t] * h[:, t-1] + b[:, t], h[:, -1] = 0 (NumPy, float64)."""
    h = np.zeros(a.shape[0])
    out = np.empty(a.shape)
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


def test_scan_state_carried_across_affine_chunks():
    """A long recurrence cut in chunks over affine_range: each chunk starts from the state the
    previous chunk left in a (P, 1) tile declared outside the loop."""
    def kernel(a, b):
        P, L = a.shape
        out = nl.ndarray((P, L), dtype=nl.float32, buffer=nl.shared_hbm)
        state = nl.zeros((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(L // 128):
            ta, tb = load(a[:, c * 128:(c + 1) * 128]), load(b[:, c * 128:(c + 1) * 128])
            res = nl.ndarray((P, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=res, data0=ta, data1=tb, initial=state, op0=nl.multiply, op1=nl.add)
            nisa.tensor_copy(dst=state, src=res[:, 127:128])
            nisa.dma_copy(dst=out[:, c * 128:(c + 1) * 128], src=res)
        return out
    rng = np.random.default_rng(5)
    a = rng.uniform(0.8, 1.0, (64, 512)).astype(np.float32)
    b = rng.standard_normal((64, 512)).astype(np.float32)
    np.testing.assert_allclose(both(kernel, a, b), linear_scan(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)


def selective_scan(delta, u, A, B, C):
    """The Mamba SSM scan (NumPy, float64): h_t = exp(delta_t A) h_{t-1} + delta_t u_t B_t,
    y_t = sum over states of C_t h_t."""
    bs, ch, L = delta.shape
    y = np.zeros((bs, ch, L))
    for b in range(bs):
        for n in range(A.shape[1]):
            dA = np.exp(delta[b] * A[:, n:n + 1])
            dBu = delta[b] * u[b] * B[b, n][None, :]
            y[b] += C[b, n][None, :] * linear_scan(dA, dBu)
    return y


def mamba_kernel(delta, u, A, B, C):
    """Mamba written for this test: states over affine_range accumulate into an SBUF tile; the
    sequence in chunks over affine_range carries the scan state (legal: affine_range is range)."""
    bs, ch, L = delta.shape
    n_states = A.shape[1]
    out = nl.ndarray((bs, ch, L), dtype=nl.float32, buffer=nl.shared_hbm)
    F = 256
    for b in nl.affine_range(bs):
        for ct in nl.affine_range(ch // 128):
            rows = slice(ct * 128, (ct + 1) * 128)
            d, uu = load(delta[b, rows, :]), load(u[b, rows, :])
            du = nl.ndarray((128, L), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=du, data1=d, data2=uu, op=nl.multiply)
            y = nl.ndarray((128, L), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=y, value=0.0)
            h = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            for n in nl.affine_range(n_states):
                a_n = load(A[rows, n:n + 1])
                nisa.memset(dst=h, value=0.0)
                for c in nl.affine_range(L // F):
                    cols = slice(c * F, (c + 1) * F)
                    dA = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.activation(dst=dA, op=nl.exp, data=d[:, cols], scale=a_n)
                    b_n, c_n = load(B[b, n:n + 1, cols]), load(C[b, n:n + 1, cols])
                    dBu = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_tensor(dst=dBu, data1=du[:, cols], data2=nl.broadcast_to(b_n, (128, F)),
                                       op=nl.multiply)
                    hs = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_tensor_scan(dst=hs, data0=dA, data1=dBu, initial=h, op0=nl.multiply,
                                            op1=nl.add)
                    nisa.tensor_copy(dst=h, src=hs[:, F - 1:F])
                    nisa.tensor_tensor(dst=hs, data1=hs, data2=nl.broadcast_to(c_n, (128, F)), op=nl.multiply)
                    nisa.tensor_tensor(dst=y[:, cols], data1=y[:, cols], data2=hs, op=nl.add)
            nisa.dma_copy(dst=out[b, rows, :], src=y)
    return out


def test_own_mamba_kernel_matches_the_numpy_scan():
    rng = np.random.default_rng(6)
    bs, ch, L, N = 2, 256, 512, 3
    delta = rng.uniform(0.01, 0.2, (bs, ch, L)).astype(np.float32)
    u = rng.standard_normal((bs, ch, L)).astype(np.float32)
    A = -rng.uniform(0.5, 2.0, (ch, N)).astype(np.float32)
    B = rng.standard_normal((bs, N, L)).astype(np.float32)
    C = rng.standard_normal((bs, N, L)).astype(np.float32)
    want = selective_scan(*(x.astype(np.float64) for x in (delta, u, A, B, C)))
    got = both(mamba_kernel, delta, u, A, B, C)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def online_softmax_attention(q, k, v):
    """softmax(q.T @ k) @ v.T for one tile of 128 queries, the kv sequence in affine_range tiles
    of 128 with a running max m, running sum l and accumulator acc carried across iterations
    (the flash-attention pattern, written for this test). q, k: (d, S); v: (S, d)."""
    d, sq = q.shape
    skv = k.shape[1]
    qt = load(q)
    m = nl.ndarray((sq, 1), dtype=nl.float32, buffer=nl.sbuf)
    l = nl.ndarray((sq, 1), dtype=nl.float32, buffer=nl.sbuf)
    acc = nl.ndarray((sq, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=m, value=-1e30)
    nisa.memset(dst=l, value=0.0)
    nisa.memset(dst=acc, value=0.0)
    for j in nl.affine_range(skv // 128):
        kt, vt = load(k[:, j * 128:(j + 1) * 128]), load(v[j * 128:(j + 1) * 128, :])
        s = nl.ndarray((sq, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=s, stationary=qt, moving=kt)
        m_new = nl.ndarray((sq, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=m_new, op=nl.maximum, data=s, axis=1)
        nisa.tensor_tensor(dst=m_new, data1=m_new, data2=m, op=nl.maximum)
        alpha = nl.ndarray((sq, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=alpha, data1=m, data2=m_new, op=nl.subtract)
        nisa.activation(dst=alpha, op=nl.exp, data=alpha)
        neg = nl.ndarray((sq, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg, data=m_new, op0=nl.multiply, operand0=-1.0)
        p = nl.ndarray((sq, 128), dtype=nl.float32, buffer=nl.sbuf)
        rowsum = nl.ndarray((sq, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=p, op=nl.exp, data=s, reduce_op=nl.add, reduce_res=rowsum, bias=neg)
        nisa.tensor_scalar(dst=l, data=l, op0=nl.multiply, operand0=alpha)
        nisa.tensor_tensor(dst=l, data1=l, data2=rowsum, op=nl.add)
        pt_ps = nl.ndarray((128, sq), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=pt_ps, data=p)
        pt = nl.ndarray((128, sq), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=pt, src=pt_ps)
        pv = nl.ndarray((sq, d), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=pv, stationary=pt, moving=vt)
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=alpha)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=pv, op=nl.add)
        nisa.tensor_copy(dst=m, src=m_new)
    nisa.tensor_scalar(dst=acc, data=acc, op0=nl.divide, operand0=l)
    return store(acc)


def test_online_softmax_attention_carries_its_state_across_affine_tiles():
    rng = np.random.default_rng(16)
    q = rng.uniform(-1, 1, (64, 128)).astype(np.float32)
    k = rng.uniform(-1, 1, (64, 512)).astype(np.float32)
    v = rng.uniform(-1, 1, (512, 64)).astype(np.float32)
    s = q.astype(np.float64).T @ k
    e = np.exp(s - s.max(1, keepdims=True))
    want = (e / e.sum(1, keepdims=True)) @ v
    np.testing.assert_allclose(both(online_softmax_attention, q, k, v), want, rtol=1e-4, atol=1e-5)


def test_scratch_tile_declared_outside_the_loop_is_reused():
    """One SBUF tile written then read by every iteration: no iteration's values are lost."""
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        tmp = nl.ndarray((128, x.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
        res = nl.ndarray((128, x.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(x.shape[0]):
            nisa.dma_copy(dst=tmp, src=x[i])
            nisa.activation(dst=res, op=nl.exp, data=tmp)
            nisa.dma_copy(dst=out[i], src=res)
        return out
    x = np.random.default_rng(7).standard_normal((3, 128, 16)).astype(np.float32)
    np.testing.assert_allclose(both(kernel, x), np.exp(x.astype(np.float64)), rtol=1e-6)


# ---- still races: lost writes --------------------------------------------------------------

def _same_rows_dma(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nisa.dma_copy(dst=out, src=load(x[i]))               # the tile index forgot i
    return out


def _same_rows_store(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        nl.store(out[0:64, :], nl.load(x[i, 0:64, :]))       # rows 0..63 by every iteration
    return out


def _overlapping_column_tiles(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nisa.dma_copy(dst=out[:, 3 * i:3 * i + 5], src=load(x[i, :, 0:5]))   # columns 3, 4 twice
    return out


def _scratch_hbm(x):
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.private_hbm)
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nisa.dma_copy(dst=s[:, i:i + 2], src=load(x[i, :, 0:2]))            # column 1 twice
    nisa.dma_copy(dst=out, src=load(s))
    return out


def _in_place_output(x):
    """Each iteration writes all of the kernel's input-output argument x[2]."""
    for i in nl.affine_range(2):
        nisa.dma_copy(dst=x[2], src=load(x[i]))
    return x


@pytest.mark.parametrize("kernel, n, buf", [
    (_same_rows_dma, 1024, "shared_hbm"),
    (_same_rows_store, 512, "shared_hbm"),
    (_overlapping_column_tiles, 256, "shared_hbm"),
    (_scratch_hbm, 128, "private_hbm"),
    (_in_place_output, 1024, "shared_hbm"),
])
def test_iterations_overwriting_unread_hbm_results_race(kernel, n, buf):
    x = np.random.default_rng(8).standard_normal((3, 128, 8)).astype(np.float32)
    before = x.copy()
    with pytest.raises(RaceError, match=lost("dma_copy", n, buf)):
        racy(kernel)(x)
    np.testing.assert_array_equal(x, before)
    nki.simulate(kernel)(x.copy())   # without race detection it runs (the last write wins)


def test_on_chip_tiles_overwritten_unread_are_not_races():
    """A PSUM tile overwritten by accumulate=False matmuls and an SBUF tile rewritten by every
    iteration, unread in between: no kernel output is lost, so no finding."""
    def kernel(x):
        ps = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(3):
            xi = load(x[i])
            nisa.nc_matmul(dst=ps, stationary=xi, moving=xi, accumulate=False)
            nisa.activation(dst=t[:, 2:6], op=nl.exp, data=xi[:, 0:4])
        sb = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        out = nl.ndarray((8, 12), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:8], src=sb)
        nisa.dma_copy(dst=out[:, 8:12], src=t[0:8, 2:6])
        return out
    x = np.random.default_rng(15).standard_normal((3, 128, 8)).astype(np.float32)
    got = both(kernel, x)
    x2 = x[2].astype(np.float64)
    np.testing.assert_allclose(got[:, 0:8], x2.T @ x2, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[:, 8:12], np.exp(x2[0:8, 0:4]), rtol=1e-6)


@pytest.mark.parametrize("loop", [nl.sequential_range, nl.static_range, nl.range])
def test_ordered_loops_let_the_last_write_win(loop):
    def kernel(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in loop(3):
            nisa.dma_copy(dst=out, src=load(x[i]))
        return out
    x = np.random.default_rng(9).standard_normal((3, 128, 8)).astype(np.float32)
    np.testing.assert_array_equal(racy(kernel)(x), x[2])


def test_a_read_in_between_makes_the_hbm_overwrite_legal():
    """The same overwrite as _same_rows_dma, with each iteration reading the rows back first."""
    def kernel(x):
        s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.private_hbm)
        out = nl.ndarray((2, 128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nisa.dma_copy(dst=s, src=load(x[i]))
            nisa.dma_copy(dst=out[i], src=load(s))
        return out
    x = np.random.default_rng(10).standard_normal((2, 128, 8)).astype(np.float32)
    np.testing.assert_array_equal(both(kernel, x), x)


# ---- LNC2: cores on shared HBM -----------------------------------------------------------

CORE_RACE = (rf"^nisa\.dma_copy: core ([01]) (writes|reads) {{n}} element\(s\) of shared_hbm tensor .* that "
             rf"core (?!\1)[01] {{what}} \({LINE}\) with no core_barrier between \({LINE}\)"
             r"\n\(raised on LNC core \1\)$")


def lnc_kernel(mode):
    """Each core copies its input rows (rows 64c..64c+63, or rows 0..63 for both with ``same``)
    into one shared output; ``barrier`` orders the two writes (core 0, barrier, core 1)."""
    def kernel(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        r = 0 if mode in ("same", "barrier") else 64 * me
        t = load(x[me, r:r + 64, :])
        if mode == "barrier":
            if me == 0:
                nisa.dma_copy(dst=out[r:r + 64, :], src=t)
            nisa.core_barrier(out, (0, 1))
            if me == 1:
                nisa.dma_copy(dst=out[r:r + 64, :], src=t)
            nisa.core_barrier(out, (0, 1))
        else:
            nisa.dma_copy(dst=out[r:r + 64, :], src=t)
        if mode == "peek":               # read the other core's rows without a barrier
            nisa.dma_copy(dst=t, src=out[64 * (1 - me):64 * (1 - me) + 64, :])
        return out
    return kernel


def test_lnc2_cores_on_disjoint_rows_pass():
    x = np.random.default_rng(11).standard_normal((2, 128, 8)).astype(np.float32)
    got = both(lnc_kernel("disjoint"), x, lnc=2)
    np.testing.assert_array_equal(got[:64], x[0, :64])
    np.testing.assert_array_equal(got[64:], x[1, 64:])


def test_lnc2_cores_writing_the_same_rows_race():
    x = np.random.default_rng(12).standard_normal((2, 128, 8)).astype(np.float32)
    with pytest.raises(RaceError, match=CORE_RACE.format(n=512, what="wrote")):
        racy(lnc_kernel("same"))[2](x)


def test_lnc2_reading_the_other_cores_rows_without_a_barrier_races():
    x = np.random.default_rng(13).standard_normal((2, 128, 8)).astype(np.float32)
    with pytest.raises(RaceError, match=CORE_RACE.format(n=512, what="(?:wrote|read)")):
        racy(lnc_kernel("peek"))[2](x)


def test_lnc2_same_rows_ordered_by_a_barrier_pass():
    x = np.random.default_rng(14).standard_normal((2, 128, 8)).astype(np.float32)
    got = racy(lnc_kernel("barrier"))[2](x)
    np.testing.assert_array_equal(got[:64], x[1, :64])     # core 1 wrote after the barrier
