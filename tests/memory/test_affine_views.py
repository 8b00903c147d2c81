"""Beta-1 index expressions as views (``memory.affine``): ``nl.arange`` / ``nl.mgrid`` values,
every affine form indexing HBM and SBUF tensors on read and write, bounds, unsupported forms.
References: NumPy advanced indexing with the same integer arrays (``np.arange``, ``np.mgrid``)."""
import re

import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import BoundsError, ShapeError, UnsupportedError
from nkisim.language import indexing as ix
from conftest import simulate, tile_out

RNG = np.random.default_rng(7)


def err(op, what):
    return rf"^{re.escape(op)}: {re.escape(what)} \(test_affine_views\.py:\d+\)$"


# ---- the expressions themselves -------------------------------------------------------------

def test_arange_values_and_broadcasting_match_numpy():
    np.testing.assert_array_equal(np.asarray(ix.arange(5)), np.arange(5))
    np.testing.assert_array_equal(np.asarray(ix.arange(3, 9)), np.arange(3, 9))
    i_p, i_f = ix.arange(4)[:, None], ix.arange(6)[None, :]
    p, f = np.arange(4)[:, None], np.arange(6)[None, :]
    for got, want in ((i_p * 2 + 3, p * 2 + 3), (i_f + i_p * 6, f + p * 6), (10 - i_f, 10 - f),
                      (2 * i_p - i_f, 2 * p - f), (-i_p, -p), (ix.arange(12)[2:10:3], np.arange(12)[2:10:3])):
        np.testing.assert_array_equal(np.asarray(got), want)
    assert (i_p + i_f).shape == (4, 6)


def test_mgrid_is_numpy_mgrid_with_axis_attributes():
    g = ix.mgrid[0:4, 2:8:2, 0:3]
    want = np.mgrid[0:4, 2:8:2, 0:3]
    assert len(g) == 3
    for got, w in zip(g, want):
        np.testing.assert_array_equal(np.asarray(got), w)
    np.testing.assert_array_equal(np.asarray(g.p), want[0])
    np.testing.assert_array_equal(np.asarray(g.x), want[1])
    np.testing.assert_array_equal(np.asarray(g.y), want[2])
    with pytest.raises(AttributeError, match="no axis 'z'"):
        g.z


@pytest.mark.parametrize("build, message", [
    (lambda i, j: i * j, "the product of two index expressions is not affine"),
    (lambda i, j: i // 2, "only +, - and * by an integer keep an index expression affine"),
    (lambda i, j: i % 2, "only +, - and * by an integer keep an index expression affine"),
    (lambda i, j: i * 1.5, "expected an integer or an index expression, got float 1.5"),
])
def test_non_affine_expressions_raise(build, message):
    with pytest.raises(UnsupportedError, match=re.escape(message)):
        build(ix.arange(4)[:, None], ix.arange(4)[None, :])


def test_empty_arange_and_bad_broadcast_raise():
    with pytest.raises(ShapeError, match=re.escape("nl.arange: arange(3, 3) is empty")):
        ix.arange(3, 3)
    with pytest.raises(ShapeError, match="do not broadcast"):
        ix.arange(4) + ix.arange(5)


# ---- views of HBM tensors -------------------------------------------------------------------

def _load(view_fn, shape):
    """Kernel: dma_copy the view ``view_fn(a)`` into an SBUF tile of ``shape``, return its values."""
    def kernel(a):
        t = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=view_fn(a))
        return tile_out(t)
    return kernel


P, F = np.arange(32)[:, None], np.arange(16)[None, :]


@pytest.mark.parametrize("view_fn, ref", [
    (lambda a, i_p, i_f: a[i_p, i_f], lambda a: a[P, F]),
    (lambda a, i_p, i_f: a[i_p * 2 + 1, i_f], lambda a: a[P * 2 + 1, F]),
    (lambda a, i_p, i_f: a[32 + i_p, i_f * 3 + 2], lambda a: a[32 + P, F * 3 + 2]),
    (lambda a, i_p, i_f: a[i_p, 63 - i_f], lambda a: a[P, 63 - F]),         # negative stride
    (lambda a, i_p, i_f: a[i_p + i_f, i_f], lambda a: a[P + F, F]),          # two axes on one dim
    (lambda a, i_p, i_f: a[i_p, i_f + 16 * 2], lambda a: a[P, F + 32]),
    (lambda a, i_p, i_f: a[i_p, 7], lambda a: a[P, 7]),
])
def test_hbm_expression_views_read_like_numpy(view_fn, ref):
    a = RNG.standard_normal((96, 64)).astype(np.float32)
    i_p, i_f = ix.arange(32)[:, None], ix.arange(16)[None, :]
    want = ref(a)
    got = simulate(_load(lambda x: view_fn(x, i_p, i_f), want.shape), a)
    np.testing.assert_array_equal(got, want)


