"""The random-number family against a pure-Python XORWOW written from Marsaglia's recurrence, and
statistical checks (fixed seeds, tolerances a broken generator or a wrong distribution fails)."""
import numpy as np
import pytest

import nkisim.trace
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import ArgumentError, DtypeError, EngineError, MemorySpaceError, ShapeError, UnsupportedError
from conftest import simulate, tile_out
from _tiles import ps, sb

LOC = r" \(test_random\.py:\d+\)$"
M32 = 0xFFFFFFFF
MARSAGLIA = (123456789, 362436069, 521288629, 88675123, 5783321, 6615241)   # x, y, z, w, v, d


def xorwow(state, n):
    """n outputs of one XORWOW generator (Marsaglia 2003), in Python ints."""
    x, y, z, w, v, d = state
    out = []
    for _ in range(n):
        t = x ^ (x >> 2)
        x, y, z, w = y, z, w, v
        v = (v ^ ((v << 4) & M32)) ^ (t ^ ((t << 1) & M32))
        d = (d + 362437) & M32
        out.append((v + d) & M32)
    return out


def _states(p, words, base=MARSAGLIA):
    """(p, words) uint32: lane i, generator g starts from Marsaglia's seeds shifted by (i, g)."""
    s = np.array([[(base[j % 6] + 1000 * i + 7 * (j // 6)) & M32 for j in range(words)] for i in range(p)],
                 np.uint32)
    return s


def _set_then(kernel_body, seeds, target="trn2"):
    def kernel(seeds):
        return kernel_body(sb(seeds))
    return simulate(kernel, seeds, target=target)


# ---- the generator itself -------------------------------------------------------------------------

def test_gpsimd_rng_is_xorwow_per_lane():
    seeds = _states(3, 6)

    def body(s):
        nisa.rand_set_state(src_seeds=s)
        d = nl.ndarray((3, 2, 5), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(d, engine=nisa.engine.gpsimd)
        return tile_out(d)
    got = _set_then(body, seeds)
    want = np.array([xorwow([int(w) for w in seeds[i]], 10) for i in range(3)], np.uint32).reshape(3, 2, 5)
    np.testing.assert_array_equal(got, want)


def test_vector_rng_interleaves_four_generators_per_lane():
    """Decision: on Vector, element j of a lane comes from its generator j % 4."""
    seeds = _states(2, 24)

    def body(s):
        nisa.rand_set_state(src_seeds=s, engine=nisa.engine.vector)
        d = nl.ndarray((2, 10), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(d)
        return tile_out(d)
    got = _set_then(body, seeds, target="trn3")
    for i in range(2):
        gens = [xorwow([int(w) for w in seeds[i, 6 * g:6 * g + 6]], 3) for g in range(4)]
        np.testing.assert_array_equal(got[i], [gens[j % 4][j // 4] for j in range(10)])


@pytest.mark.parametrize("dt, np_dt", [(nl.int8, np.int8), (nl.uint16, np.uint16), (nl.int32, np.int32)])
def test_rng_keeps_the_least_significant_bits(dt, np_dt):
    seeds = _states(2, 6)

    def body(s):
        nisa.rand_set_state(src_seeds=s)
        d = nl.ndarray((2, 6), dtype=dt, buffer=nl.sbuf)
        nisa.rng(d, engine=nisa.engine.gpsimd)
        return tile_out(d)
    got = _set_then(body, seeds)
    bits = np.array([xorwow([int(w) for w in seeds[i]], 6) for i in range(2)], np.uint64)
    bits = bits & ((1 << (8 * np.dtype(np_dt).itemsize)) - 1)
    want = bits.astype(f"u{np.dtype(np_dt).itemsize}").view(np_dt)
    np.testing.assert_array_equal(got, want)


def test_state_round_trip_replays_the_stream():
    def kernel(x):
        s = nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(dst=s)
        a = nl.ndarray((128, 64), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(a, engine=nisa.engine.gpsimd)
        after = nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(dst=after)
        nisa.rand_set_state(src_seeds=s)
        b = nl.ndarray((128, 64), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(b, engine=nisa.engine.gpsimd)
        return tile_out(s, a, after, b)
    s, a, after, b = simulate(kernel, np.zeros((1, 1), np.float32), target="trn2")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(s, after)             # the draw advanced the state
    np.testing.assert_array_equal(a[5, :8], xorwow([int(w) for w in s[5]], 8))   # power-on state is XORWOW too


def test_vector_state_round_trip_on_trn3():
    def kernel(x):
        s = nl.ndarray((16, 24), dtype=nl.uint32, buffer=nl.psum)
        nisa.rand_get_state(dst=s, engine=nisa.engine.vector)
        a = nl.ndarray((16, 40), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(a, -1.0, 1.0)
        t = nl.ndarray((16, 24), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=s)
        nisa.rand_set_state(src_seeds=t, engine=nisa.engine.vector)
        b = nl.ndarray((16, 40), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(b, -1.0, 1.0)
        return tile_out(a, b)
    a, b = simulate(kernel, np.zeros((1, 1), np.float32), target="trn3")
    np.testing.assert_array_equal(a, b)


def test_set_state_of_some_lanes_leaves_the_others():
    def kernel(x):
        a = nl.ndarray((4, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(a)
        seeds = sb(x)
        nisa.rand_set_state(seeds[0:2, :])
        b = nl.ndarray((4, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(b)
        return tile_out(a, b)
    x = _states(2, 6)
    a, b = simulate(kernel, x, target="trn2")
    np.testing.assert_array_equal(b[:2], x)
    np.testing.assert_array_equal(b[2:], a[2:])


# ---- distribution and determinism --------------------------------------------------------------------

def _rand2(lo, hi, shape=(128, 512), seed=None, target="trn3", dtype=nl.float32):
    def kernel(x):
        if seed is not None:
            s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.memset(s, seed)
            nisa.set_rng_seed(s)
        d = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
        nisa.rand2(d, lo, hi)
        return tile_out(d)
    return simulate(kernel, np.zeros((1, 1), np.float32), target=target)


def test_rand2_is_uniform_in_min_max():
    u = _rand2(-2.0, 3.0, seed=7).astype(np.float64)
    n = u.size
    assert u.min() >= -2.0 and u.max() < 3.0
    assert abs(u.mean() - 0.5) < 4 * 5 / np.sqrt(12 * n)           # 4 sigma of the mean
    assert abs(u.var() - 25 / 12) < 0.02 * 25 / 12
    counts = np.histogram(u, bins=20, range=(-2, 3))[0]
    expected = n / 20
    assert ((counts - expected) ** 2 / expected).sum() < 45          # chi-square, 19 dof (p ~ 1e-3)
    rows = u[:, :256] - 0.5
    c = np.corrcoef(rows)
    assert np.abs(c[~np.eye(128, dtype=bool)]).max() < 0.3           # lanes are independent streams
    assert abs(np.corrcoef(u[:, :-1].ravel(), u[:, 1:].ravel())[0, 1]) < 0.02   # no lag-1 correlation


def test_rand2_per_partition_range():
    def kernel(lo, hi):
        d = nl.ndarray((4, 2048), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(d, sb(lo), sb(hi))
        return tile_out(d)
    lo = np.array([[0], [10], [-5], [100]], np.float32)
    hi = np.array([[1], [20], [-4], [101]], np.float32)
    got = simulate(kernel, lo, hi, target="trn3")
    assert (got >= lo).all() and (got < hi).all()
    mid, width = ((lo + hi) / 2)[:, 0], (hi - lo)[:, 0]
    assert (np.abs(got.mean(axis=1) - mid) < 0.03 * width).all()


def test_rand2_bf16_rounds_once():
    seeds = _states(4, 24)

    def kernel(s):
        nisa.rand_set_state(sb(s), engine=nisa.engine.vector)
        d = nl.ndarray((4, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.rand2(d, 0.0, 4.0)
        return tile_out(d)
    got = simulate(kernel, seeds, target="trn3")
    import ml_dtypes
    bits = np.array([[xorwow([int(w) for w in seeds[i, 6 * (j % 4):6 * (j % 4) + 6]], 2)[j // 4]
                      for j in range(8)] for i in range(4)], np.uint64)
    u = (bits >> 8).astype(np.float32) * np.float32(2.0 ** -24)
    want = (np.float32(0) + u * np.float32(4)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_same_seed_same_stream_different_seed_different():
    a = _rand2(0.0, 1.0, shape=(8, 64), seed=42)
    b = _rand2(0.0, 1.0, shape=(8, 64), seed=42)
    c = _rand2(0.0, 1.0, shape=(8, 64), seed=43)
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.99


def test_unseeded_stream_is_the_same_every_launch_and_advances_within_one():
    def kernel(x):
        a = nl.ndarray((8, 64), dtype=nl.uint32, buffer=nl.sbuf)
        b = nl.ndarray((8, 64), dtype=nl.uint32, buffer=nl.sbuf)
        g = nl.ndarray((8, 64), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(a)
        nisa.rng(b)
        nisa.rng(g, engine=nisa.engine.gpsimd)
        return tile_out(a, b, g)
    x = np.zeros((1, 1), np.float32)
    a1, b1, g1 = simulate(kernel, x, target="trn2")
    a2, b2, g2 = simulate(kernel, x, target="trn2")
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(g1, g2)
    assert (a1 != b1).mean() > 0.99 and (a1 != g1).mean() > 0.99     # engines: independent streams
    assert len(np.unique(a1)) > 0.99 * a1.size


def test_seed_reproduces_after_draws_and_leaves_gpsimd_alone():
    def kernel(x):
        s = nl.ndarray((1, 1), dtype=nl.uint32, buffer=nl.psum)
        nisa.memset(s, 5)
        g0 = nl.ndarray((2, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(g0)
        nisa.set_rng_seed(s)
        a = nl.ndarray((8, 32), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(a)
        nisa.set_rng_seed(s)
        b = nl.ndarray((8, 32), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(b)
        g1 = nl.ndarray((2, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(g1)
        return tile_out(a, b, g0, g1)
    a, b, g0, g1 = simulate(kernel, np.zeros((1, 1), np.float32), target="trn2")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(g0, g1)


def test_float32_seed_is_its_bits():
    def kernel(x):
        f = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(f, 1.0)
        i = nl.ndarray((1, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(i, 0x3F800000)
        nisa.set_rng_seed(f)
        a = nl.ndarray((2, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(a)
        nisa.set_rng_seed(i)
        b = nl.ndarray((2, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(b)
        return tile_out(a, b)
    a, b = simulate(kernel, np.zeros((1, 1), np.float32), target="trn2")
    np.testing.assert_array_equal(a, b)


# ---- dropout ---------------------------------------------------------------------------------------------

def _dropout(x, prob, dst_dtype=None, target="trn2"):
    args = (x,) + ((prob,) if isinstance(prob, np.ndarray) else ())

    def kernel(x, *pr):
        d = nl.ndarray(x.shape, dtype=dst_dtype or x.dtype, buffer=nl.sbuf)
        nisa.dropout(d, sb(x), sb(pr[0]) if pr else prob)
        return tile_out(d)
    return simulate(kernel, *args, target=target)


def test_dropout_rate_and_unscaled_survivors(rng):
    x = rng.uniform(1, 2, (128, 512)).astype(np.float32)
    got = _dropout(x, 0.3)
    dropped = got == 0
    n = x.size
    assert abs(dropped.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)
    np.testing.assert_array_equal(got[~dropped], x[~dropped])        # Decision: survivors not rescaled
    assert 0.2 < dropped.mean(axis=1).min() and dropped.mean(axis=1).max() < 0.4


def test_dropout_prob_zero_keeps_all_one_drops_all(rng):
    x = rng.standard_normal((16, 100)).astype(np.float32)
    np.testing.assert_array_equal(_dropout(x, 0.0), x)
    np.testing.assert_array_equal(_dropout(x, 1.0), np.zeros_like(x))


def test_dropout_per_partition_prob_and_exact_int_data():
    x = np.full((8, 4096), 2**30 + 1, np.int32)
    prob = (np.arange(8, dtype=np.float32) / 7).reshape(8, 1)
    got = _dropout(x, prob)
    assert set(np.unique(got)) <= {0, 2**30 + 1}
    rates = (got == 0).mean(axis=1)
    np.testing.assert_allclose(rates, prob[:, 0], atol=4 * np.sqrt(0.25 / 4096))
    assert rates[0] == 0 and rates[7] == 1


def test_dropout_rules():
    x = np.ones((2, 4), np.float32)
    with pytest.raises(DtypeError, match=r"^nisa\.dropout: dst dtype bfloat16 must match data dtype float32" + LOC):
        _dropout(x, 0.5, dst_dtype=nl.bfloat16)
    with pytest.raises(ArgumentError, match=r"^nisa\.dropout: prob 1\.5 is outside \[0, 1\]" + LOC):
        _dropout(x, 1.5)

    def kernel(x, p):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dropout(d, sb(x), sb(p, nl.bfloat16))
    xi, p = np.ones((2, 4), np.int32), np.full((2, 1), 0.5, np.float32)
    with pytest.raises(DtypeError, match=r"^nisa\.dropout: prob dtype bfloat16 must be float32 for int32 data" + LOC):
        simulate(kernel, xi, p)
    simulate(kernel, x, p)                                          # float data: any float prob
    with pytest.raises(ShapeError, match=r"^nisa\.dropout: prob must be a scalar or a \(2, 1\) tensor, got shape "
                                         r"\(2, 4\)" + LOC):
        _dropout(x, x)


# ---- rules --------------------------------------------------------------------------------------------

def _run(body, target="trn2"):
    def kernel(x):
        body()
    return simulate(kernel, np.zeros((1, 1), np.float32), target=target)


def _t(shape, dtype=nl.uint32, buffer=nl.sbuf):
    return nl.ndarray(shape, dtype=dtype, buffer=buffer)


def test_rng_rules():
    with pytest.raises(EngineError, match=r"^nisa\.rng: engine gpsimd is not supported on trn1; expected vector" + LOC):
        _run(lambda: nisa.rng(_t((2, 4)), engine=nisa.engine.gpsimd), target="trn1")
    _run(lambda: nisa.rng(_t((2, 4), buffer=nl.psum)), target="trn1")
    with pytest.raises(MemorySpaceError, match=r"^nisa\.rng: dst is in psum; must be in sbuf" + LOC):
        _run(lambda: nisa.rng(_t((2, 4), buffer=nl.psum), engine=nisa.engine.gpsimd))
    with pytest.raises(DtypeError, match=r"^nisa\.rng: dst dtype float32 is not supported on trn2; expected one of "
                                         r"int8, int16, int32, uint8, uint16, uint32" + LOC):
        _run(lambda: nisa.rng(_t((2, 4), nl.float32)))
    with pytest.raises(EngineError, match=r"^nisa\.rng: engine scalar is not supported on trn2; expected gpsimd or "
                                          r"vector" + LOC):
        _run(lambda: nisa.rng(_t((2, 4)), engine=nisa.engine.scalar))


def test_rand2_rules():
    with pytest.raises(UnsupportedError, match=r"^nisa\.rand2: needs trn3 or newer, not supported on trn2" + LOC):
        _rand2(0.0, 1.0, shape=(2, 4), target="trn2")
    with pytest.raises(ArgumentError, match=r"^nisa\.rand2: min 1\.0 must be less than max 1\.0" + LOC):
        _rand2(1.0, 1.0, shape=(2, 4))
    with pytest.raises(DtypeError, match=r"^nisa\.rand2: dst dtype bool is not supported on trn3" ):
        _rand2(0.0, 1.0, shape=(2, 4), dtype=nl.bool_)

    def kernel(lo, hi):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(d, sb(lo), sb(hi))
    lo, hi = np.zeros((2, 1), np.float32), np.array([[1], [0]], np.float32)
    with pytest.raises(ArgumentError, match=r"^nisa\.rand2: min must be less than max; partition 1 has min 0\.0 and "
                                            r"max 0\.0" + LOC):
        simulate(kernel, lo, hi, target="trn3")
    with pytest.raises(DtypeError, match=r"^nisa\.rand2: min dtype bfloat16 must be float32" + LOC):
        _rand2_tile_dtype()


def _rand2_tile_dtype():
    def kernel(lo):
        d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(d, sb(lo, nl.bfloat16), 1.0)
    simulate(kernel, np.zeros((2, 1), np.float32), target="trn3")


def test_seed_rules():
    with pytest.raises(ShapeError, match=r"^nisa\.set_rng_seed: src_seeds must be a \[1, 1\] tensor, got shape "
                                         r"\(1, 2\)" + LOC):
        _run(lambda: nisa.set_rng_seed(_t((1, 2))))
    with pytest.raises(DtypeError, match=r"^nisa\.set_rng_seed: src_seeds dtype int16 is not a 32-bit value; "
                                         r"expected one of int32, uint32, float32" + LOC):
        _run(lambda: nisa.set_rng_seed(_t((1, 1), nl.int16)))


def test_state_rules():
    with pytest.raises(UnsupportedError, match=r"^nisa\.rand_set_state: needs trn2 or newer, not supported on "
                                               r"trn1" + LOC):
        _run(lambda: nisa.rand_set_state(_t((2, 6))), target="trn1")
    with pytest.raises(EngineError, match=r"^nisa\.rand_get_state: engine vector is not supported on trn2; "
                                          r"expected gpsimd" + LOC):
        _run(lambda: nisa.rand_get_state(_t((2, 24)), engine=nisa.engine.vector))
    with pytest.raises(ShapeError, match=r"^nisa\.rand_set_state: src_seeds must hold 6 XORWOW state words per "
                                         r"partition on the gpsimd engine, got 5" + LOC):
        _run(lambda: nisa.rand_set_state(_t((2, 5))))
    with pytest.raises(ShapeError, match=r"^nisa\.rand_get_state: dst must hold 24 XORWOW state words per "
                                         r"partition on the vector engine, got 6" + LOC):
        _run(lambda: nisa.rand_get_state(_t((2, 6)), engine=nisa.engine.vector), target="trn3")
    with pytest.raises(ShapeError, match=r"^nisa\.rand_get_state: dst must be a 2D tensor \(lanes, state words\), "
                                         r"got shape \(2, 2, 3\)" + LOC):
        _run(lambda: nisa.rand_get_state(_t((2, 2, 3))))
    with pytest.raises(DtypeError, match=r"^nisa\.rand_set_state: src_seeds dtype int32 must be uint32" + LOC):
        _run(lambda: nisa.rand_set_state(_t((2, 6), nl.int32)))
    with pytest.raises(MemorySpaceError, match=r"^nisa\.rand_set_state: src_seeds is in psum; must be in sbuf" + LOC):
        _run(lambda: nisa.rand_set_state(_t((2, 24), buffer=nl.psum), engine=nisa.engine.vector), target="trn3")
    with pytest.raises(MemorySpaceError, match=r"^nisa\.rand_get_state: dst is in psum; must be in sbuf" + LOC):
        _run(lambda: nisa.rand_get_state(_t((2, 6), buffer=nl.psum)))            # trn2: SBUF only
    with pytest.raises(MemorySpaceError, match=r"^nisa\.rand_get_state: dst is in psum; must be in sbuf" + LOC):
        _run(lambda: nisa.rand_get_state(_t((2, 6), buffer=nl.psum)), target="trn3")   # GpSimd: no PSUM
    _run(lambda: nisa.rand_get_state(_t((2, 24), buffer=nl.psum), engine=nisa.engine.vector), target="trn3")


def test_a_broken_rule_leaves_the_state_alone():
    """A failed instruction draws nothing: under findings="warn" the stream goes on as if it never ran."""
    def kernel(x):
        a = nl.ndarray((2, 4), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(a)
        return tile_out(a)

    def kernel_bad(x):
        bad = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rng(bad)
        a = nl.ndarray((2, 4), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(a)
        return tile_out(a)
    x = np.zeros((1, 1), np.float32)
    want = simulate(kernel, x, target="trn2")
    import nkisim.nki as nki
    got = nki.simulate(kernel_bad, target="trn2", findings="warn")(x)
    np.testing.assert_array_equal(got, want)


# ---- events ----------------------------------------------------------------------------------------

def test_random_events():
    def kernel(x):
        s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(s, 1)
        nisa.set_rng_seed(s)
        a = nl.ndarray((4, 8), dtype=nl.uint16, buffer=nl.sbuf)
        nisa.rng(a, engine=nisa.engine.gpsimd)
        d = nl.ndarray((4, 8), dtype=nl.uint16, buffer=nl.sbuf)
        nisa.dropout(d, a, 0.25)
    with nkisim.trace.record() as events:
        simulate(kernel, np.zeros((1, 1), np.float32), target="trn2")
    ev = {e.op: e for e in events}
    assert (ev["set_rng_seed"].engine, [o.role for o in ev["set_rng_seed"].reads]) == ("vector", ["src_seeds"])
    assert ev["rng"].engine == "gpsimd" and ev["rng"].options == {"engine": "gpsimd"}
    assert [(o.role, o.shape, o.dtype, o.nbytes) for o in ev["rng"].writes] == [("dst", (4, 8), "uint16", 64)]
    assert ev["dropout"].engine == "vector" and ev["dropout"].options == {"prob": 0.25}
    assert [o.role for o in ev["dropout"].reads] == ["data"]


def test_lnc2_cores_draw_their_own_streams_and_a_seed_fixes_both():
    def kernel(x):
        out = nl.ndarray((2, 2, 4, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        c = nl.program_id(0)
        a = nl.ndarray((4, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(a)
        nisa.dma_copy(dst=out[c, 0], src=a)
        s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(s, 3)
        nisa.set_rng_seed(s)
        b = nl.ndarray((4, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(b)
        nisa.dma_copy(dst=out[c, 1], src=b)
        return out
    out = simulate(kernel, np.zeros((1, 1), np.float32), target="trn2", lnc=2)
    assert (out[0, 0] != out[1, 0]).all()            # power-on state: per core
    np.testing.assert_array_equal(out[0, 1], out[1, 1])   # Decision: the seed alone fixes the state
