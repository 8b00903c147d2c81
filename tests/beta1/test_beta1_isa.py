"""Beta-1 ``neuronxcc.nki.isa``: value-returning ops (new SBUF tile, PSUM for nc_matmul / a Tensor
Engine nc_transpose), ``dtype=`` defaults, NumPy ufuncs as ``op=``, Beta-1 enum numbering, PSUM
accumulation with ``+=`` versus overwrite with ``[...] =``. References are NumPy formulas."""
import ml_dtypes
import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from nkisim.errors import UnsupportedError

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def run(kernel, *args):
    return nki.simulate_kernel(kernel, *args)


def out_like(shape, dtype=np.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def test_beta1_enum_numbering():
    assert [(m.name, int(m)) for m in nisa.dge_mode] == [("none", 0), ("swdge", 1), ("hwdge", 2), ("unknown", 3)]
    assert {m.name: int(m) for m in nisa.engine} == {"unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3,
                                                    "vector": 5, "sync": 6}
    assert not hasattr(nisa.engine, "dma")
    assert (int(nisa.nc_version.gen2), int(nisa.nc_version.gen3)) == (2, 3)
    assert nisa.vector_engine is nisa.engine.vector
    assert nisa.fp32.min == np.float32(-3.4028235e38)


def test_nc_matmul_returns_fp32_psum_and_plus_equals_accumulates():
    a, b, c = f32(64, 32), f32(64, 48), f32(64, 48)

    @nki.jit(mode="simulation")
    def k(a, b, c):
        out = out_like((32, 48))
        acc = nl.zeros((32, 48), dtype=nl.float32, buffer=nl.psum)
        r = nisa.nc_matmul(nl.load(a), nl.load(b))
        assert r.buffer is nl.psum and r.dtype == nl.float32 and r.shape == (32, 48)
        acc += r
        acc += nisa.nc_matmul(nl.load(a), nl.load(c))
        nl.store(out, acc)
        return out

    want = a.T.astype(np.float64) @ b + a.T.astype(np.float64) @ c
    np.testing.assert_allclose(run(k, a, b, c), want, rtol=1e-4, atol=1e-4)


def test_psum_assignment_overwrites():
    a, b, c = f32(16, 8), f32(16, 8), f32(16, 8)

    @nki.jit(mode="simulation")
    def k(a, b, c):
        out = out_like((8, 8))
        acc = nl.zeros((8, 8), dtype=nl.float32, buffer=nl.psum)
        acc[...] = nisa.nc_matmul(nl.load(a), nl.load(b))
        acc[...] = nisa.nc_matmul(nl.load(a), nl.load(c))
        nl.store(out, acc)
        return out

    np.testing.assert_allclose(run(k, a, b, c), a.T @ c, rtol=1e-5, atol=1e-5)


def test_nc_transpose_engine_and_buffer():
    big, small = f32(64, 96), f32(16, 24)

    @nki.jit(mode="simulation")
    def k(big, small):
        o1, o2 = out_like((96, 64)), out_like((24, 16))
        t1 = nisa.nc_transpose(nl.load(big))                  # > 32 x 32: Tensor engine, PSUM
        t2 = nisa.nc_transpose(nl.load(small))                # <= 32 x 32: Vector engine, SBUF
        assert t1.buffer is nl.psum and t2.buffer is nl.sbuf
        nl.store(o1, t1)
        nl.store(o2, t2)
        return o1, o2

    r1, r2 = run(k, big, small)
    np.testing.assert_array_equal(r1, big.T)
    np.testing.assert_array_equal(r2, small.T)


@pytest.mark.parametrize("op, ref", [(np.add, np.add), (np.maximum, np.maximum), (nl.multiply, np.multiply),
                                     (np.subtract, np.subtract)])
def test_tensor_tensor_takes_numpy_ufuncs(op, ref):
    x, y = f32(8, 16), f32(8, 16)

    @nki.jit(mode="simulation")
    def k(x, y):
        out = out_like(x.shape)
        nl.store(out, nisa.tensor_tensor(nl.load(x), nl.load(y), op))
        return out

    np.testing.assert_array_equal(run(k, x, y), ref(x, y))


def test_tensor_tensor_default_dtype_is_promoted():
    x = f32(4, 8).astype(ml_dtypes.bfloat16)
    y = f32(4, 8)

    @nki.jit(mode="simulation")
    def k(x, y):
        r = nisa.tensor_tensor(nl.load(x), nl.load(y), np.add)
        assert r.dtype == nl.float32
        out = out_like(x.shape, r.dtype)
        nl.store(out, r)
        return out

    np.testing.assert_array_equal(run(k, x, y), x.astype(np.float32) + y)


def test_tensor_scalar_activation_reduce_memset():
    x = f32(8, 32)

    @nki.jit(mode="simulation")
    def k(x):
        o1, o2, o3, o4 = out_like((8, 32)), out_like((8, 32)), out_like((8,)), out_like((8, 4))
        t = nl.load(x)
        nl.store(o1, nisa.tensor_scalar(t, np.multiply, 2.0, op1=np.add, operand1=1.0))
        nl.store(o2, nisa.activation(np.exp, t, scale=0.5))
        r = nisa.tensor_reduce(np.max, t, axis=1)
        assert r.shape == (8,)
        nl.store(o3, r)
        nl.store(o4, nisa.memset((8, 4), 3.0, nl.float32))
        return o1, o2, o3, o4

    r1, r2, r3, r4 = run(k, x)
    np.testing.assert_array_equal(r1, x * np.float32(2) + np.float32(1))
    np.testing.assert_allclose(r2, np.exp(x * 0.5), rtol=1e-5)
    np.testing.assert_array_equal(r3, x.max(axis=1))
    np.testing.assert_array_equal(r4, np.full((8, 4), 3, np.float32))


def test_tensor_reduce_keepdims_and_dtype():
    x = f32(8, 4, 16)

    @nki.jit(mode="simulation")
    def k(x):
        r = nisa.tensor_reduce(np.add, nl.load(x), axis=(1, 2), keepdims=True, dtype=nl.bfloat16)
        assert r.shape == (8, 1, 1) and r.dtype == nl.bfloat16
        out = out_like((8, 1, 1), nl.bfloat16)
        nl.store(out, r)
        return out

    got = run(k, x)
    np.testing.assert_allclose(got.astype(np.float32), x.sum(axis=(1, 2), keepdims=True), rtol=1e-2, atol=1e-2)


def test_reciprocal_and_tensor_copy_cast():
    x = f32(8, 8) + np.float32(3)

    @nki.jit(mode="simulation")
    def k(x):
        o1, o2 = out_like((8, 8)), out_like((8, 8), nl.bfloat16)
        t = nl.load(x)
        nl.store(o1, nisa.reciprocal(t))
        nl.store(o2, nisa.tensor_copy(t, dtype=nl.bfloat16))
        return o1, o2

    r1, r2 = run(k, x)
    np.testing.assert_allclose(r1, 1 / x, rtol=1e-6)
    np.testing.assert_array_equal(r2, x.astype(ml_dtypes.bfloat16))


def test_dma_copy_dst_rmw_add():
    x, y = f32(8, 16), f32(8, 16)

    @nki.jit(mode="simulation")
    def k(x, y):
        out = out_like(x.shape)
        nisa.dma_copy(dst=out, src=y)
        nisa.dma_copy(dst=out, src=x, dst_rmw_op=np.add)
        return out

    np.testing.assert_array_equal(run(k, x, y), y + x)


def test_undocumented_ops_raise_unsupported_naming_beta2():
    x = f32(8, 8)

    @nki.jit(mode="simulation")
    def k(x):
        nisa.builtin_custom_op("f", "lib", 1, 1, [nl.load(x)], [])

    with pytest.raises(UnsupportedError, match=r"^nisa\.builtin_custom_op: is a Beta 1 \(neuronxcc\.nki\.isa\) op "
                                               r"nkisim does not simulate \("):
        run(k, x)


def test_unknown_keyword_is_a_clear_type_error():
    x = f32(8, 8)

    @nki.jit(mode="simulation")
    def k(x):
        nisa.reciprocal(nl.load(x), bogus=1)

    with pytest.raises(TypeError, match=r"nisa\.reciprocal\(\) got an unexpected keyword argument 'bogus'"):
        run(k, x)
