"""Fast paths of partial tiles, against NumPy: a fresh tile written in part reads NaN (floats) / 4
(ints) wherever it was never written, whether the sentinel fill is made at the first partial
write or postponed (kept for reads through the views written); index views of fresh tiles have
the geometry NumPy gives; a row gather writes runs of rows at once with the same result."""
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from conftest import simulate


def _partial_then_whole(a):
    """Rows 0:2 and 5:7, columns 0:8 of a (8, 16) tile written, read back through those views,
    then the whole tile stored."""
    out = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.shared_hbm)
    back = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:2, 0:8], src=a[0:2, 0:8])
    nisa.dma_copy(dst=t[5:7, 0:8], src=a[2:4, 0:8])
    nisa.dma_copy(dst=back[0:2, :], src=t[0:2, 0:8])        # read through a view written
    nisa.dma_copy(dst=back[2:4, :], src=t[5:7, 0:8])
    nisa.dma_copy(dst=out, src=t)                           # the whole tile: the rest is NaN / 4
    return out, back


@pytest.mark.parametrize("dtype, sentinel", [(np.float32, np.nan), (np.int32, 4)])
def test_unwritten_elements_read_the_sentinel_after_partial_writes(dtype, sentinel):
    a = (np.arange(32).reshape(4, 8) + 1).astype(dtype)
    out, back = simulate(_partial_then_whole, a)
    expect = np.full((8, 16), sentinel, dtype)
    expect[0:2, 0:8] = a[0:2]
    expect[5:7, 0:8] = a[2:4]
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(out, expect)


def test_a_sub_view_of_a_written_view_reads_values_and_the_rest_sentinel():
    a = np.arange(1, 33, dtype=np.float32).reshape(4, 8)

    def kernel(a):
        out = nl.ndarray((4, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 16), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:8], src=a)
        part = nl.ndarray((4, 16), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=part[:, 0:4], src=t[:, 2:6])      # inside the written view
        nisa.tensor_copy(dst=part[:, 4:16], src=t[:, 4:16])    # half written, half never
        nisa.dma_copy(dst=out, src=part)
        return out

    got = simulate(kernel, a)
    expect = np.full((4, 16), np.nan, np.float32)
    expect[:, 0:4] = a[:, 2:6]
    expect[:, 4:8] = a[:, 4:8]
    np.testing.assert_array_equal(got, expect)


def _box_inside_written(a, b):
    """Rows 0:5 of an (8, 4, 6) tile written; a box inside them read; a box inside them written
    again; the whole tile stored."""
    out = nl.ndarray((8, 4, 6), dtype=a.dtype, buffer=nl.shared_hbm)
    back = nl.ndarray((3, 2, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, 4, 6), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:5], src=a)
    inner = nl.ndarray((3, 2, 4), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=inner, src=t[1:4, 1:3, 2:6])          # inside the written rows
    nisa.dma_copy(dst=back, src=inner)
    nisa.dma_copy(dst=t[2:3, 0:1, 0:2], src=b)                 # inside again, new values
    nisa.dma_copy(dst=out, src=t)                              # rows 5:8 never written
    return out, back


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("dtype, sentinel", [(np.float32, np.nan), (np.int32, 4)])
def test_a_box_inside_a_written_box_reads_values_and_the_rest_sentinel(fast, dtype, sentinel):
    import nkisim.nki as nki
    a = (np.arange(5 * 4 * 6).reshape(5, 4, 6) + 1).astype(dtype)
    b = np.array([[[-7, -9]]], dtype)
    out, back = nki.simulate(_box_inside_written, fast_paths=fast)(a, b)
    expect = np.full((8, 4, 6), sentinel, dtype)
    expect[0:5] = a
    expect[2:3, 0:1, 0:2] = b
    np.testing.assert_array_equal(back, a[1:4, 1:3, 2:6])
    np.testing.assert_array_equal(out, expect)


def test_accumulating_matmuls_into_part_of_a_fresh_psum_tile():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 256), dtype=np.float32)
    w = rng.standard_normal((256, 128), dtype=np.float32)

    def kernel(x, w):
        out = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.shared_hbm)
        full = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        for k in range(2):
            xT = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.sbuf)
            wk = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=wk, src=w[k * 128:(k + 1) * 128, :])
            for t in range(2):
                nisa.dma_copy(dst=xT[:, t:t + 1], src=x[t:t + 1, k * 128:(k + 1) * 128])
            nisa.nc_matmul(dst=ps[0:128, 0:2], stationary=wk, moving=xT)
        sb = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps[0:128, 0:2])
        nisa.dma_copy(dst=out, src=sb)
        whole = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=whole, src=ps)
        nisa.dma_copy(dst=full, src=whole)
        return out, full

    out, full = simulate(kernel, x, w)
    ref = (w[0:128].T @ x[:, 0:128].T).astype(np.float32) + (w[128:].T @ x[:, 128:].T).astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(full[:, 0:2], out)
    assert np.isnan(full[:, 2:]).all()


