"""Beta-1 masks (``language.indexing.masked``): the instructions issued under a mask neither read
nor write the masked-off elements -- partial last tiles (out of bounds, masked off), dst keeping
its old values, uninitialised reads, reductions, matmul, events, fast paths on and off.
References: NumPy on the kept sub-arrays (nki.api.shared.rst "NKI API Masking")."""
import re

import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import trace
from nkisim.errors import BoundsError, UninitializedReadError, UnsupportedError
from nkisim.language import indexing as ix
from conftest import simulate, tile_out

RNG = np.random.default_rng(11)


def partial_tiles(a):
    """exp of a (n, 64) tensor in 128-row tiles; the last tile is partial (mask i_p + k*128 < n)."""
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = ix.arange(128)[:, None], ix.arange(f)[None, :]
    for k in range((n + 127) // 128):
        rows = k * 128 + i_p
        t = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        with ix.masked(rows < n):
            nisa.dma_copy(dst=t, src=a[rows, i_f])
            nisa.activation(dst=t, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[rows, i_f], src=t[i_p, i_f])
    return out


@pytest.mark.parametrize("n", [300, 256, 5])
def test_partial_last_tile_reads_and_writes_only_the_rows_it_has(n):
    a = RNG.standard_normal((n, 64)).astype(np.float32)
    np.testing.assert_array_equal(simulate(partial_tiles, a), np.exp(a))


def test_partial_tiles_pass_strict_uninitialised_reads_and_agree_with_fast_paths_off():
    """The partial tile's masked-off rows are never written; they are never read either."""
    a = RNG.standard_normal((300, 64)).astype(np.float32)
    fast = nki.simulate(partial_tiles, uninitialized_reads="raise", fast_paths=True)(a)
    slow = nki.simulate(partial_tiles, uninitialized_reads="raise", fast_paths=False)(a)
    assert fast.tobytes() == slow.tobytes()
    np.testing.assert_array_equal(fast, np.exp(a))


def test_without_the_mask_the_partial_tile_is_a_bounds_error():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(64)[None, :]
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[128 + i_p, i_f])
    with pytest.raises(BoundsError, match=r"^nisa\.dma_copy: src index expression on dim 0 of tensor "
                                          r"'argument 0' \(200, 64\) reaches 255, outside 0:200 "):
        simulate(kernel, np.zeros((200, 64), np.float32))


def test_a_mask_that_still_reaches_outside_is_a_bounds_error():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(64)[None, :]
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        with ix.masked(i_p < 100):
            nisa.dma_copy(dst=t, src=a[i_p, i_f])
    with pytest.raises(BoundsError, match="reaches 99, outside 0:64"):
        simulate(kernel, np.zeros((64, 64), np.float32))


def test_masked_off_dst_elements_keep_their_values():
    def kernel(a, b):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(32)[None, :]
        x = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        y = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=y, src=b)
        with ix.masked((i_p >= 16) & (i_p < 80) & (i_f >= 3)):
            nisa.tensor_tensor(dst=y, data1=x, data2=y, op=nl.multiply)
        with ix.masked(i_f < 4):
            nisa.memset(dst=x, value=7.0)
        return tile_out(x, y)
    a = RNG.standard_normal((128, 32)).astype(np.float32)
    b = RNG.standard_normal((128, 32)).astype(np.float32)
    x, y = simulate(kernel, a, b)
    want_y = b.copy()
    want_y[16:80, 3:] = a[16:80, 3:] * b[16:80, 3:]
    want_x = a.copy()
    want_x[:, :4] = 7.0
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(x, want_x)


def test_masked_off_reads_are_not_uninitialised_reads_but_kept_ones_are():
    def kernel(a, rows):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(16)[None, :]
        t = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
        with ix.masked(i_p < 64):
            nisa.dma_copy(dst=t, src=a[i_p, i_f])
        u = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
        with ix.masked(i_p < rows):
            nisa.activation(dst=u, op=nl.copy, data=t)
        return tile_out(u)
    a = RNG.standard_normal((64, 16)).astype(np.float32)
    got = nki.simulate(kernel, uninitialized_reads="raise")(a, 64)
    np.testing.assert_array_equal(got[:64], a)
    with pytest.raises(UninitializedReadError, match="reads 16 never-written element"):
        nki.simulate(kernel, uninitialized_reads="raise")(a, 65)


