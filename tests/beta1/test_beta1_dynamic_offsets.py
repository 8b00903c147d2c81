"""Beta-1 dynamic offsets: a one-element integer SBUF tile inside a tile index
(``t[i_p, offs[0, k] + i_f]``, ``t[i_p, offs[0, k], i_z]``) and ``nisa.tensor_copy_dynamic_src`` /
``tensor_copy_dynamic_dst``. References: NumPy ``take`` / slicing."""
import re

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from nkisim.errors import BoundsError, UnsupportedError

RNG = np.random.default_rng(61)


@nki.jit(mode="simulation")
def gather_columns(src, offs):
    p, n = src.shape[0], offs.shape[1]
    out = nl.ndarray((p, n * 2), dtype=src.dtype, buffer=nl.shared_hbm)
    s = nl.load(src)
    o = nl.load(offs)
    r = nl.ndarray((p, n * 2), dtype=src.dtype, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:p, 0:2]
    for k in nl.affine_range(n):
        r[ix, 2 * k + iy] = nisa.tensor_copy_dynamic_src(s[ix, o[0, k] + iy])
    nl.store(out, r)
    return out


def test_dynamic_src_gathers_column_pairs():
    src = RNG.standard_normal((16, 20)).astype(np.float32)
    offs = np.array([[7, 0, 18, 3]], np.int32)
    want = np.concatenate([src[:, c:c + 2] for c in offs[0]], axis=1)
    np.testing.assert_array_equal(nki.simulate_kernel(gather_columns, src, offs), want)


def test_a_bare_offset_tile_indexes_a_middle_dim():
    src = RNG.standard_normal((8, 10, 3)).astype(np.float32)
    offs = np.array([[9, 2, 5]], np.int32)

    @nki.jit(mode="simulation")
    def k(src, offs):
        out = nl.ndarray((8, 3, 3), dtype=src.dtype, buffer=nl.shared_hbm)
        s, o = nl.load(src), nl.load(offs)
        r = nl.ndarray((8, 3, 3), dtype=src.dtype, buffer=nl.sbuf)
        ix, _, iz = nl.mgrid[0:8, 0:1, 0:3]
        for j in nl.affine_range(3):
            r[ix, j, iz] = nisa.tensor_copy_dynamic_src(s[ix, o[0, j], iz])
        nl.store(out, r)
        return out

    np.testing.assert_array_equal(nki.simulate_kernel(k, src, offs), np.take(src, offs[0], axis=1))


def test_dynamic_dst_scatters_columns():
    src = RNG.standard_normal((4, 3)).astype(np.float32)
    offs = np.array([[5, 1, 8]], np.int32)

    @nki.jit(mode="simulation")
    def k(src, offs):
        out = nl.ndarray((4, 10), dtype=src.dtype, buffer=nl.shared_hbm)
        s, o = nl.load(src), nl.load(offs)
        r = nl.zeros((4, 10), dtype=src.dtype)
        ix, iy = nl.mgrid[0:4, 0:1]
        for j in nl.affine_range(3):
            nisa.tensor_copy_dynamic_dst(dst=r[ix, o[0, j] + iy], src=s[ix, j + iy])
        nl.store(out, r)
        return out

    want = np.zeros((4, 10), np.float32)
    want[:, offs[0]] = src
    np.testing.assert_array_equal(nki.simulate_kernel(k, src, offs), want)


def test_an_offset_past_the_dim_is_a_bounds_error():
    src = RNG.standard_normal((16, 20)).astype(np.float32)
    with pytest.raises(BoundsError, match=r"^nisa\.tensor_copy: "):
        nki.simulate_kernel(gather_columns, src, np.array([[3, 19]], np.int32))


def test_an_offset_must_be_one_integer_sbuf_element():
    @nki.jit(mode="simulation")
    def k(src, offs):
        s, o = nl.load(src), nl.load(offs)
        nisa.tensor_copy_dynamic_src(s[nl.arange(4)[:, None], o[0, 0:2] + nl.arange(2)[None, :]])

    with pytest.raises(UnsupportedError, match=re.escape("a tensor in an index must be a one-element integer "
                                                         "SBUF tile (a dynamic offset), got (1, 2) int32 in sbuf")):
        nki.simulate_kernel(k, np.zeros((4, 8), np.float32), np.zeros((1, 4), np.int32))
