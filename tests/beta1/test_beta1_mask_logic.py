"""Beta-1 masks combined with ``|`` and ``~`` (beyond the documented ``&``; see the Decision in
``memory.masks.Predicate``): their truth grids, and instructions under them, against NumPy."""
import re

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from nkisim.errors import UnsupportedError
from nkisim.language import indexing as ix

RNG = np.random.default_rng(23)
P, F = np.mgrid[0:8, 0:6]


def kept(pred):
    """The elements a predicate's Box keeps, as a bool grid (what the dispatcher applies)."""
    box = pred.box()
    out = np.zeros(box.shape, bool)
    if not box.empty:
        out[tuple(slice(*r) if r else slice(None) for r in box.ranges)] = True if box.keep is None else box.keep
    return np.broadcast_to(out, (8, 6))


CASES = [
    (lambda p, f: (p < 3) | (f >= 4), (P < 3) | (F >= 4)),
    (lambda p, f: ~((p < 3) & (f < 2)), ~((P < 3) & (F < 2))),
    (lambda p, f: ~((p < 3) | (f < 2)), ~((P < 3) | (F < 2))),
    (lambda p, f: ((p < 2) | (p > 5)) & (f != 3), ((P < 2) | (P > 5)) & (F != 3)),
    (lambda p, f: ~(~(p < 4)), P < 4),
    (lambda p, f: (p == 1) | (f < p) | (p + f == 9), (P == 1) | (F < P) | (P + F == 9)),
    (lambda p, f: ((p < 3) | (f < 2)) & ((p >= 5) | (f >= 4)), ((P < 3) | (F < 2)) & ((P >= 5) | (F >= 4))),
    (lambda p, f: (p < 3) | True, np.ones((8, 6), bool)),
    (lambda p, f: (p < 3) | False, P < 3),
    (lambda p, f: ((p < 3) | (f < 2)) & False, np.zeros((8, 6), bool)),
    (lambda p, f: ~((p < 3) | True), np.zeros((8, 6), bool)),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_or_and_not_truth_grids_match_numpy(i):
    build, want = CASES[i]
    pred = build(ix.arange(8)[:, None], ix.arange(6)[None, :])
    np.testing.assert_array_equal(np.broadcast_to(np.asarray(pred), (8, 6)), want)
    np.testing.assert_array_equal(kept(pred), want)


def test_a_union_that_is_one_range_is_that_range():
    i = ix.arange(16)[:, None]
    box = ((i < 4) | (i < 9)).box()
    assert box.ranges == ((0, 9), None) and box.keep is None and not box.empty
    box = ((i < 4) | (i >= 4)).box()
    assert box.ranges == (None, None) and box.keep is None and not box.empty


def test_demorgan_form_too_large_is_refused():
    i = ix.arange(16)[:, None]
    big = (i < 0) & (i > 0)
    for k in range(1, 9):
        big = big | ((i < k) & (i > k))
    assert len(big.clauses) == 9
    with pytest.raises(UnsupportedError, match=re.escape("mask: the predicate's disjunctive form has 512 "
                                                         "conjunctions, more than 256; simplify the mask")):
        ~big


def test_instructions_under_or_and_not_masks_match_numpy():
    """Each masked instruction writes only the elements its mask keeps; the others of its new
    tile stay unwritten (NaN, the fill of new allocations), and a masked store leaves the rest
    of the output unwritten too."""
    a = RNG.standard_normal((128, 64)).astype(np.float32)

    @nki.jit(mode="simulation")
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        x = nl.load(a)
        y = nl.exp(x, mask=(i_p < 10) | (i_f >= 60))
        z = nl.multiply(y, 2.0, mask=~((i_p >= 5) & (i_f < 62)))
        nl.store(out, z, mask=~((i_p < 2) | (i_p > 120)))
        return out

    got = nki.simulate_kernel(k, a)
    p, f = np.mgrid[0:128, 0:64]
    keep = ((p < 10) | (f >= 60)) & ~((p >= 5) & (f < 62)) & ~((p < 2) | (p > 120))
    assert 0 < keep.sum() < keep.size
    want = np.where(keep, np.exp(a) * np.float32(2), np.float32(np.nan))
    np.testing.assert_allclose(got, want, rtol=1e-6)
