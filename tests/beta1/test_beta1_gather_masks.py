"""Beta-1 gather / scatter views: masks on them (``t[idx_tile, i_f]`` with a runtime index tile):
masked-off rows are neither read (their indices may be out of bounds) nor written; a masked
free range narrows every row. References: NumPy fancy indexing."""
import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

RNG = np.random.default_rng(41)
NAN = np.float32(np.nan)


def gather(mask_of, use_dma=False):
    @nki.jit(mode="simulation")
    def k(a, idx):
        n = idx.shape[0]
        f = a.shape[1]
        out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(n)[:, None], nl.arange(f)[None, :]
        it = nl.load(idx)
        if use_dma:
            t = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[i_p, i_f], src=a[it, i_f], mask=mask_of(i_p, i_f))
        else:
            t = nl.load(a[it, i_f], mask=mask_of(i_p, i_f))
        nl.store(out, t)
        return out
    return k


IDX = np.array([3, 1, 15, 0, 99, -4], np.int32).reshape(6, 1)     # rows 4, 5: out of bounds


@pytest.mark.parametrize("use_dma", [False, True])
def test_masked_gather_reads_only_kept_rows_and_columns(use_dma):
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    got = nki.simulate_kernel(gather(lambda p, f: (p < 4) & (f < 5), use_dma), a, IDX)
    want = np.full((6, 8), NAN)
    want[:4, :5] = a[IDX[:4, 0], :5]
    np.testing.assert_array_equal(got, want)


def test_masked_gather_on_an_inner_column_range():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    got = nki.simulate_kernel(gather(lambda p, f: (f >= 2) & (f < 7) & (p >= 1) & (p <= 3)), a, IDX)
    want = np.full((6, 8), NAN)
    want[1:4, 2:7] = a[IDX[1:4, 0], 2:7]
    np.testing.assert_array_equal(got, want)


def test_a_kept_out_of_bounds_row_is_still_an_index_error():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    with pytest.raises(IndexError) as info:
        nki.simulate_kernel(gather(lambda p, f: p < 5), a, IDX)
    assert str(info.value) == "index 792 is out of bounds for axis 0 with size 128"      # row 99 * 8


def test_a_non_range_mask_on_a_gather_keeps_exactly_its_elements():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    got = nki.simulate_kernel(gather(lambda p, f: (f < p) & (p < 4)), a, IDX)
    p, f = np.mgrid[0:6, 0:8]
    keep = (f < p) & (p < 4)
    want = np.where(keep, a[np.clip(IDX[:, 0], 0, 15)], NAN)
    np.testing.assert_array_equal(got, want)


def test_masked_scatter_writes_only_kept_rows_and_columns():
    src = RNG.standard_normal((6, 8)).astype(np.float32)
    table = np.full((16, 8), 2.0, np.float32)

    @nki.jit(mode="simulation")
    def k(src, idx, table):
        i_p, i_f = nl.arange(6)[:, None], nl.arange(8)[None, :]
        it = nl.load(idx)
        t = nl.load(src)
        nl.store(table[it, i_f], t, mask=(i_p < 4) & (i_f >= 3))

    nki.simulate_kernel(k, src, IDX, table)
    want = np.full((16, 8), 2.0, np.float32)
    want[IDX[:4, 0], 3:] = src[:4, 3:]
    np.testing.assert_array_equal(table, want)


def test_a_non_range_mask_on_a_scatter_writes_exactly_its_elements():
    src = RNG.standard_normal((6, 8)).astype(np.float32)
    idx = np.array([3, 1, 15, 0, 9, 4], np.int32).reshape(6, 1)
    table = np.full((16, 8), 2.0, np.float32)

    @nki.jit(mode="simulation")
    def k(src, idx, table):
        i_p, i_f = nl.arange(6)[:, None], nl.arange(8)[None, :]
        nl.store(table[nl.load(idx), i_f], nl.load(src), mask=(i_f < i_p) & (i_f != 2))

    nki.simulate_kernel(k, src, idx, table)
    want = np.full((16, 8), 2.0, np.float32)
    p, f = np.mgrid[0:6, 0:8]
    keep = (f < p) & (f != 2)
    for r, c in zip(*np.nonzero(keep)):
        want[idx[r, 0], c] = src[r, c]
    np.testing.assert_array_equal(table, want)


def test_dma_transpose_of_a_gather_view_takes_the_base_dtype():
    src = np.arange(40 * 2 * 8).reshape(40, 2, 8).astype(np.uint16)
    idx = RNG.permutation(40)[:16].astype(np.uint32).reshape(16, 1)     # 16 rows: the indirect unit

    @nki.jit(mode="simulation", platform_target="trn2")
    def k(src, idx):
        it = nl.load(idx)
        iy, iz = nl.arange(2)[None, :, None], nl.arange(8)[None, None, :]
        t = nisa.dma_transpose(src[it, iy, iz], axes=(2, 1, 0))
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    got = nki.simulate_kernel(k, src, idx)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, np.transpose(src[idx[:, 0]], (2, 1, 0)))