def test_reductions_see_only_the_kept_elements():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(64)[None, :]
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        s = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        m = nl.zeros((128,), dtype=nl.float32, buffer=nl.sbuf)
        with ix.masked((i_f >= 10) & (i_f < 40) & (i_p < 96)):
            nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1, keepdims=True)
            nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=1)
        return tile_out(s, m)
    a = RNG.standard_normal((128, 64)).astype(np.float32) - 5     # all negative: a 0 fill would show
    s, m = simulate(kernel, a)
    want_s = np.zeros((128, 1), np.float32)
    want_s[:96, 0] = a[:96, 10:40].sum(axis=1, dtype=np.float32)
    want_m = np.zeros((128,), np.float32)
    want_m[:96] = a[:96, 10:40].max(axis=1)
    np.testing.assert_allclose(s, want_s, rtol=1e-6)
    np.testing.assert_array_equal(m, want_m)


def test_matmul_masks_the_contraction_and_the_free_axes():
    def kernel(x, y):
        i_k, i_f = ix.arange(128)[:, None], ix.arange(128)[None, :]
        st = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        mv = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=x)
        nisa.dma_copy(dst=mv, src=y)
        contract = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
        with ix.masked(i_k < 64):
            nisa.nc_matmul(dst=contract, stationary=st, moving=mv)
        free = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
        with ix.masked(i_f < 32):
            nisa.nc_matmul(dst=free, stationary=st, moving=mv)
        return tile_out(contract, free)
    x = RNG.standard_normal((128, 128)).astype(np.float32)
    y = RNG.standard_normal((128, 128)).astype(np.float32)
    contract, free = simulate(kernel, x, y)
    np.testing.assert_allclose(contract, x[:64].T @ y[:64], rtol=1e-4, atol=1e-4)
    want = np.zeros((128, 128), np.float32)
    want[:32, :32] = x[:, :32].T @ y[:, :32]      # both free axes are the mask's axis 1
    np.testing.assert_allclose(free, want, rtol=1e-4, atol=1e-4)


def test_events_say_masked_and_carry_the_kept_shapes():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(64)[None, :]
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        with ix.masked(i_p < 40):
            nisa.dma_copy(dst=t, src=a[i_p, i_f])
        with ix.masked(i_p < 0):                # keeps nothing: no instruction
            nisa.activation(dst=t, op=nl.exp, data=t)
        with ix.masked(False):
            nisa.activation(dst=t, op=nl.exp, data=t)
        with ix.masked(True):
            nisa.activation(dst=t[0:40], op=nl.exp, data=t[0:40])
    with trace.record() as rec:
        simulate(kernel, np.zeros((40, 64), np.float32))
    events = list(rec)
    assert [e.op for e in events] == ["dma_copy", "activation"]
    first, second = events
    assert type(first) is type(second)
    assert first.options["mask"] is True and "mask" not in second.options
    assert [o.shape for o in first.reads + first.writes] == [(40, 64), (40, 64)]


def test_nested_masks_intersect():
    def kernel(a):
        i_p, i_f = ix.arange(128)[:, None], ix.arange(32)[None, :]
        t = nl.zeros((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        with ix.masked(i_p < 100):
            with ix.masked((i_p >= 20) & (i_f < 8)):
                nisa.dma_copy(dst=t, src=a)
        return tile_out(t)
    a = RNG.standard_normal((128, 32)).astype(np.float32)
    want = np.zeros((128, 32), np.float32)
    want[20:100, :8] = a[20:100, :8]
    np.testing.assert_array_equal(simulate(kernel, a), want)


# ---- predicates --------------------------------------------------------------------------------

def test_predicates_are_numpy_boolean_grids():
    i_p, i_f = ix.arange(8)[:, None], ix.arange(6)[None, :]
    p, f = np.arange(8)[:, None], np.arange(6)[None, :]
    for got, want in (((i_p < 5) & (i_f >= 2), (p < 5) & (f >= 2)), (~(i_p < 5), ~(p < 5)),
                      (3 <= i_f, 3 <= f), (i_p * 2 + 1 <= 9, p * 2 + 1 <= 9), (i_f == 4, f == 4)):
        np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(want, np.asarray(got).shape))
        np.testing.assert_array_equal(_kept(got), np.asarray(got))


def _kept(pred):
    """The elements a predicate's Box keeps, as a bool grid."""
    box = pred.box()
    kept = np.zeros(box.shape, bool)
    if not box.empty:
        kept[tuple(slice(*r) if r else slice(None) for r in box.ranges)] = True if box.keep is None else box.keep
    return kept


def test_mask_ranges_of_random_affine_comparisons_match_numpy():
    rng = np.random.default_rng(5)
    for _ in range(400):
        n, k, c = int(rng.integers(1, 40)), int(rng.choice([-3, -2, -1, 1, 2, 3])), int(rng.integers(-60, 60))
        cmp = str(rng.choice(["<", "<=", ">", ">=", "==", "!="]))
        e = ix.arange(n)[:, None] * k + c
        pred = {"<": e < 0, "<=": e <= 0, ">": e > 0, ">=": e >= 0, "==": e == 0, "!=": e != 0}[cmp]
        want = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                "==": np.equal, "!=": np.not_equal}[cmp](np.arange(n) * k + c, 0)
        box = pred.box()
        kept = np.zeros(n, bool)
        if not box.empty:
            r = box.ranges[0]
            kept[slice(*r) if r else slice(None)] = True if box.keep is None else box.keep[:, 0]
        hits = np.flatnonzero(want)
        assert (box.keep is not None) == bool(hits.size and hits[-1] - hits[0] + 1 != hits.size)
        np.testing.assert_array_equal(kept, want, err_msg=f"{k}*g + {c} {cmp} 0, n={n}")


