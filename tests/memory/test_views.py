"""Indexing and view methods against NumPy's own indexing of the same data."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import BoundsError, ShapeError
from conftest import simulate


def _roundtrip_hbm(a, view_fn):
    """Copy view_fn(a_hbm) into a fresh HBM output of the view's shape and return it."""
    def kernel(x):
        v = view_fn(x)
        out = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out
    return simulate(kernel, a)


@pytest.mark.parametrize("view_fn, np_fn", [
    (lambda x: x[1], lambda a: a[1]),
    (lambda x: x[:, 2], lambda a: a[:, 2]),
    (lambda x: x[1:3, ::2, 1:], lambda a: a[1:3, ::2, 1:]),
    (lambda x: x[nl.ds(1, 2)], lambda a: a[1:3]),
    (lambda x: x[..., 3], lambda a: a[..., 3]),
    (lambda x: x.permute((2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    (lambda x: x.reshape((4, 24)), lambda a: a.reshape(4, 24)),
    (lambda x: x.slice(1, 1, 5, 2), lambda a: a[:, 1:5:2]),
    (lambda x: x.select(2, 3), lambda a: a[:, :, 3]),
    (lambda x: x.flatten_dims(1, 2), lambda a: a.reshape(4, 24)),
    (lambda x: x.reshape_dim(2, (2, 2)), lambda a: a.reshape(4, 6, 2, 2)),
    (lambda x: x[:, 0:1].broadcast(1, 5), lambda a: np.broadcast_to(a[:, 0:1], (4, 5, 4))),
    (lambda x: x.expand_dim(1), lambda a: a[:, None]),
    (lambda x: x.ap([[24, 4], [1, 6]], offset=2), lambda a: a.reshape(4, 24)[:, 2:8]),
])
def test_hbm_views_match_numpy(view_fn, np_fn):
    a = np.arange(96, dtype=np.float32).reshape(4, 6, 4)
    np.testing.assert_array_equal(_roundtrip_hbm(a, view_fn), np_fn(a))


def test_on_chip_int_index_keeps_partition_dim_and_2d():
    shapes = {}

    def kernel(x):
        t = nl.ndarray((64, 64, 64), dtype=nl.float32, buffer=nl.sbuf)
        shapes["a"] = t[0, 0, 10].shape
        shapes["b"] = t[:, 0].shape
        shapes["c"] = t[:, 0, 10].shape
        shapes["d"] = t[0, ..., :].shape
        return x
    simulate(kernel, np.zeros((1, 1), np.float32))
    assert shapes == {"a": (1, 1), "b": (64, 64), "c": (64, 1), "d": (1, 64, 64)}


@pytest.mark.parametrize("view_fn, msg", [
    (lambda x: x[0:5], r"slice 0:5 on dim 0 of tensor 'argument 0' \(4, 6\) is outside 0:4"),
    (lambda x: x[-5], r"index -5 on dim 0"),
    (lambda x: x[4], r"index 4 on dim 0 of tensor 'argument 0' \(4, 6\) is outside 0:4"),
    (lambda x: x[:, 1.5], r"index must be an integer, got float 1.5"),
    (lambda x: x[True], r"index must be an integer, got bool True"),
    (lambda x: x[None], r"index must be an integer, got NoneType None"),
    (lambda x: x[:, -7:], r"slice -7:6 on dim 1"),
    (lambda x: x[:, 2:-5], r"slice 2:1 on dim 1"),
    (lambda x: x[:, :7], r"slice 0:7 on dim 1"),
    (lambda x: x.slice(1, 2, 7), r"needs 0 <= start < end <= 6"),
    (lambda x: x.ap([[6, 5], [1, 6]]), r"reaches element 29, outside its 24 elements"),
])
def test_out_of_bounds_views_raise(view_fn, msg):
    a = np.zeros((4, 6), np.float32)
    with pytest.raises(BoundsError, match=msg + r".*\(test_views\.py:\d+\)"):
        _roundtrip_hbm(a, view_fn)


def test_reshape_that_needs_a_copy_raises():
    a = np.zeros((4, 6), np.float32)
    with pytest.raises(ShapeError, match="cannot be viewed as"):
        _roundtrip_hbm(a, lambda x: x.permute((1, 0)).reshape((24,)))


def test_new_allocations_hold_sentinels():
    def kernel(x):
        f = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        i = nl.ndarray((2, 3), dtype=nl.int32, buffer=nl.shared_hbm)
        return f, i
    f, i = simulate(kernel, np.zeros((1, 1), np.float32))
    assert np.isnan(f).all() and (i == 4).all()


def test_view_dtype_reinterprets_bits():
    a = np.arange(8, dtype=np.int32).reshape(2, 4)
    got = _roundtrip_hbm(a, lambda x: x.view(nl.int16))
    np.testing.assert_array_equal(got, a.view(np.int16))


def test_a_static_ap_view_outside_the_tensor_fails_only_when_an_instruction_uses_it():
    """A kernel may build an out-of-bounds access pattern under a guard that never uses it; the
    instruction that does use one raises BoundsError naming itself and the operand."""
    import nkisim.nki as nki
    import nkisim.nki.isa as nisa
    import nkisim.nki.language as nl
    from nkisim.errors import BoundsError

    def guarded(x, use):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=2.0)
        for j in range(3):
            v = t.ap([[8, 4], [1, 4]], offset=4 * j)          # j = 2 reaches element 35 of 32
            part = v[:, 0:2]                                  # j = 2: elements 8 .. 33, still outside
            if j < 2 or use:
                nisa.memset(dst=part, value=float(j))
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    got = nki.simulate(guarded)(np.zeros((1, 1), np.float32), False)
    want = np.full((4, 8), 2.0, np.float32)
    want[:, 0:2], want[:, 4:6] = 0.0, 1.0
    np.testing.assert_array_equal(got, want)
    with pytest.raises(BoundsError, match=r"^nisa\.memset: dst view of tensor \(4, 4\) reaches element 33, "
                                          r"outside its 32 elements"):
        nki.simulate(guarded)(np.zeros((1, 1), np.float32), True)


def test_a_tensor_is_truthy_whatever_its_values_as_at_specialisation():
    """``if t:`` tests that a tensor was given, never its values (the compiler does not know them)."""
    import nkisim.nki as nki
    import nkisim.nki.isa as nisa
    import nkisim.nki.language as nl

    def kernel(idx):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        out = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
        flags = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=flags[:, 0:1], value=1 if t else 0)          # all zeros: still truthy
        nisa.memset(dst=flags[:, 1:2], value=1 if idx else 0)        # an all-zero HBM argument too
        nisa.dma_copy(dst=out, src=flags)
        return out
    np.testing.assert_array_equal(nki.simulate(kernel)(np.zeros((2, 3), np.int32)), [[1, 1]])
