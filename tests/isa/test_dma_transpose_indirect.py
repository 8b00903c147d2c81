"""nisa.dma_transpose with an indirect (vector_offset) src, against NumPy: gathered = src[idx], then
the documented permutation ("DMA Indirect Transpose Constraints", nki/api/nki/isa/__init__.py)."""
import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
import nkisim.trace as trace
from nkisim.errors import BoundsError, DtypeError, ShapeError, UnsupportedError

BF16 = ml_dtypes.bfloat16


def gather_t(rows, d, idx_dtype=nl.uint32, dge=nisa.dge_mode.swdge, target="trn2", oob=nisa.oob_mode.error):
    def kernel(src, idx):
        ix = nl.ndarray((rows, 1), dtype=idx_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ix, src=idx)
        dst = nl.ndarray((d, rows), dtype=src.dtype, buffer=nl.sbuf)
        nisa.memset(dst=dst, value=7.0)
        nisa.dma_transpose(dst=dst, src=src.ap([[d, rows], [1, d]], offset=0, vector_offset=ix, indirect_dim=0),
                           axes=(1, 0), dge_mode=dge, oob_mode=oob)
        out = nl.ndarray((d, rows), dtype=src.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out
    return nki.simulate(kernel, target=target)


@pytest.mark.parametrize("rows, d", [(16, 8), (128, 64), (64, 128)])
def test_2d_gather_transpose_matches_numpy(rows, d):
    rng = np.random.default_rng(rows)
    src = rng.standard_normal((300, d)).astype(BF16)
    idx = rng.integers(0, 300, (rows, 1)).astype(np.uint32)
    with trace.record() as ev:
        got = gather_t(rows, d)(src, idx)
    np.testing.assert_array_equal(got.view(np.uint16), src[idx[:, 0]].T.view(np.uint16))
    assert any(e.api == "nisa.dma_transpose" and e.options.get("indirect") for e in ev)


def test_4d_gather_transpose_as_paged_attention_loads_keys():
    """src (blocks, 1, block_len, d) rows picked per block; axes (3, 1, 2, 0)."""
    rng = np.random.default_rng(4)
    nblk, blen, d, rows = 40, 4, 32, 16
    cache = rng.standard_normal((nblk, blen * d)).astype(BF16)
    idx = rng.permutation(nblk)[:rows].astype(np.uint32).reshape(rows, 1)

    def kernel(cache, idx):
        ix = nl.ndarray((rows, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ix, src=idx)
        dst = nl.ndarray((d, 1, blen, rows), dtype=cache.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=dst, src=cache.ap([[blen * d, rows], [1, 1], [d, blen], [1, d]], offset=0,
                                                 vector_offset=ix, indirect_dim=0), axes=(3, 1, 2, 0))
        out = nl.ndarray(dst.shape, dtype=cache.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out
    got = nki.simulate(kernel, target="trn2")(cache, idx)
    gathered = cache[idx[:, 0]].reshape(rows, 1, blen, d)
    np.testing.assert_array_equal(got.view(np.uint16), np.transpose(gathered, (3, 1, 2, 0)).view(np.uint16))


def test_out_of_bounds_index_raises_or_is_skipped():
    src = np.arange(20 * 8, dtype=np.float32).reshape(20, 8).astype(BF16)
    idx = np.arange(16, dtype=np.uint32).reshape(16, 1)
    idx[3, 0] = 99
    with pytest.raises(BoundsError):
        gather_t(16, 8)(src, idx)
    got = gather_t(16, 8, oob=nisa.oob_mode.skip)(src, idx)
    want = src[np.minimum(idx[:, 0], 19)].T.astype(np.float32)
    want[:, 3] = 7.0                                   # the skipped row keeps dst's values
    np.testing.assert_array_equal(got.astype(np.float32), want)


def test_indirect_transpose_rules():
    src = np.zeros((64, 8), BF16)
    idx = np.zeros((16, 1), np.uint32)
    with pytest.raises(UnsupportedError, match="trn2 or newer"):
        gather_t(16, 8, target="trn1")(src, idx)
    with pytest.raises(UnsupportedError, match="dge_mode must be unknown or swdge"):
        gather_t(16, 8, dge=nisa.dge_mode.hwdge)(src, idx)
    with pytest.raises(DtypeError, match="needs uint32"):
        gather_t(16, 8, idx_dtype=nl.int32)(src, idx.astype(np.int32))
    with pytest.raises(DtypeError, match="2-byte dtype"):
        gather_t(16, 8)(src.astype(np.float32), idx)
    with pytest.raises(ShapeError, match="multiple of 16"):
        gather_t(8, 8)(src, idx[:8])
