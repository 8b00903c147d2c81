"""Beta-1 ``neuronxcc.nki.language``: tile functions with Beta-1 signatures and defaults
(comparisons -> bool, partition broadcasting, PSUM and scalar stores, static_cast, loop_reduce),
and clear errors for what does not run. References are NumPy formulas."""
import inspect

import ml_dtypes
import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
from nkisim.errors import UnsupportedError

RNG = np.random.default_rng(11)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def hbm(shape, dtype=np.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def test_math_with_dtype_and_mask_none():
    x = f32(8, 16)

    @nki.jit(mode="simulation")
    def k(x):
        o1, o2 = hbm(x.shape), hbm(x.shape, nl.bfloat16)
        t = nl.load(x, mask=None)
        nl.store(o1, nl.exp(t, mask=None), mask=None)
        nl.store(o2, nl.multiply(t, 3.0, dtype=nl.bfloat16))
        return o1, o2

    r1, r2 = nki.simulate_kernel(k, x)
    np.testing.assert_allclose(r1, np.exp(x), rtol=1e-5)
    np.testing.assert_array_equal(r2, (x * np.float32(3)).astype(ml_dtypes.bfloat16))


def test_comparisons_default_to_bool():
    x, y = f32(4, 8), f32(4, 8)

    @nki.jit(mode="simulation")
    def k(x, y):
        r = nl.greater(nl.load(x), nl.load(y))
        assert r.dtype == nl.bool_
        out = hbm(x.shape, nl.uint8)
        nl.store(out, nl.copy(r, dtype=nl.uint8))
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k, x, y), (x > y).astype(np.uint8))


@pytest.mark.parametrize("ashape, bshape", [((128, 512), (1, 512)), ((128, 512), (1, 1)), ((128, 1), (1, 512))])
def test_binary_ops_broadcast_the_partition_dim(ashape, bshape):
    a, b = f32(*ashape), f32(*bshape)
    shape = np.broadcast_shapes(ashape, bshape)

    @nki.jit(mode="simulation")
    def k(a, b):
        out = hbm(shape)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k, a, b), a + b)


def test_store_of_a_psum_tile_and_of_a_scalar():
    a, b = f32(32, 16), f32(32, 8)

    @nki.jit(mode="simulation")
    def k(a, b):
        o1, o2 = hbm((16, 8)), hbm((4, 4))
        nl.store(o1, nl.matmul(nl.load(a), nl.load(b), transpose_x=True))    # a PSUM tile
        nl.store(o2, 7)
        return o1, o2

    r1, r2 = nki.simulate_kernel(k, a, b)
    np.testing.assert_allclose(r1, a.T @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(r2, np.full((4, 4), 7, np.float32))


def test_static_cast_on_tiles_and_host_arrays():
    x = f32(4, 8)
    assert nl.static_cast(x.astype(np.float64), nl.float32).dtype == np.float32

    @nki.jit(mode="simulation")
    def k(x):
        out = hbm(x.shape, nl.float16)
        nl.store(out, nl.static_cast(nl.load(x), nl.float16))
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k, x), x.astype(np.float16))


@pytest.mark.parametrize("op, ref", [(np.add, np.add.reduce), (np.maximum, np.maximum.reduce)])
def test_loop_reduce_reduces_into_the_assigned_tile(op, ref):
    x = f32(4, 8, 16)
    start = np.float32(-100) if op is np.maximum else np.float32(0)

    @nki.jit(mode="simulation")
    def k(x):
        out = hbm((8, 16))
        b = nl.full((8, 16), start, dtype=nl.float32)
        for i in nl.affine_range(4):
            b = nl.loop_reduce(nl.load(x[i]), op=op, loop_indices=[i])
        nl.store(out, b)
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k, x), ref(x, axis=0))


def test_rand_default_dtype_is_float32():
    @nki.jit(mode="simulation")
    def k():
        out = hbm((4, 8))
        r = nl.rand((4, 8))
        assert r.dtype == nl.float32
        nl.store(out, r)
        return out

    v = nki.simulate_kernel(k)
    assert ((v >= 0) & (v < 1)).all()


def test_operator_tokens_are_usable_as_op():
    x, y = f32(4, 8), f32(4, 8)

    @nki.jit(mode="simulation")
    def k(x, y):
        out = hbm(x.shape)
        nl.store(out, nisa.tensor_tensor(nl.load(x), nl.load(y), op=nl.maximum))
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k, x, y), np.maximum(x, y))


def test_documented_but_missing_names_raise_unsupported():
    with pytest.raises(UnsupportedError, match=r"^nl\.gemm_grid: "):
        nl.gemm_grid
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        nl.no_such_thing


def test_all_reduce_over_programs_raises_unsupported_naming_the_beta2_collective():
    x = f32(4, 8)

    @nki.jit(mode="simulation")
    def k(x):
        out = hbm(x.shape)
        t = nl.all_reduce(nl.load(x), op=np.add, program_axes=0)
        nl.store(out, t)
        return out

    before = x.copy()
    with pytest.raises(UnsupportedError, match=r"^nl\.all_reduce: reducing a tile over the SPMD programs of grid "
                                               r"axes 0 is a Beta 1 \(neuronxcc\.nki\.language\) collective nkisim "
                                               r"does not simulate \(its programs run one after another\); in Beta 2 "
                                               r"use nki\.collectives\.all_reduce\(srcs, dsts, replica_group, op\) "
                                               r"across ranks, run with nkisim\.simulate_ranks "
                                               r"\(test_beta1_language\.py:\d+\)$"):
        nki.simulate_kernel(k[2], x)
    np.testing.assert_array_equal(x, before)
    assert list(inspect.signature(nl.all_reduce).parameters)[:3] == ["x", "op", "program_axes"]


def test_rms_norm_broadcasts_a_one_partition_weight():
    x, w = f32(8, 16), f32(1, 16)

    @nki.jit(mode="simulation")
    def k(x, w):
        out = hbm(x.shape)
        nl.store(out, nl.rms_norm(nl.load(x), nl.load(w), axis=1, n=16))
        return out

    want = x / np.sqrt((x.astype(np.float64) ** 2).sum(1, keepdims=True) / 16 + 1e-6) * w
    np.testing.assert_allclose(nki.simulate_kernel(k, x, w), want, rtol=1e-5, atol=1e-6)
