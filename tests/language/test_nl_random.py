"""nl.rand, nl.dropout, nl.random_seed against their doc pages: uniform [0, 1) values, the same
seed giving the same values (the doc example), zeroed elements at the given rate, one instruction
each (on the Vector engine's XORWOW lanes, see nisa.rng)."""
import ml_dtypes
import numpy as np
import pytest

import nkisim.trace
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import ArgumentError, DtypeError
from conftest import simulate, tile_out

F32, BF16 = np.float32, ml_dtypes.bfloat16
LOC = r" \(test_nl_random\.py:\d+\)$"


def test_rand_doc_example_uniform_in_0_1():
    def kernel(x):
        a = nl.rand((128, 512), dtype=nl.float32)
        return tile_out(a)
    a = simulate(kernel, np.zeros((1, 1), F32)).astype(np.float64)
    assert a.min() >= 0 and a.max() < 1
    assert abs(a.mean() - 0.5) < 4 / np.sqrt(12 * a.size)
    assert abs(a.var() - 1 / 12) < 0.02 / 12
    counts = np.histogram(a, bins=16, range=(0, 1))[0]
    assert ((counts - a.size / 16) ** 2 / (a.size / 16)).sum() < 40     # chi-square, 15 dof


def test_random_seed_doc_example_same_seed_same_values():
    def kernel(x):
        seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
        nl.random_seed(seed)
        a = nl.rand((128, 64), dtype=nl.float32)
        c = nl.rand((128, 64), dtype=nl.float32)
        nl.random_seed(seed)
        b = nl.rand((128, 64), dtype=nl.float32)
        other = nl.full((1, 1), 43, dtype=nl.int32, buffer=nl.sbuf)
        nl.random_seed(other)
        d = nl.rand((128, 64), dtype=nl.float32)
        return tile_out(a, b, c, d)
    a, b, c, d = simulate(kernel, np.zeros((1, 1), F32))
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.99 and (a != d).mean() > 0.99


def test_rand_equals_rand2_zero_one_and_hbm_bf16():
    """On trn3 nl.rand's values are nisa.rand2(min=0, max=1)'s from the same state."""
    def kernel(x):
        s = nl.ndarray((1, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(s, 9)
        nisa.set_rng_seed(s)
        a = nl.rand((16, 40), dtype=nl.float32)
        nisa.set_rng_seed(s)
        b = nl.ndarray((16, 40), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(b, 0.0, 1.0)
        h = nl.rand((300, 7), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        return tile_out(a, b), h
    (a, b), h = simulate(kernel, np.zeros((1, 1), F32), target="trn3")
    np.testing.assert_array_equal(a, b)
    assert h.shape == (300, 7) and h.dtype == BF16
    hf = h.astype(np.float64)
    assert hf.min() >= 0 and hf.max() <= 1 and abs(hf.mean() - 0.5) < 0.05 and len(np.unique(hf)) > 100


def test_rand_events():
    def kernel(x):
        nl.rand((4, 8), dtype=nl.float32)
        nl.rand((4, 8), dtype=nl.float32, buffer=nl.hbm)
    with nkisim.trace.record() as events:
        simulate(kernel, np.zeros((1, 1), F32))
    assert [(e.op, e.api, e.engine) for e in events] == [("rng", "nl.rand", "vector"),
                                                          ("dma_copy", "nl.rand", "dma")]


def test_rand_unknown_keyword():
    def kernel(x):
        nl.rand((4, 8), dtype=nl.float32, bufer=nl.sbuf)
    with pytest.raises(TypeError, match=r"^nl\.rand\(\) got an unexpected keyword argument 'bufer'; did you mean "
                                        r"'buffer'\?" + LOC):
        simulate(kernel, np.zeros((1, 1), F32))


def test_dropout_rate_dtype_and_one_instruction(rng):
    x = rng.uniform(1, 2, (128, 256)).astype(F32)

    def kernel(x):
        t = nl.load(x)
        return tile_out(nl.dropout(t, 0.25), nl.dropout(t, 0.25, dtype=nl.bfloat16))
    with nkisim.trace.record() as events:
        a, b = simulate(kernel, x)
    assert abs((a == 0).mean() - 0.25) < 4 * np.sqrt(0.25 * 0.75 / a.size)
    np.testing.assert_array_equal(a[a != 0], x[a != 0])              # survivors unscaled
    assert b.dtype == BF16
    np.testing.assert_array_equal(b[b != 0], x[b != 0].astype(BF16))  # rounded once into bf16
    drops = [e for e in events if e.op == "dropout"]
    assert [(e.api, e.engine) for e in drops] == [("nl.dropout", "vector")] * 2
    assert [o.role for o in drops[0].reads] == ["x"]


def test_dropout_per_partition_rate_tile():
    x = np.ones((4, 4096), F32)
    rate = np.array([[0.0], [0.5], [0.9], [1.0]], F32)

    def kernel(x, r):
        return tile_out(nl.dropout(nl.load(x), nl.load(r)))
    got = simulate(kernel, x, rate)
    np.testing.assert_allclose((got == 0).mean(axis=1), rate[:, 0], atol=0.03)


def test_dropout_rules_name_nl_dropout():
    x = np.ones((2, 4), F32)

    def kernel(x):
        nl.dropout(nl.load(x), 2.0)
    with pytest.raises(ArgumentError, match=r"^nl\.dropout: rate 2\.0 is outside \[0, 1\]" + LOC):
        simulate(kernel, x)

    def kernel_int(x, r):
        nl.dropout(nl.load(x), nl.load(r))
    with pytest.raises(DtypeError, match=r"^nl\.dropout: rate dtype bfloat16 must be float32 for int32 x" + LOC):
        simulate(kernel_int, np.ones((2, 4), np.int32), np.ones((2, 1), BF16))