def test_hbm_three_d_views_ints_mgrid_and_trailing_slices():
    a = RNG.standard_normal((4, 64, 96)).astype(np.float32)
    i_p, i_f = ix.arange(64)[:, None], ix.arange(48)[None, :]
    np.testing.assert_array_equal(simulate(_load(lambda x: x[2, i_p, i_f + 48], (64, 48)), a),
                                  a[2, np.arange(64)[:, None], np.arange(48)[None, :] + 48])
    g = ix.mgrid[0:64, 0:96]
    np.testing.assert_array_equal(simulate(_load(lambda x: x[3][g], (64, 96)), a), a[3])
    np.testing.assert_array_equal(simulate(_load(lambda x: x[1, g.p, g.x], (64, 96)), a), a[1])
    # i_p on dim 1, then a trailing slice of dim 2 (NumPy: the advanced dims first)
    np.testing.assert_array_equal(simulate(_load(lambda x: x[0, ix.arange(64)[:, None] * 0 + ix.arange(64)[:, None], 8:24],
                                                 (64, 1, 16)), a), a[0, np.arange(64)[:, None], 8:24])
    # one axis of a second arange: a 3-D grid over a 2-D tensor
    j = ix.arange(2)[None, :, None]
    k = ix.arange(48)[None, None, :]
    want = a[0][np.arange(64)[:, None, None], np.arange(48)[None, None, :] + np.arange(2)[None, :, None] * 48]
    got = simulate(_load(lambda x: x[0][ix.arange(64)[:, None, None], k + j * 48], (64, 2, 48)), a)
    np.testing.assert_array_equal(got, want)


def test_writes_through_expression_views_touch_only_their_elements():
    def kernel(a, out):
        i_p, i_f = ix.arange(64)[:, None], ix.arange(32)[None, :]
        t = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i_p, i_f * 2])            # even columns
        nisa.dma_copy(dst=out[i_p * 2 + 1, 31 - i_f], src=t)   # odd rows, reversed
    a = RNG.standard_normal((64, 64)).astype(np.float32)
    out = np.full((128, 32), -1.0, np.float32)
    simulate(kernel, a, out)
    want = np.full((128, 32), -1.0, np.float32)
    want[np.arange(64)[:, None] * 2 + 1, 31 - np.arange(32)[None, :]] = a[:, ::2]
    np.testing.assert_array_equal(out, want)


# ---- views of on-chip tiles -----------------------------------------------------------------

