"""Beta-1 tile semantics the tutorials rely on: tensor methods (astype, broadcast_to,
assert_shape), partition-aligned broadcasting of tiles of different rank (functions and Python
operators), reductions over any free axes, ``psum += nc_matmul`` into a fresh PSUM tile,
``nl.matmul`` of a PSUM operand, the ``ncc`` allocators, loop ``directives``, tensor specs."""
import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
from nkisim.errors import ShapeError

RNG = np.random.default_rng(5)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def hbm(shape, dtype=np.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def test_tensor_methods():
    g, x = f32(1, 16), f32(8, 16)

    @nki.jit(mode="simulation")
    def k(g, x):
        o1, o2 = hbm((8, 16)), hbm((8, 16), nl.float16)
        gb = nl.load(g).broadcast_to((8, 16))
        t = nl.load(x).assert_shape((8, 16))
        nl.store(o1, nl.multiply(t, gb))
        nl.store(o2, t.astype(nl.float16))
        return o1, o2

    r1, r2 = nki.simulate_kernel(k, g, x)
    np.testing.assert_array_equal(r1, x * g)
    np.testing.assert_array_equal(r2, x.astype(np.float16))


def test_assert_shape_mismatch_is_a_shape_error():
    @nki.jit(mode="simulation")
    def k(x):
        nl.load(x).assert_shape((8, 15))

    with pytest.raises(ShapeError, match=r"^NkiTensor\.assert_shape: .* has shape \[8, 16\], expected \[8, 15\]"):
        nki.simulate_kernel(k, f32(8, 16))


def test_reduction_result_broadcasts_along_the_partition_dim():
    x = f32(16, 32)

    @nki.jit(mode="simulation")
    def k(x):
        o1, o2, o3 = hbm(x.shape), hbm(x.shape), hbm(x.shape)
        t = nl.load(x)
        m = nl.mean(t, axis=1)                   # shape (16,)
        nl.store(o1, nl.subtract(t, m))
        nl.store(o2, t - m)                      # the Python operator, in a Beta-1 program
        nl.store(o3, nl.broadcast_to(nl.max(t, axis=1), shape=(16, 32)))
        return o1, o2, o3

    r1, r2, r3 = nki.simulate_kernel(k, x)
    mean = (x.sum(axis=1, dtype=np.float32) / np.float32(32))[:, None]
    np.testing.assert_allclose(r1, x - mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_array_equal(r3, np.broadcast_to(x.max(axis=1, keepdims=True), x.shape))


def test_reduction_over_non_trailing_free_axes():
    x = f32(4, 3, 5, 6)

    @nki.jit(mode="simulation")
    def k(x):
        out = hbm((4, 5))
        nl.store(out, nl.sum(nl.load(x), axis=[1, 3]))
        return out

    np.testing.assert_allclose(nki.simulate_kernel(k, x), x.sum(axis=(1, 3)), rtol=1e-5, atol=1e-5)


def test_plus_equals_into_a_fresh_psum_tile_starts_the_accumulation():
    a, b = f32(4, 32, 16), f32(4, 32, 24)

    @nki.jit(mode="simulation")
    def k(a, b):
        out = hbm((16, 24))
        acc = nl.ndarray((16, 24), dtype=nl.float32, buffer=nl.psum)      # never written
        for i in nl.affine_range(4):
            acc += nisa.nc_matmul(nl.load(a[i]), nl.load(b[i]))
        nl.store(out, acc)
        return out

    want = sum(a[i].T.astype(np.float64) @ b[i] for i in range(4))
    np.testing.assert_allclose(nki.simulate_kernel(k, a, b), want, rtol=1e-4, atol=1e-4)


def test_matmul_of_a_psum_operand_and_compiler_allocators():
    x, y = f32(32, 16), f32(16, 8)

    @nki.jit(mode="simulation")
    def k(x, y):
        out = hbm((32, 8))
        xt = nl.ndarray((16, 32), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0))
        assert xt.buffer is nl.psum
        xt[...] = nl.transpose(nl.load(x))
        yt = nl.ndarray((16, 8), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        yt[...] = nl.load(y)
        nl.store(out, nl.matmul(xt, yt, transpose_x=True))
        return out

    np.testing.assert_allclose(nki.simulate_kernel(k, x, y), x @ y, rtol=1e-5, atol=1e-5)


def test_loop_directives_are_accepted():
    x = f32(4, 8)

    @nki.jit(mode="simulation")
    def k(x):
        out = hbm(x.shape)
        for i in nl.sequential_range(4, directives=ncc.no_reorder()):
            nl.store(out[i:i + 1, :], nl.load(x[i:i + 1, :]))
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k, x), x)


def test_tensor_spec_arguments_run_on_zeros():
    spec = nt.tensor[[8, 16], nl.float32]
    assert spec.shape == (8, 16) and spec.dtype == nl.float32

    @nki.jit(mode="simulation")
    def k(x):
        out = hbm(x.shape)
        nl.store(out, nl.add(nl.load(x), 1.0))
        return out

    np.testing.assert_array_equal(k(spec), np.ones((8, 16), np.float32))


def test_shared_identity_matrix_is_an_hbm_constant():
    @nki.jit(mode="simulation")
    def k():
        ident = nl.shared_identity_matrix(n=8, dtype=nl.bfloat16)
        assert ident.buffer is nl.shared_hbm
        out = hbm((8, 8))
        nl.store(out, nl.load(ident, dtype=nl.float32))
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k), np.eye(8, dtype=np.float32))
