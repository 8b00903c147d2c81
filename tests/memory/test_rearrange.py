"""NkiTensor.rearrange (einops-style split / reorder / merge) against NumPy reshape+transpose."""
import re

import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import ShapeError
from conftest import simulate


def _hbm_view(x, fn):
    def kernel(x):
        v = fn(x)
        out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(v.shape if len(v.shape) > 1 else (1,) + v.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v)
        nisa.dma_copy(dst=out, src=t)
        return out
    return simulate(kernel, x)


CASES = [
    # (shape, src, dst, sizes, numpy reference)
    ((8, 24), ("b", ("h", "w")), ("b", "w", "h"), {"h": 4},
     lambda a: a.reshape(8, 4, 6).transpose(0, 2, 1)),
    ((6, 4, 5), ("a", "b", "c"), ("c", "a", "b"), None, lambda a: a.transpose(2, 0, 1)),
    ((6, 4, 5), ("a", "b", "c"), ("a", ("b", "c")), None, lambda a: a.reshape(6, 20)),
    ((6, 20), (("a", "b"), "c"), ("b", "a", "c"), {"a": 2}, lambda a: a.reshape(2, 3, 20).transpose(1, 0, 2)),
]


@pytest.mark.parametrize("shape,src,dst,sizes,ref", CASES)
def test_rearrange_matches_numpy(shape, src, dst, sizes, ref, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(_hbm_view(x, lambda t: t.rearrange(src, dst, sizes)), ref(x))


def test_rearrange_doc_example_on_chip():
    seen = {}

    def kernel(x):
        t = nl.ndarray((128, 24), dtype=nl.float32, buffer=nl.sbuf)
        seen["shape"] = t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}).shape
        return x
    simulate(kernel, np.zeros((1, 1), np.float32))
    assert seen["shape"] == (128, 6, 4)


def test_rearrange_keeps_the_partition_dim_first_on_chip():
    def kernel(x):
        t = nl.ndarray((128, 24), dtype=nl.float32, buffer=nl.sbuf)
        t.rearrange(("p", "f"), ("f", "p"))
    with pytest.raises(ShapeError, match=re.escape("NkiTensor.permute: on-chip tensors must keep the partition "
                                                   "dim first, got dims (1, 0)")):
        simulate(kernel, np.zeros((1, 1), np.float32))


def test_rearrange_names_must_match():
    def kernel(x):
        x.rearrange(("a", "b"), ("a", "c"))
    with pytest.raises(ShapeError, match=re.escape("NkiTensor.rearrange: dst_pattern ('a', 'c') must use each "
                                                   "name of src_pattern ('a', 'b') exactly once")):
        simulate(kernel, np.zeros((2, 3), np.float32))
