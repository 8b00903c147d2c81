"""Beta-1 features the nki-samples kernels use, each against a NumPy reference: ``nki.jit(mode=
"trace")`` helper kernels, a gather ``t[b, idx_tile, i_f]`` after an int index, masked gathers
(masked-off rows' indices are never read), slices past an HBM dim's end cut by a mask, integer
``/`` (true division), ``nl.finfo``."""
import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from nkisim.errors import ArgumentError, BoundsError, UnsupportedError


# ---- mode="trace" ---------------------------------------------------------------------------------

@nki.jit(mode="trace")
def _double_into(dst, src):
    dst[...] = nl.multiply(src, 2.0)


def test_trace_mode_helper_runs_inside_a_kernel():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        _double_into(d, t)
        nl.store(out, d)
        return out

    a = np.random.default_rng(0).random((128, 64), dtype=np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a * 2)


def test_trace_mode_kernel_called_from_python_simulates():
    @nki.jit(mode="trace")
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), 1.0))
        return out

    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(k(a), a + 1)


def test_unknown_mode_still_raises():
    with pytest.raises(ArgumentError, match="mode 'nope'"):
        nki.jit(mode="nope")(lambda a: a)


# ---- gathers after an int index, masked ----------------------------------------------------------

def _gather_kernel(rows_valid):
    @nki.jit
    def k(data, idx):
        B, R, C = data.shape
        out = nl.ndarray((B, 128, C), dtype=data.dtype, buffer=nl.shared_hbm)
        for b in nl.affine_range(B):
            i_p = nl.arange(128)[:, None]
            i_f = nl.arange(C)[None, :]
            it = nl.load(idx[i_p, nl.arange(1)[None, :]])
            m = (i_p < rows_valid)
            g = nl.load(data[b, it, i_f], mask=m)
            nl.store(out[b, i_p, i_f], value=g, mask=m)
        return out
    return k


def test_gather_after_int_index_matches_numpy():
    rng = np.random.default_rng(1)
    data = rng.random((3, 40, 16), dtype=np.float32)
    idx = rng.integers(0, 40, size=(128, 1)).astype(np.int32)
    got = nki.simulate_kernel(_gather_kernel(128), data, idx)
    want = data[:, idx[:, 0], :]
    np.testing.assert_array_equal(got, want)


def test_masked_gather_never_reads_masked_off_indices():
    rng = np.random.default_rng(2)
    data = rng.random((2, 40, 16), dtype=np.float32)
    idx = rng.integers(0, 40, size=(128, 1)).astype(np.int32)
    idx[70:] = 10_000                     # out of bounds, but masked off
    data0, idx0 = data.copy(), idx.copy()
    got = nki.simulate_kernel(_gather_kernel(70), data, idx)
    np.testing.assert_array_equal(got[:, :70], data[:, idx[:70, 0], :])
    np.testing.assert_array_equal(data, data0)
    np.testing.assert_array_equal(idx, idx0)


def test_unmasked_gather_of_out_of_bounds_index_raises():
    data = np.zeros((2, 40, 16), np.float32)
    idx = np.zeros((128, 1), np.int32)
    idx[100] = 40
    # the Beta-1 face raises the documented IndexError (runtime.beta1); the rule is its cause
    with pytest.raises(IndexError, match="out of bounds for axis 0") as info:
        nki.simulate_kernel(_gather_kernel(128), data, idx)
    assert type(info.value) is IndexError
    assert isinstance(info.value.__cause__, BoundsError)
    assert "vector_offset index 40 at partition 100" in str(info.value.__cause__)


# ---- slices past the end of an HBM dim, cut by a mask ---------------------------------------------

