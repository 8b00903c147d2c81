"""Beta-1 block dimensions: ``nl.ndarray((B..., nl.par_dim(P), F...), buffer=nl.sbuf)`` -- each
block its own (P, F...) allocation (nki_block_dimension_migration_guide.rst: blocks are "a pure
software concept", each a tile the compiler places), so capacity counts each block's own life.
References: NumPy on the same data."""
import re

import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import BoundsError, CapacityError, UnsupportedError
from nkisim.language import indexing as ix
from nkisim.memory.blocks import BlockTensor
from conftest import simulate, tile_out

RNG = np.random.default_rng(3)


def test_block_tiles_round_trip_and_have_the_tile_shape():
    seen = {}

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((2, 3, ix.par_dim(128), 16), dtype=a.dtype, buffer=nl.sbuf)
        seen["shapes"] = (buf.shape, buf[1].shape, buf[1, 2].shape, buf[1, 2, 0:64, 4:8].shape)
        for i in range(2):
            for j in range(3):
                buf[i, j] = buf[i, j]                   # self-assignment is a no-op
                nisa.dma_copy(dst=buf[i, j], src=a[i, j])
                nisa.activation(dst=buf[i][j], op=nl.exp, data=buf[i, j])
                nisa.dma_copy(dst=out[i, j], src=buf[i, j])
        return out
    a = RNG.standard_normal((2, 3, 128, 16)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, a), np.exp(a))
    assert seen["shapes"] == ((2, 3, 128, 16), (3, 128, 16), (128, 16), (64, 4))


def test_each_block_is_its_own_allocation():
    def kernel(a):
        buf = nl.ndarray((4, ix.par_dim(8), 4), dtype=nl.float32, buffer=nl.sbuf)
        for i in range(4):
            nisa.memset(dst=buf[i], value=float(i))
        return tile_out(*(buf[i] for i in range(4))) + (len({id(buf[i].alloc) for i in range(4)}),)
    *tiles, n = simulate(kernel, np.zeros(1, np.float32))
    assert n == 4
    for i, t in enumerate(tiles):
        np.testing.assert_array_equal(t, np.full((8, 4), i, np.float32))


def _blocks_kernel(live_together):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, ix.par_dim(128), 16384), dtype=a.dtype, buffer=nl.sbuf)   # 64 KiB per block
        if live_together:                    # block i is read with block 3 - i: all live at once
            for i in range(4):
                nisa.dma_copy(dst=buf[i], src=a[i])
            for i in range(4):
                nisa.tensor_tensor(dst=buf[i], data1=buf[i], data2=buf[3 - i], op=nl.add)
            for i in range(4):
                nisa.dma_copy(dst=out[i], src=buf[i])
        else:                                # one block live at a time
            for i in range(4):
                nisa.dma_copy(dst=buf[i], src=a[i])
                nisa.tensor_tensor(dst=buf[i], data1=buf[i], data2=buf[i], op=nl.add)
                nisa.dma_copy(dst=out[i], src=buf[i])
        return out
    return kernel


def test_capacity_counts_the_blocks_alive_at_once():
    a = RNG.standard_normal((4, 128, 16384)).astype(np.float32)
    np.testing.assert_array_equal(simulate(_blocks_kernel(False), a, target="trn2"), a + a)
    with pytest.raises(CapacityError):      # 4 x 64 KiB live together > 212984 bytes per partition
        simulate(_blocks_kernel(True), a, target="trn2")


def test_filled_block_tensors_fill_every_block():
    def kernel():
        z = nl.full((3, ix.par_dim(4), 2), 2.5, dtype=nl.float32, buffer=nl.sbuf)
        return tile_out(*(z[i] for i in range(3)))
    for t in simulate(kernel):
        np.testing.assert_array_equal(t, np.full((4, 2), 2.5, np.float32))


def test_par_dim_first_or_on_hbm_is_the_plain_size():
    seen = {}

    def kernel():
        t = nl.ndarray((ix.par_dim(64), 8), dtype=nl.float32, buffer=nl.sbuf)
        h = nl.ndarray((2, ix.par_dim(64), 8), dtype=nl.float32, buffer=nl.shared_hbm)
        seen["types"] = (type(t).__name__, t.shape, type(h).__name__, h.shape)
    simulate(kernel)
    assert seen["types"] == ("NkiTensor", (64, 8), "NkiTensor", (2, 64, 8))


@pytest.mark.parametrize("key, error, message", [
    ((2,), BoundsError, "block index 2 on dim 0 of block tensor (2, 8, 4) is outside 0:2"),
    ((slice(None),), UnsupportedError, "block dim 0 of block tensor (2, 8, 4) takes an integer index"),
])
def test_block_indices_are_checked(key, error, message):
    def kernel():
        buf = nl.ndarray((2, ix.par_dim(8), 4), dtype=nl.float32, buffer=nl.sbuf)
        assert isinstance(buf, BlockTensor)
        buf[key]
    with pytest.raises(error, match=re.escape(message)):
        simulate(kernel)