def test_index_views_of_fresh_tiles_have_numpy_geometry():
    shapes = []

    def kernel(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        for _ in range(3):                       # fresh tiles: the geometry memo is hit
            t = nl.ndarray((4, 3, 8), dtype=a.dtype, buffer=nl.sbuf)
            v = t[1:3, 2, 0:8:2]
            shapes.append((v.shape, v.strides, v.offset))
        nisa.dma_copy(dst=out, src=a)
        return out

    a = np.zeros((4, 8), np.float32)
    simulate(kernel, a)
    ref = np.zeros((4, 3, 8), np.float32)
    view = ref[1:3, 2:3, 0:8:2].reshape(2, 4)                # on chip an int keeps dim 0 only
    expect = ((2, 4), tuple(s // 4 for s in view.strides),
              (view.__array_interface__["data"][0] - ref.__array_interface__["data"][0]) // 4)
    assert shapes == [expect] * 3


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_row_gather_with_skipped_rows_matches_numpy(fast, lnc, dtype):
    """An indirect dma_copy gather (oob_mode=skip) of rows 0..7 of a (16, 6) HBM tensor by an
    index with runs and -1 holes: gathered rows hold src[idx[w]], skipped rows keep the tile's
    earlier values (every path, one or two cores)."""
    import nkisim.nki as nki
    src = (np.arange(96).reshape(16, 6) * 3 + 1).astype(dtype)
    idx = np.array([[5], [6], [-1], [0], [15], [-1], [-1], [2]], np.int32)

    def kernel(src, idx):
        out = nl.ndarray((8, 6), dtype=src.dtype, buffer=nl.shared_hbm)
        ix = nl.ndarray((8, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ix, src=idx)
        t = nl.ndarray((8, 2, 6), dtype=src.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=7)
        nisa.dma_copy(dst=t[:, 1, :], src=src.ap([[6, 8], [1, 6]], offset=0, vector_offset=ix, indirect_dim=0),
                      oob_mode=nisa.oob_mode.skip)
        if nl.program_id(0) == 0:
            nisa.dma_copy(dst=out, src=t[:, 1, :])
        return out

    sim = nki.simulate(kernel, fast_paths=fast)
    got = (sim[lnc] if lnc > 1 else sim)(src, idx)
    expect = np.full((8, 6), 7, dtype)
    for w, i in enumerate(idx[:, 0]):
        if i >= 0:
            expect[w] = src[i]
    np.testing.assert_array_equal(got, expect)


def _tiles_into_output(a, pieces):
    """An (8, 16) shared_hbm output written by DMA stores of ``a``'s tiles through ``pieces``
    ((row slice, column slice) pairs, in order), then returned; a store of rows 0:2 goes
    through a view written before (read back into ``back``)."""
    out = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.shared_hbm)
    back = nl.ndarray((2, 16), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for rows, cols in pieces:
        nisa.dma_copy(dst=out[rows, cols], src=t[rows, cols])
    if pieces[0] == (slice(0, 2), slice(0, 16)):
        nisa.dma_copy(dst=back, src=out[0:2, :])
    else:
        nisa.dma_copy(dst=back, src=t[0:2, :])
    return out, back


_S = slice
_PIECES = {
    "rows": [(_S(0, 2), _S(0, 16)), (_S(2, 4), _S(0, 16)), (_S(4, 8), _S(0, 16))],
    "blocks": [(_S(r, r + 4), _S(c, c + 8)) for r in (4, 0) for c in (8, 0)],
    "overlap_complete": [(_S(0, 2), _S(0, 16)), (_S(1, 8), _S(0, 16)), (_S(3, 5), _S(2, 9))],
    "gap": [(_S(0, 2), _S(0, 16)), (_S(2, 8), _S(0, 15)), (_S(3, 5), _S(2, 9))],
    "overlap_gap": [(_S(0, 4), _S(0, 16)), (_S(0, 4), _S(0, 16)), (_S(2, 6), _S(0, 16)), (_S(6, 8), _S(1, 16))],
    "many": [(_S(r, r + 1), _S(c, c + 4)) for r in range(8) for c in (12, 8, 4, 0)],   # 32 stores
    "many_gap": [(_S(r, r + 1), _S(c, c + 4)) for r in range(8) for c in (12, 8, 4, 0)][:-1],
}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("case", sorted(_PIECES))
def test_output_written_in_tiles_reads_values_and_sentinel_elsewhere(fast, lnc, case):
    """An output tensor stored tile by tile holds the stores' values, and NaN exactly where no
    store wrote (whether its fill is made at once, postponed, or skipped because the stores
    covered everything), with fast paths on and off, one or two cores."""
    import nkisim.nki as nki
    a = np.arange(1, 129, dtype=np.float32).reshape(8, 16)
    pieces = _PIECES[case]
    expect = np.full((8, 16), np.nan, np.float32)
    for rows, cols in pieces:
        expect[rows, cols] = a[rows, cols]
    sim = nki.simulate(_tiles_into_output, fast_paths=fast)
    out, back = (sim[lnc] if lnc > 1 else sim)(a, tuple(pieces))
    np.testing.assert_array_equal(out, expect)
    np.testing.assert_array_equal(back, expect[0:2] if pieces[0][0] == _S(0, 2) and pieces[0][1] == _S(0, 16)
                                  else a[0:2])
