"""Tile inspection: ``print(tile)`` / ``repr(tile)`` preview the values (NumPy's formatting, with
shape, dtype and buffer) and ``np.asarray(tile)`` gives them, so print-debugging works ("you can use
print() to inspect any intermediate tensor", aws-neuron-sdk nki/guides/nki_simulator.rst).
Reading for display is not an instruction read: no uninitialised-read error, no race, no effect on
tile lifetimes; never-written elements show as stored (the NaN / 4 sentinels)."""
import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import RaceError, UninitializedReadError
from conftest import simulate


def _load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def test_repr_shows_numpy_values_and_metadata():
    seen = {}

    def kernel(x):
        t = _load(x)
        seen["repr"], seen["str"], seen["arr"] = repr(t), str(t), np.asarray(t)
        n = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf, name="acc")
        seen["named"] = repr(n)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    simulate(kernel, x)
    body = np.array2string(x, separator=", ", prefix="NkiTensor(")
    assert seen["repr"] == f"NkiTensor({body}, shape=(2, 3), dtype=float32, buffer=sbuf)"
    assert seen["str"] == seen["repr"]
    np.testing.assert_array_equal(seen["arr"], x)
    assert seen["arr"].dtype == np.float32
    nan = np.array2string(np.full((2, 3), np.nan, np.float32), separator=", ", prefix="NkiTensor(")
    assert seen["named"] == f"NkiTensor({nan}, shape=(2, 3), dtype=float32, buffer=sbuf, name='acc')"


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, ml_dtypes.bfloat16, np.float16])
def test_asarray_keeps_the_tile_dtype(dtype, rng):
    seen = {}
    x = (rng.standard_normal((4, 5)) * 20).astype(dtype)

    def kernel(x):
        seen["a"] = np.asarray(_load(x))
        seen["f"] = np.asarray(_load(x), dtype=np.float32)
    simulate(kernel, x)
    assert seen["a"].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(seen["a"], x)
    np.testing.assert_array_equal(seen["f"], x.astype(np.float32))


def test_views_print_their_own_elements(rng):
    seen = {}
    x = rng.standard_normal((8, 6)).astype(np.float32)

    def kernel(x):
        t = _load(x)
        seen["v"] = np.asarray(t[2:6, 1:6:2])
        seen["h"] = np.asarray(x[1])
    simulate(kernel, x)
    np.testing.assert_array_equal(seen["v"], x[2:6, 1:6:2])
    np.testing.assert_array_equal(seen["h"], x[1])


def test_asarray_is_a_copy():
    seen = {}

    def kernel(x):
        t = _load(x)
        a = np.asarray(t)
        a[...] = 99
        seen["after"] = np.asarray(t)
    x = np.ones((2, 2), np.float32)
    simulate(kernel, x)
    np.testing.assert_array_equal(seen["after"], x)


def test_print_uninitialised_tile_in_strict_mode_shows_sentinels(monkeypatch, capsys):
    """NKISIM strict uninitialised reads: printing is not a read; values show as stored."""
    monkeypatch.setenv("NKISIM_STRICT_UNINIT", "1")

    def kernel(x):
        f = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((2, 2), dtype=nl.int32, buffer=nl.sbuf)
        print(f)
        print(i)
        assert np.isnan(np.asarray(f)).all()
        assert (np.asarray(i) == 4).all()
        return x
    simulate(kernel, np.zeros((1, 1), np.float32))
    out = capsys.readouterr().out
    assert "nan" in out and "dtype=int32" in out and "[[4, 4]" in out

    def reads(x):                       # the same tile read by an instruction does raise
        f = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf), src=f)
    with pytest.raises(UninitializedReadError):
        simulate(reads, np.zeros((1, 1), np.float32))


def test_print_under_race_detection_is_not_an_access(monkeypatch):
    """A tile written in one affine_range iteration and printed in another is not a race."""
    monkeypatch.setenv("NKISIM_DETECT_RACES", "1")
    seen = []

    def kernel(x):
        t = _load(x)
        for i in nl.affine_range(2):
            seen.append(repr(t))
            u = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=u, src=t)
        for i in nl.affine_range(2):
            nisa.memset(dst=t[i:i + 1], value=float(i))
            seen.append(np.asarray(t))
        return x
    simulate(kernel, np.ones((2, 2), np.float32))
    assert len(seen) == 4

    def racy(x):                        # a lost HBM write stays a race when printed in between
        out = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        t = _load(x)
        for i in nl.affine_range(2):
            nisa.dma_copy(dst=out, src=t)          # every iteration overwrites all of out
            seen.append(repr(out))                 # printing is no read: the write is still lost
        return out
    with pytest.raises(RaceError):
        simulate(racy, np.ones((2, 2), np.float32))


def test_print_does_not_extend_a_tile_lifetime():
    """Capacity: a tile last used by an instruction is dead even if printed later (the sweep
    counts instruction uses only). Two 100 KiB-per-partition tiles fit in sequence on trn1."""
    def kernel(x):
        a = nl.ndarray((128, 25600), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=a, value=1.0)
        b = nl.ndarray((128, 25600), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=b, value=2.0)
        repr(a)
        return x
    simulate(kernel, np.zeros((1, 1), np.float32), target="trn1")


def test_print_of_an_out_of_bounds_dynamic_view_does_not_raise():
    seen = {}

    def kernel(x):
        r = nisa.register_alloc(9)
        t = _load(x)
        v = t.ap([[4, 2], [1, 4]], scalar_offset=r, indirect_dim=1)
        seen["r"] = repr(v)
        return x
    simulate(kernel, np.zeros((2, 4), np.float32))
    assert seen["r"].startswith("NkiTensor(<NkiTensor: view of tensor (2, 4) reaches element 16")
    assert seen["r"].endswith("shape=(2, 4), dtype=float32, buffer=sbuf)")


def test_large_tiles_are_summarised_like_numpy():
    seen = {}

    def kernel(x):
        seen["r"] = repr(_load(x))
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    simulate(kernel, x)
    assert "..." in seen["r"] and seen["r"].endswith("shape=(128, 64), dtype=float32, buffer=sbuf)")
    assert len(seen["r"]) < 2000


def test_device_print_still_prints(capsys):
    def kernel(x):
        nl.device_print("x =", _load(x))
        return x
    simulate(kernel, np.arange(4, dtype=np.float32).reshape(2, 2))
    assert capsys.readouterr().out.startswith("x = [[0. 1.]")


def test_nki_module_is_importable():
    assert nki.simulate is not None
