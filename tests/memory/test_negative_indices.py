"""Negative indices count from the end, as NkiTensor.__getitem__'s page says ("Supports integers
(select), slices, Ellipsis, negative indices"); NumPy is the reference. Out of range still
raises (no wrap-around past the start, no clipping past the end: see test_views)."""
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from conftest import simulate

VIEWS = [lambda x: x[-1], lambda x: x[-4], lambda x: x[:, -2:], lambda x: x[-3:-1, 1:-1],
         lambda x: x[:, -6:6:2], lambda x: x[..., -1], lambda x: x[1:, :-5]]


@pytest.mark.parametrize("view", VIEWS)
def test_negative_indices_on_hbm_match_numpy(view, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)

    def kernel(x):
        v = view(x)
        t = nl.ndarray(v.shape if len(v.shape) > 1 else (1,) + v.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v)
        out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    np.testing.assert_array_equal(simulate(kernel, x), view(x))


@pytest.mark.parametrize("view,want", [(lambda t: t[-1], lambda a: a[-1:]),
                                       (lambda t: t[-2:, -3:], lambda a: a[-2:, -3:]),
                                       (lambda t: t[:, -1], lambda a: a[:, -1:])])
def test_negative_indices_on_chip_keep_the_partition_dim(view, want, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)

    def kernel(x):
        t = nl.ndarray((4, 6), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = view(t)
        out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out
    np.testing.assert_array_equal(simulate(kernel, x), want(x))
