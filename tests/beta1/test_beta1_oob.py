"""Beta-1 out-of-bounds runtime indices: an indirect (index-tile) DMA with ``oob_mode=error`` raises
exactly the ``IndexError`` the Beta-1 simulator documents, NumPy's message over the flattened HBM
tensor; the nkisim BoundsError is its cause. Other bounds errors, and Beta 2, are unchanged."""
import re

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from nkisim.errors import BoundsError

RNG = np.random.default_rng(11)


def gather_kernel(step, oob=nisa.oob_mode.error):
    @nki.jit(mode="simulation")
    def k(table):
        n, m = table.shape
        out = nl.ndarray((n // 2, m), dtype=table.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:n // 2, 0:m]
        idx = nisa.iota(step * nl.arange(n // 2)[:, None], dtype=np.int32)
        t = nisa.memset(shape=(n // 2, m), value=-1, dtype=table.dtype)
        nisa.dma_copy(src=table[idx, iy], dst=t[ix, iy], oob_mode=oob)
        nl.store(out, value=t)
        return out
    return k


def scatter_kernel(step):
    @nki.jit(mode="simulation")
    def k(src, table):
        n, m = src.shape
        ix, iy = nl.mgrid[0:n, 0:m]
        idx = nisa.iota(step * nl.arange(n)[:, None], dtype=np.int32)
        t = nl.load(src)
        nisa.dma_copy(dst=table[idx, iy], src=t[ix, iy], oob_mode=nisa.oob_mode.error)
    return k


def test_gather_in_bounds_matches_numpy():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(gather_kernel(2), a), a[2 * np.arange(8)])


def test_gather_out_of_bounds_raises_exactly_index_error_with_numpy_message():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    with pytest.raises(IndexError) as info:
        nki.simulate_kernel(gather_kernel(3), a)
    e = info.value
    # rows 0, 3, ..., 15 exist; partition 6 asks for row 18: element 18 * 8 = 144 of 128
    assert type(e) is IndexError
    assert str(e) == "index 144 is out of bounds for axis 0 with size 128"
    assert isinstance(e.__cause__, BoundsError)
    assert re.fullmatch(r"nisa\.dma_copy: vector_offset index 18 at partition 6 is outside 0:16 rows of "
                        r"tensor 'argument 0' \(16, 8\) \(oob_mode=error\) \(test_beta1_oob\.py:\d+\)",
                        str(e.__cause__))
    assert e.__notes__ == [f"nkisim: {e.__cause__}"]


def test_gather_oob_skip_keeps_the_destination():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    want = np.full((8, 8), -1, np.float32)
    want[:6] = a[3 * np.arange(6)]
    np.testing.assert_array_equal(nki.simulate_kernel(gather_kernel(3, nisa.oob_mode.skip), a), want)


def test_scatter_out_of_bounds_raises_index_error_and_leaves_the_array():
    src = RNG.standard_normal((8, 4)).astype(np.float32)
    table = np.full((20, 4), 5.0, np.float32)
    before = table.copy()
    with pytest.raises(IndexError) as info:
        nki.simulate_kernel(scatter_kernel(3), src, table)
    # partition 7 writes row 21 of 20: element 21 * 4 = 84 of 80
    assert type(info.value) is IndexError
    assert str(info.value) == "index 84 is out of bounds for axis 0 with size 80"
    np.testing.assert_array_equal(table, before)


def test_scatter_in_bounds_writes_the_rows():
    src = RNG.standard_normal((8, 4)).astype(np.float32)
    table = np.zeros((24, 4), np.float32)
    nki.simulate_kernel(scatter_kernel(3), src, table)
    want = np.zeros((24, 4), np.float32)
    want[3 * np.arange(8)] = src
    np.testing.assert_array_equal(table, want)


def test_static_out_of_bounds_slice_is_still_a_bounds_error():
    @nki.jit(mode="simulation")
    def k(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[0:4, 4:12]))
        return out

    with pytest.raises(BoundsError):
        nki.simulate_kernel(k, np.zeros((4, 8), np.float32))


def test_lazy_index_expression_out_of_bounds_is_the_instructions_finding(monkeypatch):
    """README Decision: a Beta-1 slice is lazy and bounds-checked by the instruction using it, so
    under findings=warn an out-of-bounds ``nl.load(a[:, 32:96])`` of a 64-column tensor is the
    load's (``nisa.dma_copy``'s) finding and is skipped; the store still runs; under the default
    (first) it raises BoundsError. The input is unchanged either way."""
    @nki.jit(mode="simulation")
    def k(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.load(a[:, 32:96])
        nl.store(out[:, 0:64], value=nl.load(a))
        return out

    a = RNG.standard_normal((128, 64)).astype(np.float32)
    before = a.copy()
    with pytest.raises(BoundsError, match="reaches 95"):
        nki.simulate_kernel(k, a)
    monkeypatch.setenv("NKISIM_FINDINGS", "warn")
    out = nki.simulate_kernel(k, a)                 # returns normally: the finding is reported
    np.testing.assert_array_equal(out, before)
    np.testing.assert_array_equal(a, before)

