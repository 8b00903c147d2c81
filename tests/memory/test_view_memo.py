"""Index views with a static key are built once per tensor (memoised); they stay live views."""
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import BoundsError, ShapeError
from conftest import simulate


def _tiles(a, b):
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    return ta, tb


def test_memoised_view_sees_later_writes():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64), dtype=np.float32)
    b = rng.standard_normal((128, 64), dtype=np.float32)
    seen = {}

    def kernel(a, b):
        ta, tb = _tiles(a, b)
        out = nl.ndarray((64, 32), dtype=a.dtype, buffer=nl.shared_hbm)
        v1 = ta[0:64, 0:32]
        nisa.tensor_tensor(dst=ta[0:64, 0:32], data1=ta[0:64, 0:32], data2=tb[0:64, 0:32], op=nl.add)
        v2 = ta[0:64, 0:32]
        seen["same"] = v1 is v2
        seen["other"] = ta[0:64, 0:16] is v1 or ta[0:64, np.int64(0):32] is v1
        nisa.dma_copy(dst=out, src=v1)
        return out

    got = simulate(kernel, a, b)
    np.testing.assert_array_equal(got, a[0:64, 0:32] + b[0:64, 0:32])
    assert seen == {"same": True, "other": False}


def test_views_are_not_shared_across_launches():
    rng = np.random.default_rng(1)
    views = []

    def kernel(a):
        out = nl.ndarray((32, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        v = a[0:32, 16:32]
        views.append(v)
        nisa.dma_copy(dst=out, src=v)
        return out

    a1 = rng.standard_normal((64, 32), dtype=np.float32)
    a2 = rng.standard_normal((64, 32), dtype=np.float32)
    np.testing.assert_array_equal(simulate(kernel, a1), a1[0:32, 16:32])
    np.testing.assert_array_equal(simulate(kernel, a2), a2[0:32, 16:32])
    assert views[0] is not views[1] and views[0].alloc is not views[1].alloc


@pytest.mark.parametrize("key", [(slice(0, 1.0),), (True,), (slice(0, 200),)])
def test_keys_that_must_raise_still_raise_after_a_hit(key):
    def kernel(a):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        t[0:1]
        t[0:1]
        t[1]
        t[key]
    with pytest.raises(BoundsError):
        simulate(kernel, np.zeros((4, 4), np.float32))


def test_error_on_partial_tile_instruction_names_the_kernel_line():
    def kernel(a, b):
        ta, tb = _tiles(a, b)
        for _ in range(2):
            nisa.tensor_tensor(dst=ta[0:64, 0:32], data1=ta[0:64, 0:32], data2=tb[0:32, 0:32], op=nl.add)
    a = np.zeros((128, 64), np.float32)
    line = kernel.__code__.co_firstlineno + 3
    with pytest.raises(ShapeError, match=rf"^nisa\.tensor_tensor: .*\(test_view_memo\.py:{line}\)$"):
        simulate(kernel, a, a)
