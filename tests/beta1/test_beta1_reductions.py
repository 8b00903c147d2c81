"""Beta-1 ``nl`` reductions over any free axes (``axis=[2, 4]`` as in the average-pool tutorial,
beyond the docs' "last contiguous dim(s)"; see the Decision in ``language.beta1._any_axes``),
``keepdims``, and Beta-1 ``nl.var``'s shape (axes removed). References: NumPy."""
import re

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from nkisim.errors import ShapeError, UnsupportedError

RNG = np.random.default_rng(31)
A = RNG.standard_normal((4, 3, 2, 5, 2)).astype(np.float32)


def reduce_kernel(fn):
    @nki.jit(mode="simulation")
    def k(a):
        r = fn(nl.load(a))
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out
    return k


CASES = [
    ("sum", lambda t: nl.sum(t, axis=[2, 4]), lambda a: a.sum(axis=(2, 4))),
    ("max", lambda t: nl.max(t, axis=[2, 4]), lambda a: a.max(axis=(2, 4))),
    ("min", lambda t: nl.min(t, [3, 1]), lambda a: a.min(axis=(1, 3))),
    ("prod", lambda t: nl.prod(t, axis=(1, 3)), lambda a: a.prod(axis=(1, 3))),
    ("mean", lambda t: nl.mean(t, axis=2), lambda a: a.mean(axis=2)),
    ("mean-neg", lambda t: nl.mean(t, axis=[-4, -2]), lambda a: a.mean(axis=(1, 3))),
    ("var", lambda t: nl.var(t, axis=[2, 4]), lambda a: a.var(axis=(2, 4))),
    ("var-trailing", lambda t: nl.var(t, axis=4), lambda a: a.var(axis=4)),
    ("max-keepdims", lambda t: nl.max(t, axis=[2, 4], keepdims=True), lambda a: a.max(axis=(2, 4), keepdims=True)),
    ("sum-keepdims-trailing", lambda t: nl.sum(t, axis=[3, 4], keepdims=True),
     lambda a: a.sum(axis=(3, 4), keepdims=True)),
    ("all", lambda t: nl.all(nl.greater(t, -1.0), axis=[1, 3]), lambda a: (a > -1.0).all(axis=(1, 3))),
]


@pytest.mark.parametrize("name, fn, ref", CASES, ids=[c[0] for c in CASES])
def test_reductions_over_any_free_axes_match_numpy(name, fn, ref):
    got = nki.simulate_kernel(reduce_kernel(fn), A)
    want = ref(A.astype(np.float64))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-6, atol=1e-6)


def test_average_pool_by_a_5d_index_view_matches_numpy():
    a = RNG.standard_normal((8, 6, 10)).astype(np.float32)

    @nki.jit(mode="simulation")
    def pool(a, k):
        c, h, w = a.shape
        out = nl.ndarray((c, h // k, w // k), dtype=a.dtype, buffer=nl.shared_hbm)
        i0, i1, i2, i3, i4 = nl.mgrid[0:c, 0:h // k, 0:k, 0:w // k, 0:k]
        t = nl.load(a)
        nl.store(out, nl.sum(t[i0, k * i1 + i2, k * i3 + i4], axis=[2, 4]) / (k * k))
        return out

    want = a.astype(np.float64).reshape(8, 3, 2, 5, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(nki.simulate_kernel(pool, a, 2), want, rtol=1e-6, atol=1e-6)


def test_the_partition_dim_cannot_be_reduced():
    with pytest.raises(ShapeError, match=re.escape("nl.sum: axis [0, 2] includes the partition dim 0, "
                                                   "which cannot be reduced")):
        nki.simulate_kernel(reduce_kernel(lambda t: nl.sum(t, axis=[0, 2])), A)


def test_a_mask_on_a_free_axis_with_non_trailing_axes_is_refused():
    def fn(t):
        j = nl.arange(3)[None, :, None, None, None]
        return nl.sum(t, axis=[2, 4], mask=j < 2)
    with pytest.raises(UnsupportedError, match=re.escape("nl.sum: a mask with reduction axes [2, 4] that are "
                                                         "not the trailing free dims of a 5-D tile")):
        nki.simulate_kernel(reduce_kernel(fn), A)


def test_a_partition_only_mask_on_a_non_trailing_reduction_keeps_the_masked_rows():
    # nki-samples' maxpooling: a (P, k, W, k) window view, max over axes [1, 3], rows masked
    x = RNG.standard_normal((10, 8)).astype(np.float32)

    @nki.jit(mode="simulation")
    def k(a):
        out = nl.ndarray((6, 6), dtype=a.dtype, buffer=nl.shared_hbm)
        i_h, i_kh, i_w = nl.mgrid[0:8, 0:3, 0:8]
        t = nl.load(a[i_h + i_kh, i_w], mask=(i_h < 8))
        i_h, i_kh, i_w, i_kw = nl.mgrid[0:8, 0:3, 0:6, 0:3]
        m = nl.max(t[i_h, i_kh, i_w + i_kw], axis=[1, 3], mask=(i_h < 6))
        i_o, j_o = nl.mgrid[0:8, 0:6]
        nl.store(out[i_o, j_o], value=m, mask=(i_o < 6))
        return out

    want = np.array([[x[i:i + 3, j:j + 3].max() for j in range(6)] for i in range(6)], np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(k, x), want)