def test_sbuf_views_stride_the_free_dims_and_transpose_them():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(8)[None, :]
        t = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        even = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=even, src=t[i_p, 2 * i_f])
        odd = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=odd[i_p, i_f], src=t[i_p, 2 * i_f + 1])
        g = ix.mgrid[0:128, 0:4, 0:4]                       # t as (128, 4, 4), F1 <-> F2
        tr = nl.ndarray((128, 4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=tr, src=t.reshape((128, 4, 4))[g.p, g.y, g.x])
        row = nl.ndarray((1, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=row, src=t[5, ix.arange(16)])  # a constant partition: (1, 16)
        return tile_out(even, odd, tr, row)
    a = RNG.standard_normal((128, 16)).astype(np.float32)
    even, odd, tr, row = simulate(kernel, a)
    np.testing.assert_array_equal(even, a[:, 0::2])
    np.testing.assert_array_equal(odd, a[:, 1::2])
    np.testing.assert_array_equal(tr, a.reshape(128, 4, 4).transpose(0, 2, 1))
    np.testing.assert_array_equal(row, a[5:6])


def test_setitem_with_expressions_writes_the_view():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(4)[None, :]
        t = nl.zeros((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        src = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=a)
        t[i_p, 2 * i_f + 1] = src
        return tile_out(t)
    a = RNG.standard_normal((128, 4)).astype(np.float32)
    want = np.zeros((128, 8), np.float32)
    want[:, 1::2] = a
    np.testing.assert_array_equal(simulate(kernel, a), want)


def test_the_same_expression_key_returns_the_memoised_view():
    seen = {}

    def kernel(a):
        i_p, i_f = ix.arange(64)[:, None], ix.arange(8)[None, :]
        seen["same"] = a[i_p, i_f] is a[ix.arange(64)[:, None], ix.arange(8)[None, :]]
        seen["other"] = a[i_p, i_f] is a[i_p, i_f + 1]
    simulate(kernel, np.zeros((64, 16), np.float32))
    assert seen == {"same": True, "other": False}


# ---- bounds and unsupported forms ------------------------------------------------------------

def test_an_out_of_bounds_expression_view_raises_where_an_instruction_uses_it():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(64)[None, :]
        v = a[i_p, i_f + 8]                  # building it is fine (a mask may cover it)
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=v)
    with pytest.raises(BoundsError, match=err(
            "nisa.dma_copy", "src index expression on dim 1 of tensor 'argument 0' (128, 64) reaches 71, outside 0:64")):
        simulate(kernel, np.zeros((128, 64), np.float32))


def test_a_flat_in_storage_but_out_of_dim_view_is_still_out_of_bounds():
    """No wrap into the next row: dim 1 is checked by itself, not the flat storage."""
    def kernel(a):
        t = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[ix.arange(2)[:, None], ix.arange(8)[None, :] + 4])
    with pytest.raises(BoundsError, match="reaches 11, outside 0:8"):
        simulate(kernel, np.zeros((4, 8), np.float32))


def test_an_int_index_out_of_range_raises_at_once():
    def kernel(a):
        a[4, ix.arange(8)]
    with pytest.raises(BoundsError, match=err("tensor indexing", "index 4 on dim 0 of tensor 'argument 0' (4, 8) is outside 0:4")):
        simulate(kernel, np.zeros((4, 8), np.float32))


@pytest.mark.parametrize("key_fn, message", [
    (lambda i_p, i_f: (i_p * 2, i_f), "the partition index of tensor (64, 32) must be c + an index of the "
                                      "first grid axis with step 1"),
    (lambda i_p, i_f: (i_p, i_f + i_p), "a free index of tensor (64, 32) varies with the partition index"),
    (lambda i_p, i_f: (slice(None), i_f), "mixing slices and index expressions is supported only with the slices last"),
])
def test_unsupported_on_chip_forms_raise(key_fn, message):
    def kernel():
        t = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        t[key_fn(ix.arange(16)[:, None], ix.arange(8)[None, :])]
    with pytest.raises(UnsupportedError, match=re.escape(message)):
        simulate(kernel)


def test_two_expressions_per_dim_pooling_windows_and_an_f1_f2_transpose_write():
    """A 5-D window view of a 3-D tile (``pool*i_1 + i_2`` on one dim) and a write through a
    3-D grid over a 2-D tile (``i_f2 * F1 + i_f1``), as the programming guide's index cases do."""
    def kernel(a):
        c, h, w = a.shape
        t = nl.ndarray((c, h, w), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        i0 = ix.arange(c)[:, None, None, None, None]
        i1 = ix.arange(h // 2)[None, :, None, None, None]
        i2 = ix.arange(2)[None, None, :, None, None]
        i3 = ix.arange(w // 2)[None, None, None, :, None]
        i4 = ix.arange(2)[None, None, None, None, :]
        win = nl.ndarray((c, h // 2, 2, w // 2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=win, src=t[i0, 2 * i1 + i2, 2 * i3 + i4])
        flat = nl.ndarray((c, h * w), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=flat, src=a.reshape((c, h * w)))
        i_p, i_f1, i_f2 = ix.arange(c)[:, None, None], ix.arange(h)[None, :, None], ix.arange(w)[None, None, :]
        tr = nl.ndarray((c, w * h), dtype=nl.float32, buffer=nl.sbuf)
        tr[i_p, i_f2 * h + i_f1] = flat[i_p, i_f1 * w + i_f2]
        return tile_out(win, tr)
    a = RNG.standard_normal((16, 6, 8)).astype(np.float32)
    win, tr = simulate(kernel, a)
    np.testing.assert_array_equal(win, a.reshape(16, 3, 2, 4, 2))
    np.testing.assert_array_equal(tr, a.transpose(0, 2, 1).reshape(16, 48))


# ---- gather / scatter views: an index tile on dim 0 ----------------------------------------------

def test_an_index_tile_on_dim_0_gathers_and_scatters_rows():
    def kernel(a, idx, out):
        i_p, i_f = ix.arange(16)[:, None], ix.arange(8)[None, :]
        rows = nl.ndarray((16, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=idx)
        t = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[rows[i_p, 0], i_f + 4])      # row idx[w], columns 4..11
        whole = nl.load(a[rows])                                # whole rows
        nl.store(out[rows, ix.mgrid[0:16, 0:8].x], value=t)     # scattered back, columns 0..7
        return tile_out(t, whole)
    a = RNG.standard_normal((40, 12)).astype(np.float32)
    idx = RNG.permutation(40)[:16].astype(np.int32).reshape(16, 1)
    out = np.zeros((40, 8), np.float32)
    t, whole = simulate(kernel, a, idx, out)
    np.testing.assert_array_equal(t, a[idx[:, 0], 4:12])
    np.testing.assert_array_equal(whole, a[idx[:, 0]])
    want = np.zeros((40, 8), np.float32)
    want[idx[:, 0]] = a[idx[:, 0], 4:12]
    np.testing.assert_array_equal(out, want)


def test_indices_after_an_index_tile_may_not_vary_with_its_rows():
    def kernel(a):
        rows = nl.zeros((16, 1), dtype=nl.int32, buffer=nl.sbuf)
        a[rows, ix.arange(16)[:, None] + ix.arange(4)[None, :]]
    with pytest.raises(UnsupportedError, match="vary along its first axis"):
        simulate(kernel, np.zeros((40, 20), np.float32))
