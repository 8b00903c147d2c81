"""bn_stats / bn_aggr against the doc formulas (float64 references, population variance)."""
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.trace
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import MemorySpaceError, ShapeError
from conftest import simulate, tile_out
from _tiles import ps, sb

BF16 = ml_dtypes.bfloat16
LOC = r" \(test_stats\.py:\d+\)$"
# fp32 two-pass statistics of <= 512 values stay within ~1e-6 relative of the float64 values
# (pairwise sums: error ~ log2(n) * 2^-24); 1e-5 leaves margin yet catches any formula slip
# (a wrong count, n - 1 instead of n, or a swapped even/odd group is off by > 1e-3).
TOL = dict(rtol=1e-5, atol=1e-6)


def stats_ref(x):
    """[n, mean, var * n] of the even-index then odd-index elements of each row (float64)."""
    x = x.reshape(x.shape[0], -1).astype(np.float64)
    cols = []
    for g in (x[:, 0::2], x[:, 1::2]):
        n = g.shape[1]
        mean = g.mean(axis=1) if n else np.zeros(len(x))
        cols += [np.full(len(x), n), mean, ((g - mean[:, None]) ** 2).sum(axis=1)]
    return np.stack(cols, axis=1)


def bn_stats(x, dst_dtype=np.float32, target="trn2", dst_shape=None):
    def kernel(x):
        d = nl.ndarray(dst_shape or (x.shape[0], 6), dtype=dst_dtype, buffer=nl.sbuf)
        nisa.bn_stats(d, sb(x))
        return tile_out(d)
    return simulate(kernel, x, target=target)


@pytest.mark.parametrize("shape", [(4, 8), (4, 7), (2, 3, 5), (128, 512), (3, 1)])
def test_bn_stats_even_odd_groups(rng, shape):
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    np.testing.assert_allclose(bn_stats(x), stats_ref(x), **TOL)


def test_bn_stats_one_element_rows_have_empty_odd_group():
    # Decision: an empty group gives count 0, mean 0, M2 0.
    x = np.array([[5.0], [-2.0]], np.float32)
    np.testing.assert_array_equal(bn_stats(x), [[1, 5, 0, 0, 0, 0], [1, -2, 0, 0, 0, 0]])


def test_bn_stats_even_means_even_position():
    x = np.array([[1, 10, 3, 20, 5]], np.float32)
    np.testing.assert_array_equal(bn_stats(x), [[3, 3, 8, 2, 15, 50]])


def test_bn_stats_bf16_dst_rounds_once(rng):
    x = rng.standard_normal((8, 33)).astype(BF16)
    got = bn_stats(x, dst_dtype=BF16)
    # fp32 results are within 1e-6 of the float64 ones, far inside half a bf16 ulp (2^-9) except
    # at rounding ties; compare within one bf16 ulp.
    np.testing.assert_allclose(got.astype(np.float64), stats_ref(x.astype(np.float32)), rtol=2 ** -8, atol=1e-6)
    assert got.dtype == BF16


def test_bn_stats_free_size_limit():
    x = np.ones((2, 513), np.float32)
    with pytest.raises(ShapeError, match=r"^nisa\.bn_stats: data elements per partition 513 exceeds 512 "
                                         r"on trn3" + LOC):
        bn_stats(x, target="trn3")
    np.testing.assert_array_equal(bn_stats(np.ones((2, 512), np.float32))[:, [0, 3]], [[256, 256]] * 2)


def test_bn_stats_dst_needs_six_elements():
    with pytest.raises(ShapeError, match=r"^nisa\.bn_stats: dst has 4 elements per partition, must have 6" + LOC):
        bn_stats(np.ones((2, 8), np.float32), dst_shape=(2, 4))
    with pytest.raises(ShapeError, match=r"^nisa\.bn_stats: data partition dim 2 does not match dst partition "
                                         r"dim 3" + LOC):
        bn_stats(np.ones((2, 8), np.float32), dst_shape=(3, 6))


def test_bn_stats_psum_io(rng):
    x = rng.standard_normal((4, 10)).astype(np.float32)

    def kernel(x):
        d = nl.ndarray((4, 2, 3), dtype=nl.float32, buffer=nl.psum)
        nisa.bn_stats(dst=d, data=ps(x))
        return tile_out(d)
    np.testing.assert_allclose(simulate(kernel, x).reshape(4, 6), stats_ref(x), **TOL)


# ---- bn_aggr ------------------------------------------------------------------------------------

