"""Deferred copies (memory.access.copy_deferred): a same-dtype dma_copy / tensor_copy of a whole
view into a whole on-chip tile may record a view of the source instead of copying. Every test
here writes, reads or frees the source or the tile after such a copy and checks that each read
sees the values of the moment of the copy (expected values computed with NumPy on snapshots)."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import CapacityError, RaceError, UninitializedReadError
from conftest import simulate

F32 = np.float32


def _out(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def test_source_written_after_the_copy_keeps_the_old_values_in_the_tile():
    a = np.arange(32, dtype=F32).reshape(4, 8)

    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)                 # may be deferred
        ones = nl.full((4, 8), 7.0, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=ones)              # the source (a caller array) changes
        out = _out((4, 8))
        nisa.dma_copy(dst=out, src=t)               # the tile still holds a's old values
        return out
    x = a.copy()
    got = simulate(kernel, x)
    np.testing.assert_array_equal(got, a)
    np.testing.assert_array_equal(x, np.full((4, 8), 7, F32))   # the kernel's write reached x


@pytest.mark.parametrize("how", ["tensor_tensor", "tensor_scalar", "matmul", "activation"])
def test_sbuf_source_overwritten_by_an_op_after_the_copy(how):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 8)).astype(F32)
    b = rng.standard_normal((8, 8)).astype(F32)

    def kernel(x, y):
        s = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        keep = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=keep, src=s)           # may be deferred on s
        yt = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=yt, src=y)
        if how == "tensor_tensor":
            nisa.tensor_tensor(dst=s, data1=keep, data2=yt, op=nl.add)     # reads keep, writes s
        elif how == "tensor_scalar":
            nisa.tensor_scalar(dst=s, data=keep, op0=nl.multiply, operand0=3.0)
        elif how == "activation":
            nisa.activation(dst=s, op=nl.exp, data=keep)
        else:
            p = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=p, stationary=keep, moving=yt)
            nisa.tensor_copy(dst=s, src=p)
        out1, out2 = _out((8, 8)), _out((8, 8))
        nisa.dma_copy(dst=out1, src=s)
        nisa.dma_copy(dst=out2, src=keep)
        return out1, out2
    got_s, got_keep = simulate(kernel, a, b)
    np.testing.assert_array_equal(got_keep, a)
    want = {"tensor_tensor": a + b, "tensor_scalar": a * F32(3), "matmul": a.T @ b,
            "activation": np.exp(a)}[how]
    np.testing.assert_allclose(got_s, want, rtol=1e-6, atol=1e-6)


def test_psum_accumulation_after_an_evacuation_keeps_the_evacuated_values():
    """tensor_copy PSUM -> SBUF, then more matmuls accumulate into the same PSUM tile."""
    rng = np.random.default_rng(2)
    l, r = rng.standard_normal((8, 4)).astype(F32), rng.standard_normal((8, 16)).astype(F32)

    def kernel(lhsT, rhs):
        ls = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        rs = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ls, src=lhsT)
        nisa.dma_copy(dst=rs, src=rhs)
        acc = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.psum)
        first = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(dst=acc, stationary=ls, moving=rs)
        nisa.tensor_copy(dst=first, src=acc)
        nisa.nc_matmul(dst=acc, stationary=ls, moving=rs)      # accumulates: acc = 2 * product
        second = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=second, src=acc)
        o1, o2 = _out((4, 16)), _out((4, 16))
        nisa.dma_copy(dst=o1, src=first)
        nisa.dma_copy(dst=o2, src=second)
        return o1, o2
    o1, o2 = simulate(kernel, l, r)
    p = l.T @ r
    np.testing.assert_allclose(o1, p, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(o2, p + p, rtol=1e-6, atol=1e-6)


def test_partial_reads_and_writes_of_a_deferred_tile():
    a = np.arange(64, dtype=F32).reshape(8, 8)

    def kernel(x):
        t = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.memset(dst=t[0:4, 0:2], value=-5.0)        # partial write into the tile itself
        half = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=half, src=t[:, 2:6])        # partial read
        o1, o2 = _out((8, 8)), _out((8, 4))
        nisa.dma_copy(dst=o1, src=t)
        nisa.dma_copy(dst=o2, src=half)
        return o1, o2
    o1, o2 = simulate(kernel, a)
    want = a.copy()
    want[0:4, 0:2] = -5
    np.testing.assert_array_equal(o1, want)
    np.testing.assert_array_equal(o2, a[:, 2:6])
    np.testing.assert_array_equal(a, np.arange(64, dtype=F32).reshape(8, 8))   # input untouched


def test_chained_copies_and_strided_sources():
    a = np.arange(128, dtype=F32).reshape(8, 16)

    def kernel(x):
        t1 = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t1, src=x[:, 3:16:4])         # strided source
        t2 = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t2, src=t1)                 # a copy of a deferred copy
        nisa.memset(dst=t1, value=0.0)                   # the middle tile changes
        o = _out((8, 4))
        nisa.dma_copy(dst=o, src=t2)
        return o
    np.testing.assert_array_equal(simulate(kernel, a), a[:, 3:16:4])


def test_failed_kernel_restores_inputs_and_deferred_tiles_do_not_leak():
    a = np.arange(16, dtype=F32).reshape(4, 4)
    x = a.copy()

    def kernel(x):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        z = nl.full((4, 4), 0.0, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=z)
        nisa.dma_copy(dst=x, src=t[0:8])                # BoundsError: 8 rows of 4
    with pytest.raises(Exception):
        simulate(kernel, x)
    np.testing.assert_array_equal(x, a)


def test_rules_still_see_a_deferred_tile():
    """Strict uninitialised reads, races and the SBUF lifetime model treat the deferred tile as
    written at the copy and used at every read."""
    def uninit(x):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf, name="t")
        u = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf, name="u")
        nisa.tensor_copy(dst=u, src=t)                  # t never written: strict mode raises
        return x
    with pytest.raises(UninitializedReadError, match=r"src reads 16 never-written element\(s\) of sbuf tensor 't'"):
        nki.simulate(uninit, uninitialized_reads="raise")(np.zeros((4, 4), F32))

    def race(x):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf, name="t")
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            u = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=u, src=t)               # u: a deferred copy of t ...
            nisa.dma_copy(dst=out, src=u)                # ... written over out by both: a race
        return out
    with pytest.raises(RaceError):
        nki.simulate(race, detect_races=True)(np.zeros((4, 4), F32))

    big = 110 * 1024    # bytes per partition of one tile; two live ones exceed trn2's usable SBUF

    def capacity(x):
        a = nl.ndarray((128, big // 4), dtype=nl.float32, buffer=nl.sbuf, name="a")
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray((128, big // 4), dtype=nl.float32, buffer=nl.sbuf, name="b")
        nisa.dma_copy(dst=b, src=x)
        o = _out((128, big // 4))
        nisa.tensor_tensor(dst=b, data1=a, data2=b, op=nl.add)   # a is still live here
        nisa.dma_copy(dst=o, src=b)
        return o
    with pytest.raises(CapacityError, match=r"sbuf allocation 'b'"):
        nki.simulate(capacity, target="trn2")(np.ones((128, big // 4), F32))


def test_lnc2_copies_stay_exact():
    a = np.arange(256 * 8, dtype=F32).reshape(256, 8)

    def kernel(x):
        out = _out((256, 8))
        c = nl.program_id(0)
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c * 128:(c + 1) * 128, :])
        nisa.dma_copy(dst=out[c * 128:(c + 1) * 128, :], src=t)
        return out
    np.testing.assert_array_equal(simulate(kernel, a, lnc=2), a)


@pytest.mark.parametrize("then, dtype", [(t, d) for t in ("matmul", "partial", "iadd", "read")
                                          for d in (np.float32, np.int32)
                                          if (t, d) != ("matmul", np.int32)])   # PSUM dst: float
def test_deferred_fill_of_zeros_and_full(then, dtype):
    rng = np.random.default_rng(3)
    l, r = rng.standard_normal((8, 4)).astype(F32), rng.standard_normal((8, 6)).astype(F32)

    def kernel(lhsT, rhs):
        buf = nl.psum if then == "matmul" else nl.sbuf
        z = nl.full((4, 6), 5, dtype=dtype, buffer=buf)
        if then == "matmul":
            ls, rs = nl.load(lhsT), nl.load(rhs)
            nisa.nc_matmul(dst=z, stationary=ls, moving=rs)     # flags clear: overwrites
            res = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=z)
            z = res
        elif then == "partial":
            nisa.memset(dst=z[1:3, 2:4], value=-1)
        elif then == "iadd":
            z += 2
        o = _out((4, 6), dtype)
        nisa.dma_copy(dst=o, src=z)
        return o
    want = np.full((4, 6), 5, dtype)
    if then == "matmul":
        want = l.T @ r
    elif then == "partial":
        want[1:3, 2:4] = -1
    elif then == "iadd":
        want = want + dtype(2)
    got = simulate(kernel, l, r)
    assert got.dtype == np.dtype(want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_in_place_add_onto_a_deferred_copy_is_one_rounding_and_leaves_the_source():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((8, 16)).astype(F32) * F32(1e4)
    b = rng.standard_normal((8, 16)).astype(F32) * F32(1e-3)
    a0 = a.copy()

    def kernel(x, y):
        t = nl.load(x)                  # deferred on x
        t += nl.load(y)                 # one pass: t = x + y
        o = _out((8, 16))
        nl.store(o, t)
        return o
    np.testing.assert_array_equal(simulate(kernel, a, b),
                                  (a.astype(np.float64) + b.astype(np.float64)).astype(F32))
    np.testing.assert_array_equal(a, a0)


@pytest.mark.parametrize("how", ["tensor_tensor", "tensor_scalar", "iadd"])
def test_copy_of_a_tile_into_itself_through_a_permuted_view(how):
    """tensor_copy(dst=a, src=a.permute(...)) then ops reading and writing a (found by review:
    a deferred self-copy was materialised under the operand's feet)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 4, 4)).astype(F32)
    u = rng.standard_normal((8, 4, 4)).astype(F32)

    def kernel(x, y):
        t, uu = nl.load(x), nl.load(y)
        a = nl.ndarray((8, 4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=a, data=t, op0=nl.multiply, operand0=1.0)
        nisa.tensor_copy(dst=a, src=a.permute((0, 2, 1)))
        if how == "tensor_tensor":
            nisa.tensor_tensor(dst=a, data1=a, data2=uu, op=nl.add)
        elif how == "tensor_scalar":
            nisa.tensor_scalar(dst=a, data=a, op0=nl.multiply, operand0=2.0)
        else:
            a += a
        o = _out((8, 4, 4))
        nisa.dma_copy(dst=o, src=a)
        return o
    xt = x.transpose(0, 2, 1)
    want = {"tensor_tensor": xt + u, "tensor_scalar": xt * F32(2), "iadd": xt + xt}[how]
    np.testing.assert_array_equal(simulate(kernel, x, u), want)


def _lnc2_copy_then_peer_writes(x, w):
    """LNC2: each core copies the shared input into a whole tile, core 1 multiplies
    with it (an on-chip reader of the deferred copy), core 0 then overwrites the input, and each
    core stores its tile after that write (a shared-HBM store of the deferred tile)."""
    out = nl.ndarray((2, 8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    prod = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    t = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if me == 1:
        wt = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w)
        ps = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t, moving=wt)
        sb = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        nisa.dma_copy(dst=prod, src=sb)
    nisa.core_barrier(out, (0, 1))
    if me == 0:
        sevens = nl.full((8, 8), 7.0, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=sevens)
    nisa.core_barrier(out, (0, 1))
    nisa.dma_copy(dst=out[me], src=t)
    return out, prod


@pytest.mark.parametrize("fast", [True, False])
def test_lnc2_copies_keep_the_values_of_their_turn(fast):
    from nkisim import trace
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (8, 8)).astype(F32)       # small integers: exact products
    w = rng.integers(-3, 4, (8, 8)).astype(F32)
    x = a.copy()
    with trace.record() as ev:
        out, prod = nki.simulate(_lnc2_copy_then_peer_writes, fast_paths=fast)[2](x, w)
    np.testing.assert_array_equal(out, np.stack([a, a]))
    np.testing.assert_array_equal(prod, a.T @ w)
    np.testing.assert_array_equal(x, np.full((8, 8), 7, F32))
    if not fast:
        assert not +ev.fast_paths


def test_a_copy_into_a_transposing_view_of_a_whole_tile_is_stored_transposed():
    """A view that covers every element of a tile in another order (free dims swapped by
    ``.ap()``) is not the tile's own layout: a copy through it, after a write through it, is
    stored as that view says (read back through the tile: the free dims swapped), deferred or not."""
    a = np.arange(32, dtype=F32).reshape(2, 4, 4)

    def kernel(x):
        out = _out((2, 4, 4))
        t = nl.ndarray((2, 4, 4), dtype=nl.float32, buffer=nl.sbuf)
        tT = t.ap([[16, 2], [1, 4], [4, 4]], offset=0)         # [p, i, j] at p*16 + j*4 + i
        nisa.memset(dst=tT, value=0.0)
        nisa.dma_copy(dst=tT, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out
    for fast in (True, False):
        np.testing.assert_array_equal(nki.simulate(kernel, fast_paths=fast)(a), a.transpose(0, 2, 1))
