"""Indirect DMA: ``t.ap(pattern, vector_offset=idx, indirect_dim=0)`` gathers and scatters rows
through nisa.dma_copy, with oob_mode error/skip (digest §3.4, §3.7, §4.1)."""
import re

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import BoundsError, MemorySpaceError, ShapeError, UnsupportedError
from conftest import simulate


def err(op, what):
    return rf"^{re.escape(op)}: {re.escape(what)} \(test_indirect\.py:\d+\)$"


def _load_idx(idx):
    t = nl.ndarray((idx.shape[0], 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=idx)
    return t


def gather_kernel(oob=nisa.oob_mode.error):
    def kernel(table, idx):
        rows, f = idx.shape[0], table.shape[1]
        it = _load_idx(idx)
        t = nl.ndarray((rows, f), dtype=table.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-7.0)
        nisa.dma_copy(dst=t, src=table.ap([[f, rows], [1, f]], vector_offset=it, indirect_dim=0),
                      oob_mode=oob)
        out = nl.ndarray((rows, f), dtype=table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


def scatter_kernel(oob=nisa.oob_mode.skip):
    def kernel(table, idx, new):
        rows, f = new.shape
        it = _load_idx(idx)
        t = nl.ndarray((rows, f), dtype=new.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=new)
        nisa.dma_copy(dst=table.ap([[f, rows], [1, f]], vector_offset=it, indirect_dim=0), src=t,
                      oob_mode=oob)
        return table
    return kernel


def test_gather_rows_matches_numpy_take(rng):
    table = rng.standard_normal((10, 6), dtype=np.float32)
    idx = np.array([[3], [0], [9], [3], [5]], np.int32)
    got = simulate(gather_kernel(), table, idx)
    np.testing.assert_array_equal(got, table[idx[:, 0]])


def test_gather_skip_leaves_out_of_bounds_rows_untouched(rng):
    table = rng.standard_normal((4, 3), dtype=np.float32)
    idx = np.array([[1], [-1], [4], [2]], np.int32)
    got = simulate(gather_kernel(nisa.oob_mode.skip), table, idx)
    want = np.full((4, 3), -7.0, np.float32)
    want[0], want[3] = table[1], table[2]
    np.testing.assert_array_equal(got, want)


def test_gather_out_of_bounds_raises_with_oob_error(rng):
    table = rng.standard_normal((4, 3), dtype=np.float32)
    idx = np.array([[1], [-1]], np.int32)
    with pytest.raises(BoundsError, match=err(
            "nisa.dma_copy", "vector_offset index -1 at partition 1 is outside 0:4 rows of tensor "
                             "'argument 0' (4, 3) (oob_mode=error)")):
        simulate(gather_kernel(), table, idx)


def test_scatter_rows_with_skip_writes_caller_array_in_place(rng):
    table = np.zeros((6, 4), np.float32)
    new = rng.standard_normal((3, 4), dtype=np.float32)
    idx = np.array([[4], [-1], [1]], np.int32)
    simulate(scatter_kernel(), table, idx, new)
    want = np.zeros((6, 4), np.float32)
    want[4], want[1] = new[0], new[2]
    np.testing.assert_array_equal(table, want)


def test_scatter_bf16_rows_keep_bits():
    table = np.zeros((5, 2), ml_dtypes.bfloat16)
    new = np.array([[1.5, -2.25], [3.0, 0.1]], ml_dtypes.bfloat16)
    simulate(scatter_kernel(), table, np.array([[2], [0]], np.int32), new)
    assert table[2].view(np.uint16).tolist() == new[0].view(np.uint16).tolist()
    assert table[0].view(np.uint16).tolist() == new[1].view(np.uint16).tolist()


def test_row_step_comes_from_the_reshaped_tensor(rng):
    """Decision: ``cache.reshape(...)`` is its own base, so rows are slots, not blocks."""
    def kernel(cache, idx, new):
        it = _load_idx(idx)
        t = nl.ndarray(new.shape, dtype=new.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=new)
        flat = cache.reshape((cache.shape[0] * cache.shape[1], cache.shape[2]))
        f = cache.shape[2]
        nisa.dma_copy(dst=flat.ap([[f, new.shape[0]], [1, f]], vector_offset=it, indirect_dim=0),
                      src=t, oob_mode=nisa.oob_mode.skip)
        return cache
    cache = np.zeros((3, 4, 2), np.float32)          # 3 blocks of 4 slots
    new = rng.standard_normal((2, 2), dtype=np.float32)
    simulate(kernel, cache, np.array([[5], [11]], np.int32), new)
    want = np.zeros((12, 2), np.float32)
    want[5], want[11] = new[0], new[1]
    np.testing.assert_array_equal(cache.reshape(12, 2), want)


def test_vector_offset_needs_hbm_base():
    def kernel(idx):
        it = _load_idx(idx)
        t = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        t.ap([[4, 2], [1, 4]], vector_offset=it, indirect_dim=0)
    with pytest.raises(MemorySpaceError, match=err(
            "NkiTensor.ap", "vector_offset needs a tensor in HBM (DMA gather/scatter), got sbuf")):
        simulate(kernel, np.zeros((2, 1), np.int32))


def test_vector_offset_only_indirect_dim_0(rng):
    def kernel(table, idx):
        it = _load_idx(idx)
        table.ap([[3, 2], [1, 3]], vector_offset=it, indirect_dim=1)
    with pytest.raises(ShapeError, match=err("NkiTensor.ap",
                                             "vector_offset supports indirect_dim=0 only, got 1")):
        simulate(kernel, np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32))


def test_vector_offset_index_shape_must_match_rows():
    def kernel(table, idx):
        it = _load_idx(idx)
        table.ap([[3, 3], [1, 3]], vector_offset=it, indirect_dim=0)
    with pytest.raises(ShapeError, match=err(
            "NkiTensor.ap", "vector_offset shape (2, 1) must be (3, 1): one index per row of the pattern")):
        simulate(kernel, np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32))


