"""Beta-1 ``nl.atomic_rmw`` and ``nisa.dma_copy(dst_rmw_op=np.add)``: dst = dst + value on HBM rows
picked by an index tile; duplicate indices add every time (atomic). References: NumPy
(``np.add.at`` for the duplicates)."""
import re

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nkisim.trace
from nkisim.errors import ArgumentError, MemorySpaceError, UnsupportedError

RNG = np.random.default_rng(53)


def rmw_kernel(how="atomic", value_of=None, mask_of=None):
    @nki.jit(mode="simulation")
    def k(table, idx, vals):
        n, m = vals.shape
        i_p, i_f = nl.arange(n)[:, None], nl.arange(m)[None, :]
        it = nl.load(idx)
        v = nl.load(vals) if value_of is None else value_of
        mask = None if mask_of is None else mask_of(i_p, i_f)
        if how == "atomic":
            nl.atomic_rmw(table[it, i_f], value=v, op=np.add, mask=mask)
        else:
            nisa.dma_copy(dst=table[it, i_f], src=v, dst_rmw_op=np.add, mask=mask)
    return k


@pytest.mark.parametrize("how", ["atomic", "dma_copy"])
@pytest.mark.parametrize("idx", [[5, 0, 3, 9], [2, 2, 7, 2, 0, 7]], ids=["unique", "duplicates"])
def test_rmw_adds_every_row_like_np_add_at(how, idx):
    idx = np.array(idx, np.int32).reshape(-1, 1)
    table = RNG.standard_normal((10, 6)).astype(np.float32)
    vals = RNG.standard_normal((len(idx), 6)).astype(np.float32)
    want = table.copy()
    np.add.at(want, idx[:, 0], vals)
    nki.simulate_kernel(rmw_kernel(how), table, idx, vals)
    np.testing.assert_allclose(table, want, rtol=1e-6, atol=1e-6)


def test_duplicates_issue_one_dma_compute_per_run_of_unique_rows():
    idx = np.array([2, 2, 7, 2, 0, 7], np.int32).reshape(-1, 1)
    table = np.zeros((10, 6), np.float32)
    vals = np.ones((6, 6), np.float32)
    with nkisim.trace.record() as events:
        nki.simulate_kernel(rmw_kernel(), table, idx, vals)
    # rows 2 | 2 7 | 2 0 7: a run ends where an index repeats one already in it
    assert [e.options["rows"] for e in events if e.op == "dma_compute"] == [1, 2, 3]
    np.testing.assert_array_equal(table[[2, 7, 0]], np.full((3, 6), [[3], [2], [1]], np.float32))


def test_scalar_value_and_masked_rows():
    idx = np.array([4, 1, 8, 3], np.int32).reshape(-1, 1)
    table = RNG.standard_normal((10, 6)).astype(np.float32)
    vals = np.zeros((4, 6), np.float32)
    want = table.copy()
    want[idx[:2, 0], 1:] += np.float32(2.5)
    nki.simulate_kernel(rmw_kernel(value_of=2.5, mask_of=lambda p, f: (p < 2) & (f >= 1)), table, idx, vals)
    np.testing.assert_allclose(table, want, rtol=1e-6)


def test_rules():
    idx = np.array([1, 1], np.int32).reshape(-1, 1)
    table = np.zeros((4, 3), np.float32)
    vals = np.ones((2, 3), np.float32)
    with pytest.raises(UnsupportedError, match=re.escape("nl.atomic_rmw: a read-modify-write scatter whose "
                                                         "index tile repeats a row (row 1) under a mask")):
        nki.simulate_kernel(rmw_kernel(mask_of=lambda p, f: p < 2), table, idx, vals)

    @nki.jit(mode="simulation")
    def bad_op(table, idx, vals):
        nl.atomic_rmw(table[nl.load(idx), nl.arange(3)[None, :]], value=nl.load(vals), op=np.multiply)

    with pytest.raises(ArgumentError, match=re.escape("nl.atomic_rmw: op must be np.add (the only one "
                                                      "supported), got multiply")):
        nki.simulate_kernel(bad_op, table, idx, vals)

    @nki.jit(mode="simulation")
    def on_chip(table, idx, vals):
        nl.atomic_rmw(nl.load(vals), value=1.0, op=np.add)

    with pytest.raises(MemorySpaceError, match=re.escape("nl.atomic_rmw: dst must be an HBM tensor")):
        nki.simulate_kernel(on_chip, table, idx, vals)
    np.testing.assert_array_equal(table, 0)