def _tiled_copy(masked):
    @nki.jit
    def k(a):
        P, F = a.shape
        out = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.shared_hbm)
        for t in nl.affine_range((P + 127) // 128):
            i_p = nl.arange(128)[:, None] + t * 128
            m = (i_p < P) if masked else None
            x = nl.load(a[t * 128:(t + 1) * 128, :], mask=m)
            nl.store(out[t * 128:(t + 1) * 128, :], value=nl.multiply(x, 3.0, mask=m), mask=m)
        return out
    return k


def test_masked_slice_past_the_end_keeps_only_valid_rows():
    a = np.random.default_rng(3).random((288, 24), dtype=np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(_tiled_copy(True), a), a * np.float32(3.0))


def test_unmasked_slice_past_the_end_raises():
    a = np.zeros((288, 24), np.float32)
    with pytest.raises(BoundsError, match="outside 0:288"):
        nki.simulate_kernel(_tiled_copy(False), a)


# ---- integer division ----------------------------------------------------------------------------

def test_integer_tile_divided_by_int_is_true_division():
    @nki.jit
    def k(n):
        q = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        f = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        pos = nisa.iota(nl.arange(128)[:, None] + 2176, dtype=nl.int32)
        r = pos / 38
        assert r.dtype == nl.float32
        nl.store(q, r)
        nl.store(f, nl.floor(r, dtype=nl.int32))
        return q, f

    q, f = nki.simulate_kernel(k, np.zeros(1, np.float32))
    pos = np.arange(2176, 2176 + 128)
    np.testing.assert_allclose(q[:, 0], pos / 38, rtol=1e-6)
    np.testing.assert_array_equal(f[:, 0], pos // 38)


def test_float_division_keeps_its_dtype():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=nl.float16, buffer=nl.shared_hbm)
        r = nl.load(a) / 4
        assert r.dtype == nl.float16
        nl.store(out, r)
        return out

    a = np.arange(128 * 2, dtype=np.float16).reshape(128, 2)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a / np.float16(4))


# ---- nl.finfo ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt,bits,biggest", [
    (nl.float32, 32, (2 - 2 ** -23) * 2.0 ** 127),
    (nl.float16, 16, 65504.0),
    (nl.bfloat16, 16, (2 - 2 ** -7) * 2.0 ** 127),
])
def test_finfo_gives_the_dtype_limits(dt, bits, biggest):
    f = nl.finfo(dt)
    assert float(f.max) == biggest and float(f.min) == -biggest and f.bits == bits


def test_finfo_rejects_int_and_tfloat32():
    with pytest.raises(ArgumentError, match="nl.finfo"):
        nl.finfo(nl.int32)
    with pytest.raises(UnsupportedError, match="tfloat32"):
        nl.finfo(nl.tfloat32)


# ---- lazy_initialization= ------------------------------------------------------------------------

@pytest.mark.parametrize("lazy", [True, False])
def test_lazy_initialization_fills_as_usual(lazy):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        f = nl.full(a.shape, fill_value=-3.0, dtype=nl.float32, buffer=nl.sbuf, lazy_initialization=lazy)
        z = nl.zeros(a.shape, dtype=nl.float32, buffer=nl.sbuf, lazy_initialization=lazy)
        nl.store(out, nl.add(nl.add(f, z), nl.load(a)))
        return out

    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a - 3)


# ---- affine_select of a PSUM tile ---------------------------------------------------------------

def test_affine_select_of_a_psum_matmul_result_is_a_causal_mask():
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nisa.nc_matmul(nl.load(a), nl.load(b))          # (128, 128) fp32 in PSUM
        i_p, i_f = nl.mgrid[0:128, 0:128]
        r = nisa.affine_select(pred=(i_p - i_f >= 0), on_true_tile=ps, on_false_value=-9984.0,
                               dtype=nl.float32)
        nl.store(out, r)
        return out

    rng = np.random.default_rng(4)
    a = rng.random((64, 128), dtype=np.float32)
    b = rng.random((64, 128), dtype=np.float32)
    want = np.where(np.tril(np.ones((128, 128), bool)), a.T.astype(np.float64) @ b, -9984.0)
    np.testing.assert_allclose(nki.simulate_kernel(k, a, b), want, rtol=1e-5)


# ---- t[...] = <a call under mask=> writes only what the mask keeps ----------------------------------