def test_vector_offset_excludes_scalar_offset():
    def kernel(table, idx):
        it = _load_idx(idx)
        table.ap([[3, 1], [1, 3]], scalar_offset=it, vector_offset=it)
    with pytest.raises(ShapeError, match=err("NkiTensor.ap",
                                             "scalar_offset and vector_offset are mutually exclusive")):
        simulate(kernel, np.zeros((4, 3), np.float32), np.zeros((1, 1), np.int32))


def test_indirect_dma_refuses_hwdge_and_double_indirect():
    def kernel(table, idx, mode):
        it = _load_idx(idx)
        view = table.ap([[3, 2], [1, 3]], vector_offset=it, indirect_dim=0)
        t = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        if mode == "hwdge":
            nisa.dma_copy(dst=t, src=view, dge_mode=nisa.dge_mode.hwdge)
        else:
            nisa.dma_copy(dst=view, src=view)
    args = (np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32))
    with pytest.raises(UnsupportedError, match=err(
            "nisa.dma_copy", "indirect (vector_offset) DMA needs the software DGE, not dge_mode=hwdge")):
        simulate(kernel, *args, "hwdge")
    with pytest.raises(UnsupportedError, match=err(
            "nisa.dma_copy", "only one of src and dst may be an indirect (vector_offset) view")):
        simulate(kernel, *args, "both")


def test_indirect_plain_side_rows_must_pair():
    def kernel(table, idx):
        it = _load_idx(idx)
        t = nl.ndarray((1, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table.ap([[3, 2], [1, 3]], vector_offset=it, indirect_dim=0))
    with pytest.raises(ShapeError, match=err(
            "nisa.dma_copy", "dst dim 0 is 1; the indirect view has 2 rows and row w pairs with dst[w]")):
        simulate(kernel, np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32))


def test_indirect_dma_refuses_dge_mode_none():
    """nisa.dma_copy: "When sw_dge is selected, nisa.dma_copy can also perform a gather or scatter"."""
    def kernel(table, idx):
        it = _load_idx(idx)
        t = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table.ap([[3, 2], [1, 3]], vector_offset=it, indirect_dim=0),
                      dge_mode=nisa.dge_mode.none)
    with pytest.raises(UnsupportedError, match=err(
            "nisa.dma_copy", "indirect (vector_offset) DMA needs the software DGE, not dge_mode=none")):
        simulate(kernel, np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32))


def test_vector_select_gathers_rows_like_numpy(rng):
    """NkiTensor.vector_select(0, offsets): "Each partition uses its own index from vector_offset
    as the base address for the selected dimension"; shape (offsets.shape[0],) + shape[1:]."""
    table = rng.standard_normal((6, 2, 4)).astype(np.float32)
    idx = np.array([[5], [0], [3]], np.int32)

    def kernel(table, idx):
        it = _load_idx(idx)
        v = table.vector_select(0, it)
        assert v.shape == (3, 2, 4)
        t = nl.ndarray((3, 2, 4), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v)
        out = nl.ndarray((3, 2, 4), dtype=table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    np.testing.assert_array_equal(simulate(kernel, table, idx), table[idx[:, 0]])


def test_vector_select_rules():
    def kernel(table, idx, case):
        it = _load_idx(idx)
        if case == "dim":
            table.vector_select(1, it)
        else:
            t = nl.ndarray((4, 3), dtype=nl.float32, buffer=nl.sbuf)
            t.vector_select(0, it)
    args = (np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32))
    with pytest.raises(ShapeError, match=err("NkiTensor.vector_select", "dim must be 0, got 1")):
        simulate(kernel, *args, "dim")
    with pytest.raises(MemorySpaceError, match=err("NkiTensor.vector_select", "vector_offset needs a tensor "
                                                   "in HBM (DMA gather/scatter), got sbuf")):
        simulate(kernel, *args, "sbuf")
