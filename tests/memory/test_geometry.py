"""Geometry records (memory.tensor.Geometry): fresh tiles of one layout share their static index
views' shape, strides, offset, signature id and byte strides. Each test checks values against
NumPy on the same index keys, or that a rule reading what differs between layouts still runs."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError
from conftest import simulate


def test_fresh_tiles_of_a_loop_index_like_numpy_with_varying_keys():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 96), dtype=np.float32)
    keys = [(slice(0, 128), slice(0, 96)), (slice(0, 64), slice(32, 96)), (slice(5, 70), slice(7, 8)),
            (slice(0, 128), slice(0, 96, 3)), (slice(1, 2), slice(None))]
    seen = []

    def kernel(x):
        outs = []
        for rep in range(2):                        # the second round reuses the first's records
            for k in keys:
                t = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x)
                v = t[k]
                seen.append((rep, v.shape, v.strides, v.offset, v._geo is not None))
                o = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.shared_hbm)
                nisa.tensor_scalar(dst=v, data=v, op0=nl.multiply, operand0=float(rep + 2))
                nisa.dma_copy(dst=o, src=v)
                outs.append(o)
        return tuple(outs)

    got = simulate(kernel, a)
    ref = np.arange(a.size).reshape(a.shape)
    want = [a[k] * np.float32(rep + 2) for rep in range(2) for k in keys]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    for (rep, shape, strides, offset, has), (_, k) in zip(seen, [(r, k) for r in range(2) for k in keys]):
        view = ref[k]
        assert shape == view.shape and has
        assert strides == tuple(s // ref.itemsize for s in view.strides) and offset == view.flat[0]


def test_same_shape_other_dtype_has_other_records_and_its_rules_still_run():
    seen = {}

    def kernel(x):
        ok = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        bad = nl.ndarray((128, 128), dtype=nl.int32, buffer=nl.sbuf)
        mov = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=ok, value=1.0)
        nisa.memset(dst=bad, value=1)
        nisa.memset(dst=mov, value=1.0)
        ps = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps[0:128, 0:4], stationary=ok[0:128, 0:128], moving=mov[0:128, 0:4])
        seen["geo"] = ok[0:128, 0:128]._geo is not bad[0:128, 0:128]._geo
        nisa.nc_matmul(dst=ps[0:128, 0:4], stationary=bad[0:128, 0:128], moving=mov[0:128, 0:4])
        return x

    with pytest.raises(DtypeError, match="nc_matmul"):
        simulate(kernel, np.zeros((1, 1), np.float32))
    assert seen == {"geo": True}


def test_lnc2_shared_output_views_index_like_numpy():
    a = np.arange(8 * 40, dtype=np.float32).reshape(8, 40)

    def kernel(x):
        out = nl.ndarray((8, 40), dtype=nl.float32, buffer=nl.shared_hbm)
        c = nl.program_id(0)
        for j in range(2):
            t = nl.ndarray((4, 20), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[4 * c:4 * c + 4, 20 * j:20 * j + 20])
            nisa.dma_copy(dst=out[4 * c:4 * c + 4, 20 * j:20 * j + 20], src=t)
        return out

    np.testing.assert_array_equal(simulate(kernel, a, lnc=2), a)


def test_argument_views_across_calls_and_dtypes_index_like_numpy():
    seen = []

    def kernel(x):
        v = x[1:3, 2:7]
        seen.append((x.dtype, v._geo))
        t = nl.ndarray((2, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v)
        out = nl.ndarray((2, 5), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    rng = np.random.default_rng(2)
    for dt in (np.float32, np.float32, np.float16, np.int32):
        a = (rng.standard_normal((4, 8)) * 100).astype(dt)
        np.testing.assert_array_equal(simulate(kernel, a), a[1:3, 2:7])
    geos = [g for _, g in seen]
    assert geos[0] is geos[1] and len({id(g) for g in geos[1:]}) == 3


@pytest.mark.parametrize("fast", [True, False])
def test_fresh_tiles_written_in_part_or_whole_through_records(fast):
    """Each round's fresh tile is written through a static view (its record says whether that view
    covers the tile: memory.access._whole), then read whole: a partial write leaves the NaN
    sentinel in the rest, a view covering the whole tile leaves none; the same in every round
    (the later rounds read the records the first one made)."""
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    keys = [(slice(0, 64), slice(None)), (slice(None), slice(None)), (slice(0, 128), slice(0, 8)),
            (slice(None), slice(0, 7))]

    def kernel(x):
        outs = []
        for _ in range(3):
            for k in keys:
                t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
                v = t[k]
                nisa.dma_copy(dst=v, src=x[k])
                o = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=o, src=t)
                outs.append(o)
        return tuple(outs)

    got = nki.simulate(kernel, fast_paths=fast)(a)
    for i, g in enumerate(got):
        want = np.full((128, 8), np.nan, np.float32)
        k = keys[i % len(keys)]
        want[k] = a[k]
        np.testing.assert_array_equal(g, want)