@pytest.mark.parametrize("mask_kind", ["false", "rows"])
def test_assigning_a_masked_result_keeps_the_masked_off_elements(mask_kind):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.load(a)
        i_p = nl.arange(128)[:, None]
        m = False if mask_kind == "false" else (i_p < 40)
        buf[...] = nl.multiply(buf, 10.0, mask=m)
        nl.store(out, buf)
        return out

    a = np.random.default_rng(5).random((128, 16), dtype=np.float32)
    want = a.copy()
    if mask_kind == "rows":
        want[:40] *= np.float32(10.0)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), want)


# ---- index-expression views with more free dims than one instruction's access pattern --------------

def test_beta1_view_with_six_free_dims_runs():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 2, 2, 2, 3, 3, 3), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)                                   # (128, 8, 8, 8)
        i_p = nl.arange(128)[:, None, None, None, None, None, None]
        x = nl.arange(2)
        y = nl.arange(3)
        i_d = x[None, :, None, None, None, None, None] + y[None, None, None, None, :, None, None]
        i_h = x[None, None, :, None, None, None, None] + y[None, None, None, None, None, :, None]
        i_w = x[None, None, None, :, None, None, None] + y[None, None, None, None, None, None, :]
        r = nl.multiply(t[i_p, i_d * 2, i_h * 2, i_w * 2], 0.5)
        nl.store(out, r)
        return out

    a = np.random.default_rng(6).random((128, 8, 8, 8), dtype=np.float32)
    x = np.arange(2)
    y = np.arange(3)
    d = 2 * (x[:, None, None, None, None, None] + y[None, None, None, :, None, None])
    h = 2 * (x[None, :, None, None, None, None] + y[None, None, None, None, :, None])
    w = 2 * (x[None, None, :, None, None, None] + y[None, None, None, None, None, :])
    want = a[:, d, h, w] * np.float32(0.5)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), want)


# ---- nl.loop_reduce into a subscript, a (P,) result into a (P, 1) column ----------------------------

def test_loop_reduce_into_a_subscript_of_a_block_tensor_accumulates():
    @nki.jit
    def k(a):
        T = a.shape[0] // 128
        out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((2, nl.par_dim(128), 64), dtype=nl.float32)
        col = nl.zeros((nl.par_dim(128), 2), dtype=nl.float32)
        for j in nl.affine_range(2):
            for t in nl.sequential_range(T):
                x = nl.load(a[t * 128:(t + 1) * 128, j * 64:(j + 1) * 64])
                acc[j, :, :] = nl.loop_reduce(x, op=np.add, loop_indices=(t,), dtype=nl.float32)
                s = nisa.tensor_reduce(np.add, data=x, axis=(1,), dtype=nl.float32)      # (128,)
                col[:, j] = nl.loop_reduce(s, op=np.add, loop_indices=(t,), dtype=nl.float32)
            nl.store(out[j], value=acc[j, :, :])
        sums = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(sums, value=col)
        return out, sums

    a = np.random.default_rng(7).random((128 * 3, 128), dtype=np.float32)
    out, sums = nki.simulate_kernel(k, a)
    tiles = a.reshape(3, 128, 2, 64).astype(np.float64)
    np.testing.assert_allclose(out, tiles.sum(0).transpose(1, 0, 2), rtol=1e-6)
    np.testing.assert_allclose(sums, tiles.sum((0, 3)), rtol=1e-5)


# ---- nc_matmul of a PSUM operand (an nc_transpose result) ---------------------------------------

def test_nc_matmul_of_a_transposed_psum_tile():
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nisa.nc_transpose(nl.load(a))              # (128, 64) -> (64, 128), a Tensor-engine PSUM tile
        assert t.buffer == nl.psum
        nl.store(out, nisa.nc_matmul(t, nl.load(b)))   # t.T @ b = a @ b
        return out

    rng = np.random.default_rng(8)
    a = rng.random((128, 64), dtype=np.float32)
    b = rng.random((64, 256), dtype=np.float32)
    np.testing.assert_allclose(nki.simulate_kernel(k, a, b), a.astype(np.float64) @ b, rtol=1e-5)