@pytest.mark.parametrize("build, message", [
    (lambda i_p, i_f: 5, "a mask is a predicate over nl.arange / nl.mgrid index expressions"),
])
def test_masks_that_are_not_ranges_raise(build, message):
    i_p, i_f = ix.arange(8)[:, None], ix.arange(6)[None, :]
    with pytest.raises(UnsupportedError, match=re.escape(message)):
        with ix.masked(build(i_p, i_f)):
            pass


# ---- predicates that are not a range of each axis ---------------------------------------------

def test_non_range_predicates_keep_exactly_their_elements():
    i_p, i_f = ix.arange(8)[:, None], ix.arange(6)[None, :]
    for pred in (i_f < i_p, (i_p != 3) & (i_f >= 1), (i_p + i_f <= 6) & (i_p >= 2), i_p - 2 * i_f == 1):
        np.testing.assert_array_equal(_kept(pred), np.broadcast_to(np.asarray(pred), (8, 6)))
        assert pred.box().keep is not None


def triangle(a, b, fast):
    def kernel(a, b):
        gp, gf = ix.mgrid[0:128, 0:64]
        x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=y, src=b)
        with ix.masked((gf < gp) & (gp < 100)):
            nisa.tensor_copy(dst=y, src=x)
        with ix.masked(gp != 7):
            nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=2.0)
        return tile_out(x, y)
    return nki.simulate(kernel, fast_paths=fast)(a, b)


def test_a_triangular_mask_writes_only_its_elements_fast_paths_on_and_off():
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    b = RNG.standard_normal((128, 64)).astype(np.float32)
    p, f = np.mgrid[0:128, 0:64]
    want_y = np.where((f < p) & (p < 100), a, b)
    want_x = np.where(p != 7, a * np.float32(2), a)
    for fast in (True, False):
        x, y = triangle(a, b, fast)
        np.testing.assert_array_equal(y, want_y)
        np.testing.assert_array_equal(x, want_x)


@pytest.mark.parametrize("which, message", [
    ("reduce", "dst (127, 1) is not of the shape of the mask's grid (127, 64)"),
    ("matmul", "nisa.nc_matmul: a mask that is not a range of each axis"),
    ("nested", "nested mask: a mask that is not a range of each axis cannot be nested"),
])
def test_non_range_masks_refuse_what_they_cannot_mean(which, message):
    def kernel(a):
        gp, gf = ix.mgrid[0:128, 0:64]
        x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        if which == "reduce":
            s = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            with ix.masked(gf < gp):
                nisa.tensor_reduce(dst=s, op=nl.add, data=x, axis=1, keepdims=True)
        elif which == "matmul":
            out = nl.zeros((64, 64), dtype=nl.float32, buffer=nl.psum)
            with ix.masked(gf < gp):
                nisa.nc_matmul(dst=out, stationary=x, moving=x)
        else:
            with ix.masked(gp < 100):
                with ix.masked(gf < gp):
                    pass
    with pytest.raises(UnsupportedError, match=re.escape(message)):
        simulate(kernel, np.zeros((128, 64), np.float32))


def test_a_2d_mask_restricts_the_rows_of_3d_operands_on_chip_and_in_hbm():
    def kernel(a):
        i_p = ix.arange(128)[:, None]                    # a 2-D mask over (P, 1)
        g = ix.mgrid[0:128, 0:4, 0:8]
        t = nl.zeros((128, 4, 8), dtype=nl.float32, buffer=nl.sbuf)
        with ix.masked(i_p < 50):
            nisa.dma_copy(dst=t, src=a[g.p, g.x, g.y])    # a is (50, 4, 8): rows 50.. masked off
        return tile_out(t)
    a = RNG.standard_normal((50, 4, 8)).astype(np.float32)
    want = np.zeros((128, 4, 8), np.float32)
    want[:50] = a
    np.testing.assert_array_equal(simulate(kernel, a), want)