def mean_var(x, chunk=512, dst_dtype=np.float32):
    """bn_stats over chunks of <= 512 elements into consecutive 6-slots, then bn_aggr."""
    p, f = x.shape
    k = -(-f // chunk)

    def kernel(x):
        t = sb(x)
        st_ = nl.ndarray((p, 6 * k), dtype=nl.float32, buffer=nl.sbuf)
        for j in range(k):
            nisa.bn_stats(st_[:, 6 * j:6 * j + 6], t[:, j * chunk:min(f, (j + 1) * chunk)])
        d = nl.ndarray((p, 2), dtype=dst_dtype, buffer=nl.sbuf)
        nisa.bn_aggr(d, st_)
        return tile_out(d)
    return simulate(kernel, x, target="trn2")


@settings(max_examples=20, deadline=None)
@given(p=st.integers(1, 128), f=st.integers(1, 1500), seed=st.integers(0, 2**16))
def test_bn_stats_then_bn_aggr_gives_mean_and_population_variance(p, f, seed):
    x = (np.random.default_rng(seed).standard_normal((p, f)) * 2 - 0.5).astype(np.float32)
    got = mean_var(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got[:, 0], x64.mean(axis=1), **TOL)
    np.testing.assert_allclose(got[:, 1], x64.var(axis=1), **TOL)


def test_bn_aggr_formula_on_arbitrary_triples():
    data = np.array([[2, 1.0, 4.0, 3, -1.0, 6.0, 5, 2.0, 0.5]], np.float32)
    n, m, m2 = data[0, 0::3].astype(np.float64), data[0, 1::3], data[0, 2::3]
    big_n = n.sum()
    mean = (n * m).sum() / big_n
    var = (m2.sum() + (n * (m - mean) ** 2).sum()) / big_n

    def kernel(x):
        d = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(d, sb(x))
        return tile_out(d)
    np.testing.assert_allclose(simulate(kernel, data)[0], [mean, var], **TOL)


def test_bn_aggr_zero_counts():
    # Decision: empty triples contribute nothing; a partition with no elements gives mean 0, var 0.
    data = np.array([[0, 0, 0, 2, 3, 2], [0, 0, 0, 0, 0, 0]], np.float32)

    def kernel(x):
        d = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(d, sb(x))
        return tile_out(d)
    np.testing.assert_array_equal(simulate(kernel, data), [[3, 1], [0, 0]])


def test_bn_aggr_shape_rules():
    def kernel(x, dst_f):
        d = nl.ndarray((2, dst_f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(d, sb(x))
    with pytest.raises(ShapeError, match=r"^nisa\.bn_aggr: data has 7 elements per partition, must be a positive "
                                         r"multiple of 3 \(count, mean, variance\*count\)" + LOC):
        simulate(kernel, np.ones((2, 7), np.float32), 2)
    with pytest.raises(ShapeError, match=r"^nisa\.bn_aggr: dst has 3 elements per partition, must have 2" + LOC):
        simulate(kernel, np.ones((2, 6), np.float32), 3)


def test_bn_aggr_hbm_rejected():
    def kernel(x):
        d = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(d, x)
    with pytest.raises(MemorySpaceError, match=r"^nisa\.bn_aggr: data is in shared_hbm \(HBM\); must be in psum or "
                                               r"sbuf" + LOC):
        simulate(kernel, np.ones((2, 6), np.float32))


# ---- the instruction events and the documented signature ----------------------------------------

def _next_line():
    """The line after the caller's: where the instruction under test is called."""
    return sys._getframe(1).f_lineno + 1


def _operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def test_stats_events_match_the_kernel_calls():
    lines = []

    def kernel(x):
        t = sb(x)
        st_ = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.bn_stats(dst=st_, data=t)
        mv = nl.ndarray((4, 2), dtype=nl.bfloat16, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.bn_aggr(dst=mv, data=st_)
        return tile_out(mv)
    with nkisim.trace.record() as events:
        simulate(kernel, np.ones((4, 10), np.float32))
    ours = [e for e in events if e.op in ("bn_stats", "bn_aggr")]
    assert [(e.op, e.api, e.engine, e.core, e.location) for e in ours] == [
        ("bn_stats", "nisa.bn_stats", "vector", 0, f"test_stats.py:{lines[0]}"),
        ("bn_aggr", "nisa.bn_aggr", "vector", 0, f"test_stats.py:{lines[1]}")]
    assert _operands(ours[0].reads) == [("data", "sbuf", (4, 10), "float32", 160)]
    assert _operands(ours[0].writes) == [("dst", "sbuf", (4, 6), "float32", 96)]
    assert _operands(ours[1].reads) == [("data", "sbuf", (4, 6), "float32", 96)]
    assert _operands(ours[1].writes) == [("dst", "sbuf", (4, 2), "bfloat16", 16)]
    assert ours[1].writes[0].alloc != ours[0].writes[0].alloc == ours[1].reads[0].alloc


def test_stats_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x):
        d = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.bn_stats(dst=d, data=sb(x), nme="stats")
    with pytest.raises(TypeError) as info:
        simulate(kernel, np.ones((4, 10), np.float32))
    assert str(info.value) == (f"nisa.bn_stats() got an unexpected keyword argument 'nme'; did you mean "
                               f"'name'? (test_stats.py:{lines[0]})")
